"""`sift crawl` and `sift map`: in-process and against a server, NDJSON out, exit codes."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apphelpers import FLEET_KEY, make_settings, running_app
from sift.cli import main
from upstream import Upstream


@pytest.fixture
async def up() -> AsyncIterator[Upstream]:
    async with Upstream() as upstream:
        upstream.page("/", '<a href="/a">a</a> <a href="/b">b</a> <a href="/x.zip">zip</a>')
        upstream.page("/a", '<a href="/">home</a> <a href="/a/deeper">deeper</a>')
        upstream.page("/b", "<p>b</p>")
        upstream.page("/a/deeper", "<p>deeper</p>")
        yield upstream


def _local(tmp_path: Path) -> list[str]:
    return ["--data-dir", str(tmp_path / "d"), "--set", "render_workers=1"]


async def test_crawl_in_process_writes_ndjson_with_depth_and_parent(
    tmp_path: Path, up: Upstream, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pages.ndjson"
    argv = ["crawl", up.url("/"), "--max-depth", "1", "--scope", "host", "--out", str(out)]
    assert await asyncio.to_thread(main, [*argv, *_local(tmp_path), "--poll-s", "0.05"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"sift: job [0-9a-f]{24} done: 3 done, 0 failed, 0 cancelled of 3 in ", err)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["url"], r["depth"], r["parent"]) for r in lines) == [
        (up.url("/"), 0, None),
        (up.url("/a"), 1, 0),
        (up.url("/b"), 1, 0),
    ]
    assert up.hits["/a/deeper"] == 0 and up.hits["/x.zip"] == 0


async def test_crawl_exit_codes(
    tmp_path: Path, up: Upstream, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bad flag value is a bad request: exit 2, with the field named.
    code = await asyncio.to_thread(
        main, ["crawl", up.url("/"), "--max-pages", "0", *_local(tmp_path)]
    )
    assert code == 2
    assert "max_pages: expected an integer from 1 to 1000000" in capsys.readouterr().err
    # A start page that cannot be fetched fails the crawl: exit 1.
    code = await asyncio.to_thread(
        main, ["crawl", "http://127.0.0.1:1/", "--out", str(tmp_path / "o"), *_local(tmp_path)]
    )
    assert code == 1
    assert " failed: 0 done, 1 failed, 0 cancelled of 1 " in capsys.readouterr().err
    # Through a server, with the server's key.
    async with running_app(make_settings(tmp_path / "srv")) as base:
        argv = ["crawl", up.url("/"), "--server", base, "--key", FLEET_KEY, "--poll-s", "0.05"]
        out = tmp_path / "remote.ndjson"
        assert await asyncio.to_thread(main, [*argv, "--out", str(out)]) == 0
        assert len(out.read_text().splitlines()) == 4  # /, /a, /b, /a/deeper (prefix /)
        assert await asyncio.to_thread(main, [*argv[:3], base, "--key", "nope"]) == 1
        code = await asyncio.to_thread(
            main, ["map", up.url("/"), "--server", base, "--key", FLEET_KEY, "--no-sitemap"]
        )
        assert code == 0
    assert capsys.readouterr().out.splitlines() == [up.url(p) for p in ("/", "/a", "/b")]


async def test_map_in_process(
    tmp_path: Path, up: Upstream, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await asyncio.to_thread(main, ["map", up.url("/"), "--json", *_local(tmp_path)])
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "url": up.url("/"),
        "urls": [up.url(p) for p in ("/", "/a", "/b")],
        "count": 3,
        "truncated": False,
        "complete": True,
    }
    code = await asyncio.to_thread(main, ["map", up.url("/"), "--limit", "0", *_local(tmp_path)])
    assert code == 2
