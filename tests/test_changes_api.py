"""``changes`` through the front ends: /v1/fetch (POST and GET), the Python client, the MCP
fetch tool over HTTP with the SDK's client, and ``sift fetch --changes`` in-process.

Real app on loopback, real upstream on the pseudo-public 127.0.1.1 (so the restricted
caller runs the whole guard). The service's own rules are in tests/test_changes.py.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from apphelpers import FLEET_KEY, PUBLIC_HOST, RESTRICTED_KEY, auth, make_settings, running_app
from mcphelpers import call, mcp_http_session, texts
from servehelpers import SIFT
from sift.cli import build_parser
from sift.cli.fetch import _fetch_options
from sift.client import AsyncClient
from syncupstream import serve_pages
from upstream import Upstream


def html(text: str) -> str:
    return f"<html><body><main><h1>Notes</h1><p>{text}</p></main></body></html>"


@pytest.fixture
async def up() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as server:
        yield server


@pytest.fixture
async def base(tmp_path: Path, up: Upstream) -> AsyncIterator[str]:
    async with running_app(make_settings(tmp_path, upstream_port=up.port)) as url:
        yield url


async def test_the_api_answers_change_and_never_replays_a_remembered_answer(
    base: str, up: Upstream
) -> None:
    up.page("/n", html("One."))
    url = up.url("/n", host="pub.test")
    async with httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY)) as http:
        first = (await http.post("/v1/fetch", json={"url": url, "changes": True})).json()
        assert (first["cache"], first["change"]["status"]) == ("miss", "new")
        # Identical request, a cache hit: the answer is compared again, not replayed.
        second = (await http.post("/v1/fetch", json={"url": url, "changes": True})).json()
        assert (second["cache"], second["change"]["status"]) == ("hit", "same")
        assert second["change"]["previous_digest"] == first["digest"]
        # The same history compared without the heading: changed ...
        third = await http.post("/v1/fetch", json={"url": url, "changes": True, "ignore": ["h1"]})
        assert (third.json()["cache"], third.json()["change"]["status"]) == ("hit", "changed")
        # ... so the second request, sent again, must say changed too (a remembered answer
        # would say same).
        fourth = (await http.post("/v1/fetch", json={"url": url, "changes": True})).json()
        assert (fourth["cache"], fourth["change"]["status"]) == ("hit", "changed")
        assert fourth["change"]["diff"] == (
            "--- previous\n+++ current\n@@ -1 +1,3 @@\n+# Notes\n+\n One.\n"
        )
        got = await http.get(
            "/v1/fetch", params={"url": url, "changes": "true", "ignore": "h1", "tag": "t"}
        )
        assert got.json()["change"]["status"] == "new"  # its own tag
        plain = (await http.post("/v1/fetch", json={"url": url})).json()
        assert "change" not in plain
        refused = await http.post("/v1/fetch", json={"url": url, "tag": "t"})
        assert (refused.status_code, refused.json()["error"]["message"]) == (
            422,
            "invalid options: tag: only with changes=true",
        )
    # Another caller (restricted, on the same page) has a history of its own.
    async with httpx.AsyncClient(base_url=base, headers=auth(RESTRICTED_KEY)) as http:
        other = (await http.post("/v1/fetch", json={"url": url, "changes": True})).json()
        assert (other["change"]["status"], other["change"]["previous_fetched_at"]) == ("new", None)
    up.page("/n", html("Two."))
    async with AsyncClient(base, FLEET_KEY) as client:
        env = await client.fetch(url, changes=True, max_age_s=0)
    assert env.change is not None
    assert (env.change["status"], env.change["added"], env.change["removed"]) == (
        "changed",
        1,
        1,
    )
    assert (
        env.change["diff"]
        == "--- previous\n+++ current\n@@ -1,3 +1,3 @@\n # Notes\n \n-One.\n+Two.\n"
    )


async def test_the_mcp_fetch_tool_tells_the_change_and_gives_the_diff(
    base: str, up: Upstream
) -> None:
    up.page("/m", html("One."))
    url = up.url("/m", host="pub.test")
    async with mcp_http_session(base, FLEET_KEY) as session:
        first = texts(await call(session, "fetch", {"url": url, "changes": True}))
        assert len(first) == 2 and "\nchange: new\n" in first[1]
        digest = re.search(r"digest: (sha256:[0-9a-f]{64})", first[1])
        assert digest is not None
        up.page("/m", html("Two."))
        # The MCP tool takes no max_age_s: an ordinary fresh fetch refreshes the cached copy
        # (newer than the snapshot, so the changes fetch may be answered from it).
        async with httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY)) as http:
            await http.post("/v1/fetch", json={"url": url, "max_age_s": 0})
        second = texts(await call(session, "fetch", {"url": url, "changes": True}))
    assert second[0] == "# Notes\n\nTwo."
    line = re.search(r"\nchange: (.*)\n", second[1])
    assert line is not None
    assert re.fullmatch(
        rf"changed \+1 -1 \| previous \d+ \({re.escape(digest.group(1))}\)", line.group(1)
    )
    assert second[2] == "--- previous\n+++ current\n@@ -1,3 +1,3 @@\n # Notes\n \n-One.\n+Two.\n"


def test_sift_fetch_changes_in_process(tmp_path: Path) -> None:
    pages = {"/c": (html("One."), "text/html; charset=utf-8")}
    data = str(tmp_path / "d")
    with serve_pages(pages) as server:
        url = f"{server.base_url}/c"
        args = ["fetch", url, "--data-dir", data, "--no-robots", "--changes"]
        proc = subprocess.run([*SIFT, *args], capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            0,
            "# Notes\n\nOne.\n",
            "sift: new\n",
        )
        pages["/c"] = (html("Two."), "text/html; charset=utf-8")
        args += ["--max-age-s", "0"]
        proc = subprocess.run([*SIFT, *args], capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stdout) == (0, "# Notes\n\nTwo.\n")
        assert re.fullmatch(
            r"sift: changed \(\+1 -1\) since \d+\n--- previous\n\+\+\+ current\n"
            r"@@ -1,3 \+1,3 @@\n # Notes\n \n-One.\n\+Two.\n",
            proc.stderr,
        ), proc.stderr


def test_sift_fetch_flags_become_options() -> None:
    args = build_parser().parse_args(
        ["fetch", "http://e.test/", "--changes", "--tag", "t", "--ignore", ".a", "--ignore", "b"]
    )
    assert _fetch_options(args) == {"changes": True, "tag": "t", "ignore": [".a", "b"]}
