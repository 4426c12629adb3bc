"""`sift batch`: in-process and against a server, NDJSON out, exit codes, Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from apphelpers import FLEET_KEY, auth, make_settings, running_app
from sift.cli import main
from upstream import Upstream

SIFT = [sys.executable, "-m", "sift.cli"]


@pytest.fixture
async def up() -> AsyncIterator[Upstream]:
    async with Upstream() as upstream:
        for i in range(3):
            upstream.page(f"/p{i}", f"page {i}", content_type="text/plain")
        yield upstream


async def _polled(base: str) -> bool:
    """Whether a job's status has been asked for (the server's request counter says)."""
    async with httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY)) as client:
        metrics = (await client.get("/metrics")).text
    polls = r'^sift_requests_total\{[^}]*route="/v1/batch/\{job_id\}",status="200"'
    return re.search(polls, metrics, re.M) is not None


def _job_id(stderr: str) -> str:
    m = re.search(r"sift: job ([0-9a-f]{24}) ", stderr)
    assert m, stderr
    return m.group(1)


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_in_process_run_then_the_same_list_again(
    tmp_path: Path, up: Upstream, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text(f"# three pages\n{up.url('/p0')}\n\n  {up.url('/p1')}\n{up.url('/p2')}\n")
    out = tmp_path / "out.ndjson"
    argv = ["batch", str(urls), "--data-dir", str(tmp_path / "d"), "--out", str(out)]
    argv += ["--set", "render_workers=1", "--poll-s", "0.05"]
    assert await asyncio.to_thread(main, argv) == 0
    err = capsys.readouterr().err
    job = _job_id(err)
    assert f"sift: job {job} done: 3 done, 0 failed, 0 cancelled of 3 in " in err
    lines = _lines(out)
    assert [(r["idx"], r["url"], r["status"]) for r in lines] == [
        (i, up.url(f"/p{i}"), "done") for i in range(3)
    ]
    assert [r["result"]["content"] for r in lines] == ["page 0", "page 1", "page 2"]  # type: ignore[index]
    # The same list is the same job: nothing is fetched again, the same results come out.
    hits = dict(up.hits)
    again = tmp_path / "again.ndjson"
    argv[argv.index(str(out))] = str(again)
    assert await asyncio.to_thread(main, argv) == 0
    assert _job_id(capsys.readouterr().err) == job
    assert dict(up.hits) == hits
    assert again.read_bytes() == out.read_bytes()


async def test_a_failed_target_makes_the_exit_status_1(
    tmp_path: Path, up: Upstream, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text(f"{up.url('/p0')}\nhttp://127.0.0.1:1/\n")
    out = tmp_path / "out.ndjson"
    argv = ["batch", str(urls), "--data-dir", str(tmp_path / "d"), "--out", str(out)]
    assert await asyncio.to_thread(main, [*argv, "--set", "render_workers=1"]) == 1
    assert " partial: 1 done, 1 failed, 0 cancelled of 2 " in capsys.readouterr().err
    assert [r["status"] for r in _lines(out)] == ["done", "failed"]


async def test_submits_to_a_server(
    tmp_path: Path, up: Upstream, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text("\n".join(up.url(f"/p{i}") for i in range(3)))
    out = tmp_path / "out.ndjson"
    async with running_app(make_settings(tmp_path / "srv")) as base:
        argv = ["batch", str(urls), "--server", base, "--key", FLEET_KEY, "--out", str(out)]
        assert await asyncio.to_thread(main, [*argv, "--idem", "mine", "--poll-s", "0.05"]) == 0
        job = _job_id(capsys.readouterr().err)
        async with httpx.AsyncClient(base_url=base) as client:
            view = (await client.get(f"/v1/batch/{job}", headers=auth(FLEET_KEY))).json()
        # A wrong key is the server's error, printed with its hint.
        assert await asyncio.to_thread(main, [*argv[:4], "--key", "nope"]) == 1
        err = capsys.readouterr().err
    assert view["status"] == "done"
    assert [r["result"]["content"] for r in _lines(out)] == ["page 0", "page 1", "page 2"]  # type: ignore[index]
    assert "sift: unknown key\nhint: Send 'Authorization: Bearer <key>'" in err


def test_an_empty_list_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text("# nothing\n\n")
    assert main(["batch", str(urls), "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"sift: {urls} lists no URLs\n"


@pytest.mark.parametrize("mode", ["in-process", "server"])
async def test_ctrl_c_cancels_the_job_and_says_so(tmp_path: Path, mode: str) -> None:
    async def hang(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="late", content_type="text/plain")

    async with Upstream() as up, running_app(make_settings(tmp_path / "srv")) as base:
        up.route("/h", hang, prefix=True)
        urls = tmp_path / "urls.txt"
        urls.write_text("\n".join(up.url(f"/h{i}") for i in range(10)))
        where = (
            ["--server", base, "--key", FLEET_KEY]
            if mode == "server"
            else ["--data-dir", str(tmp_path / "d"), "--set", "render_workers=1"]
        )
        # A process group of its own, signalled as a terminal signals its foreground job:
        # the in-process run's render workers get the SIGINT too (issue 21 §4).
        proc = await asyncio.create_subprocess_exec(
            *SIFT, "batch", str(urls), *where, "--out", str(tmp_path / "out.ndjson"),
            "--poll-s", "0.05",
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        # Ctrl-C once the job is fetching and the command knows it: against a server the
        # first fetch can start before the command has read the job's id (on a loaded
        # machine it was signalled in between), so there also wait for its first poll.
        while not any(p.startswith("/h") for p in up.hits) or (
            mode == "server" and not await _polled(base)
        ):
            assert time.monotonic() < deadline and proc.returncode is None
            await asyncio.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        _, err_bytes = await asyncio.wait_for(proc.communicate(), 30)
    err = err_bytes.decode()
    assert proc.returncode == 130, err
    job = _job_id(err)
    assert (
        f"sift: interrupted; cancelling job {job} and writing the results it has "
        "(Ctrl-C again to stop now)\n"
    ) in err
    assert f"sift: job {job} cancelled: 0 done, 0 failed, 10 cancelled of 10 " in err
    assert "Traceback" not in err
    lines = _lines(tmp_path / "out.ndjson")
    assert {r["status"] for r in lines} == {"cancelled"} and len(lines) == 10
