"""`sift mcp` as a subprocess, driven by the MCP SDK's own client over stdio.

Every tool is called on a local upstream (127.0.0.1). With no flags the subprocess is a
restricted caller, refused loopback; `--operator` (and `--class fleet` where the config lets
fleet reach private addresses) may reach it; with `--key` it runs as that caller and its
class's guard.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from mcphelpers import call, error_of, texts
from servehelpers import SIFT, write_config
from sift.config import Settings
from sift.mcp.refusal import tell_client
from sift.mcp.stdio import principal_for_key
from sift.principal import Principal
from upstream import Upstream

LONG = "".join(f"line {i:04d}\n" for i in range(400))  # 4,000 bytes of text
PAGE = (
    "<html><head><title>Batch {n}</title></head><body><article><h1>Heading {n}</h1>"
    "<p>Paragraph {n} is long enough to be the main content of this small test page.</p>"
    "</article></body></html>"
)


@asynccontextmanager
async def mcp_stdio(tmp_path: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sift.cli", "mcp", "--data-dir", str(tmp_path / "data"), *extra],
    )
    # The server's standard error goes to a file (pytest's capture has no file descriptor).
    with open(tmp_path / "stderr.log", "w") as errlog:  # noqa: ASYNC230 (local, tiny)
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def wait_finished(session: ClientSession, job_id: str) -> dict[str, Any]:
    for _ in range(400):
        view = (await call(session, "batch_status", {"id": job_id})).structured_content
        assert view is not None
        if view["status"] not in ("queued", "running"):
            return view
        await asyncio.sleep(0.05)  # polling a job that runs in another process
    raise AssertionError("batch job did not finish")


async def test_every_tool_over_stdio(tmp_path: Path) -> None:
    async with Upstream() as up:
        up.page("/long", LONG, content_type="text/plain; charset=utf-8")
        for n in (1, 2):
            up.page(f"/b{n}", PAGE.format(n=n))
        async with mcp_stdio(tmp_path, "--operator") as session:
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == [
                "fetch",
                "batch_submit",
                "batch_status",
                "batch_results",
                "crawl",
                "map",
                "watch",
                "watches",
                "changes",
            ]
            fetch_schema = listed.tools[0].input_schema
            assert list(fetch_schema["properties"]) == [
                "url",
                "format",
                "max_bytes",
                "offset",
                "digest",
                "main_content",
                "selector",
                "engine",
                "wait_for",
                "headers",
                "cookies",
                "actions",
                "screenshot",
                "changes",
                "tag",
                "ignore",
            ]
            assert (fetch_schema["required"], fetch_schema["additionalProperties"]) == (
                ["url"],
                False,
            )

            # fetch: a capped slice, then the footer's exact continuation of the snapshot.
            url = up.url("/long")
            first = await call(session, "fetch", {"url": url, "format": "text", "max_bytes": 995})
            assert first.is_error is False
            body, foot = texts(first)
            assert body == LONG[:990]  # cut at the line boundary below 995 bytes
            digest = re.search(r'digest="(sha256:[0-9a-f]{64})"', foot)
            assert digest is not None
            assert foot == (
                "---\n"
                "title: (none)\n"
                f"final_url: {url}\n"
                "status: 200 | text/plain; charset=utf-8 | cache miss\n"
                "bytes: 0-990 of 4000 | truncated: yes\n"
                f'to read on, call fetch(url="{url}", format="text", max_bytes=995, offset=990, '
                f'digest="{digest.group(1)}")'
            )
            pieces = [body]
            offset = 990
            while True:
                args = {"url": url, "format": "text", "max_bytes": 995}
                more = await call(session, "fetch", {**args, "offset": offset, "digest": digest[1]})
                body, foot = texts(more)
                pieces.append(body)
                if "truncated: no" in foot:
                    assert foot.endswith(f"\ndigest: {digest[1]}")
                    break
                offset = int(re.search(r"offset=(\d+)", foot)[1])  # type: ignore[index]
            assert "".join(pieces) == LONG
            assert up.hits["/long"] == 1  # read on from the snapshot, never re-downloaded

            # Errors are tool errors with code, message and hint.
            bad = error_of(await call(session, "fetch", {"url": "ftp://example.com/"}))
            assert bad["code"] == "invalid_url"
            typo = error_of(await call(session, "fetch", {"url": url, "max_byte": 5}))
            assert typo == {
                "code": "invalid_request",
                "message": "fetch: unknown argument max_byte",
                "hint": "fetch takes: url, format, max_bytes, offset, digest, main_content, "
                "selector, engine, wait_for, headers, cookies, actions, screenshot, changes, tag, "
                "ignore.",
            }
            missing = error_of(await call(session, "fetch", {}))
            assert (missing["code"], missing["message"]) == (
                "invalid_request",
                "invalid options: url: required",
            )
            unknown = error_of(await call(session, "browse", {"url": url}))
            assert unknown["message"] == "unknown tool 'browse'"

            # batch_submit → batch_status → batch_results, then a result read through fetch.
            urls = [up.url("/b1"), up.url("/b2")]
            submitted = await call(session, "batch_submit", {"urls": urls})
            job = submitted.structured_content
            assert job is not None
            assert (job["created"], job["status"], job["targets_total"]) == (True, "queued", 2)
            again = (await call(session, "batch_submit", {"urls": urls})).structured_content
            assert again is not None and (again["id"], again["created"]) == (job["id"], False)
            done = await wait_finished(session, job["id"])
            assert (done["status"], done["targets_done"]) == ("done", 2)
            page1 = await call(session, "batch_results", {"id": job["id"], "limit": 1})
            out = page1.structured_content
            assert out is not None
            assert out["next_offset"] == 1 and out["status"] == "done"
            (item,) = out["items"]
            assert {k: v for k, v in item.items() if k != "digest"} == {
                "idx": 0,
                "url": urls[0],
                "status": "done",
                "http_status": 200,
                "title": "Batch 1",
                "final_url": urls[0],
                "bytes": 87,
                "total_bytes": 87,
                "truncated": False,
            }
            page2 = await call(session, "batch_results", {"id": job["id"], "offset": 1})
            assert page2.structured_content is not None
            assert page2.structured_content["next_offset"] is None
            assert [i["idx"] for i in page2.structured_content["items"]] == [1]
            read = await call(session, "fetch", {"url": urls[0], "digest": item["digest"]})
            content, foot = texts(read)
            assert content == (
                "# Heading 1\n\n"
                "Paragraph 1 is long enough to be the main content of this small test page."
            )
            assert "| cache hit\n" in foot
            assert (up.hits["/b1"], up.hits["/b2"]) == (1, 1)  # nothing fetched twice
            gone = error_of(await call(session, "batch_status", {"id": "no-such-job"}))
            assert gone["code"] == "not_found"
            bad_args = [
                (
                    "batch_results",
                    {"id": job["id"], "limit": 0},
                    "limit: expected an integer from 1 to 100",
                ),
                ("batch_submit", {"urls": urls[0]}, "urls: expected a list of URL strings"),
                (
                    "batch_submit",
                    {"urls": urls, "idempotency_key": "two\nlines"},
                    "idempotency_key: expected 1-255 printable ASCII characters",
                ),
            ]
            for tool, args, message in bad_args:
                err = error_of(await call(session, tool, args))
                assert (err["code"], err["message"]) == ("invalid_request", message)


async def test_stdio_as_a_named_restricted_caller(tmp_path: Path) -> None:
    cfg, _fleet, restricted = write_config(tmp_path)
    async with Upstream() as up:
        up.page("/p", PAGE.format(n=0))
        async with mcp_stdio(tmp_path, "--config", str(cfg), "--key", restricted) as session:
            err = error_of(await call(session, "fetch", {"url": up.url("/p")}))
            assert err["code"] == "blocked_address"
        assert up.hits["/p"] == 0


def test_stdio_refuses_an_unknown_key(tmp_path: Path) -> None:
    cfg, _fleet, _restricted = write_config(tmp_path)
    proc = subprocess.run(
        [*SIFT, "mcp", "--config", str(cfg), "--data-dir", str(tmp_path), "--key", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("sift: --key: no caller with this key is configured\nhint: ")


def test_without_a_key_it_is_a_restricted_caller() -> None:
    assert principal_for_key(Settings(), None) == Principal("stdio", "restricted")


async def test_no_flags_is_restricted_and_refused_loopback(tmp_path: Path) -> None:
    async with Upstream() as up:
        up.page("/p", PAGE.format(n=0))
        async with mcp_stdio(tmp_path) as session:
            err = error_of(await call(session, "fetch", {"url": up.url("/p")}))
            assert err["code"] == "blocked_address"
            # A batch of it is refused at submit, naming the URL (nothing stored or fetched);
            # a crawl's start URL alike.
            url = up.url("/p")
            job = error_of(await call(session, "batch_submit", {"urls": [url]}))
            assert (job["code"], job["message"]) == (
                "invalid_request",
                f"1 of 1 targets are refused before any fetch: [0] {url}: blocked_address (its "
                "host, address or port is outside this caller's egress policy)",
            )
            crawl = error_of(await call(session, "crawl", {"url": url}))
            assert crawl["message"] == (
                f"the start URL is refused before any fetch: {url}: blocked_address (its "
                "host, address or port is outside this caller's egress policy)"
            )
        assert up.hits["/p"] == 0


@pytest.mark.parametrize("who", ["--operator", "--class=fleet"])
async def test_operator_and_fleet_class_reach_loopback(tmp_path: Path, who: str) -> None:
    cfg, _fleet, _restricted = write_config(tmp_path)  # fleet: allow_private = true
    async with Upstream() as up:
        up.page("/p", PAGE.format(n=0))
        async with mcp_stdio(tmp_path, "--config", str(cfg), who) as session:
            content, _foot = texts(await call(session, "fetch", {"url": up.url("/p")}))
        assert content.startswith("# Heading 0\n")
        assert up.hits["/p"] == 1


def test_operator_is_exclusive_with_key_and_class(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*SIFT, "mcp", "--data-dir", str(tmp_path), "--operator", "--class", "fleet"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "argument --class: not allowed with argument --operator" in proc.stderr


async def test_why_it_cannot_start_is_the_answer_to_initialize(tmp_path: Path) -> None:
    """A key no caller has: the SDK's initialize raises sift's reason (and its error object
    as data), not a bare "Connection closed"; standard error says it too."""
    cfg, _fleet, _restricted = write_config(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=[*SIFT[1:], "mcp", "--config", str(cfg), "--data-dir", str(tmp_path), "--key", "nope"],
    )
    with open(tmp_path / "stderr.log", "w") as errlog:  # noqa: ASYNC230 (local, tiny)
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with pytest.raises(MCPError) as info:
                await session.initialize()
    hint = (
        "Pass a key issued with `sift keys add` for this config, or use --class instead of --key."
    )
    assert (info.value.code, info.value.message) == (
        -32603,
        f"sift mcp could not start: --key: no caller with this key is configured (hint: {hint})",
    )
    assert info.value.data == {
        "code": "unauthorized",
        "message": "--key: no caller with this key is configured",
        "hint": hint,
    }
    assert (tmp_path / "stderr.log").read_text() == (
        f"sift: --key: no caller with this key is configured\nhint: {hint}\n"
    )


def test_the_refusal_answers_the_first_request_and_waits_for_nothing_else() -> None:
    """A notification first (no id: never answered), then the request: answered by id. A
    client that sends nothing gets nothing once ``wait_s`` is over."""
    read_fd, write_fd = os.pipe()
    out_read, out_write = os.pipe()
    with (
        os.fdopen(read_fd, "rb", buffering=0) as stdin,
        os.fdopen(write_fd, "wb", buffering=0) as client,
        os.fdopen(out_write, "wb") as stdout,
        os.fdopen(out_read, "rb") as answers,
    ):
        client.write(b'{"jsonrpc":"2.0","method":"notifications/x"}\n{"jsonrpc":"2.0",')
        client.write(b'"id":"a1","method":"initialize","params":{}}\n')
        assert tell_client("why", {"code": "c"}, stdin=stdin, stdout=stdout) is True
        stdout.close()
        assert json.loads(answers.read()) == {
            "jsonrpc": "2.0",
            "id": "a1",
            "error": {"code": -32603, "message": "why", "data": {"code": "c"}},
        }
        assert tell_client("why", stdin=stdin, stdout=io.BytesIO(), wait_s=0.05) is False
