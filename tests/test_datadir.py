"""One owner per data directory (issue 12 §5), against real `sift` processes.

A running server's live job must never be failed by a second process on its directory:
a second `sift serve` (on another port, or one that cannot bind) refuses with one line
naming the owner; in-process `sift batch` and `sift fetch` go through the running server
as the operator, `sift stats` reads its figures through it, `sift mcp` refuses. The first
server's job ends `done`.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from servehelpers import SIFT, free_port, sift_serve
from sift.cli import main
from sift.datadir import (
    LOCK_FILE,
    OPERATOR_FILE,
    DataDirLock,
    Owner,
    operator_credential,
    owner_of,
    prepare,
)
from sift.errors import ConfigError
from sift.keys import add_caller
from upstream import Upstream


def test_the_lock_names_its_owner_and_is_released(tmp_path: Path) -> None:
    held = DataDirLock.try_acquire(tmp_path, "batch")
    assert isinstance(held, DataDirLock)
    # flock is per open file: a second open in this very process is refused like another's.
    assert DataDirLock.try_acquire(tmp_path, "serve") == Owner(os.getpid(), "batch")
    held.announce("127.0.0.1:8123")
    key = held.write_operator_key()
    assert stat.S_IMODE((tmp_path / OPERATOR_FILE).stat().st_mode) == 0o600
    owner = DataDirLock.try_acquire(tmp_path, "serve")
    assert owner == Owner(os.getpid(), "batch", "127.0.0.1:8123")
    assert isinstance(owner, Owner)
    assert operator_credential(tmp_path, owner) == ("http://127.0.0.1:8123", key)
    # A key file left by another process (a crashed server) is never used.
    assert operator_credential(tmp_path, Owner(owner.pid + 1, "serve", owner.listen)) is None
    held.release()
    assert not (tmp_path / OPERATOR_FILE).exists()
    again = DataDirLock.try_acquire(tmp_path, "serve")
    assert isinstance(again, DataDirLock)
    again.release()
    assert (tmp_path / LOCK_FILE).exists()  # the file stays; only the lock is gone


def test_a_wildcard_listen_is_reached_on_loopback() -> None:
    assert Owner(1, "serve", "0.0.0.0:80").base_url() == "http://127.0.0.1:80"
    assert Owner(1, "serve", "[::]:80").base_url() == "http://[::1]:80"
    assert Owner(1, "serve", "[::1]:8080").base_url() == "http://[::1]:8080"
    assert Owner(1, "batch").base_url() is None


def test_prepare_refuses_a_file_with_one_line(tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("")
    with pytest.raises(ConfigError) as info:
        prepare(file)
    assert info.value.message == f"data_dir: {file}: exists and is not a directory"
    with pytest.raises(ConfigError) as info:
        prepare(file / "sub")
    assert info.value.message == f"data_dir: {file / 'sub'}: Not a directory"


async def arun(*args: str) -> tuple[int, str, str]:
    """A `sift` subprocess, awaited (the upstream runs on this test's event loop)."""
    proc = await asyncio.create_subprocess_exec(
        *SIFT, *args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`sift` run in this process (in a thread: the upstream runs on this event loop)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_second_process_never_fails_the_owners_live_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="slow page", content_type="text/plain")

    async with Upstream() as up:
        up.page("/fast", "fast page", content_type="text/plain")
        up.route("/slow", slow)
        # No caller class may reach loopback here: only the operator may. The operator's
        # deadline (the fleet class's) outlasts the slow page's hold.
        cfg = tmp_path / "sift.toml"
        cfg.write_text("[batch]\nshutdown_grace_s = 0.5\n[classes.fleet]\ntimeout_s = 600\n")
        config = (cfg, add_caller(cfg, "ops", "fleet"), add_caller(cfg, "agent", "restricted"))
        data = tmp_path / "data"
        with sift_serve(tmp_path, config=config, data_dir=data) as served:
            port = served.base_url.rsplit(":", 1)[1]
            owner_line = (
                f"sift: data_dir: {data}: in use by sift serve (pid {served.proc.pid}, "
                f"listening on 127.0.0.1:{port}); "
            )
            # The server's own job, held running on /slow. Submitted with the operator key
            # the server left for local commands (a fleet key here could not reach loopback).
            op_key = json.loads((data / OPERATOR_FILE).read_text())["key"]
            auth = {"Authorization": f"Bearer {op_key}"}
            async with httpx.AsyncClient(base_url=served.base_url, headers=auth) as client:
                r = await client.post(
                    "/v1/batch",
                    json={"targets": [up.url("/fast"), up.url("/slow")]},
                    headers={"Idempotency-Key": "live-job"},
                )
                assert r.status_code == 202, r.text
                job_id = r.json()["id"]
                deadline = time.monotonic() + 30
                while up.hits["/slow"] == 0:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)

                # 1. A second `sift serve` process on the same directory and port: it
                # refuses with one line naming the owner, before touching the store.
                code, _, err = await arun(
                    "serve", "--config", str(cfg), "--data-dir", str(data),
                    "--listen", f"127.0.0.1:{port}",
                )  # fmt: skip
                assert (code, err) == (
                    2,
                    owner_line + "stop it first, or give this one another --data-dir\n",
                )
                # The same from this (test) process, which is another process too — the rest
                # runs `sift` in-process here, to keep the test short on a loaded machine.
                # 2. A second server on another port: refused the same way.
                code, _, err = await cli(
                    capsys, "serve", "--config", str(cfg), "--data-dir", str(data),
                    "--listen", f"127.0.0.1:{free_port()}",
                )  # fmt: skip
                assert (code, err) == (
                    2,
                    owner_line + "stop it first, or give this one another --data-dir\n",
                )
                # 3. A server on another directory that cannot bind the port: one line,
                # exit 2, and its own directory is left without a database (and unlocked).
                other = tmp_path / "other"
                code, _, err = await cli(
                    capsys, "serve", "--data-dir", str(other), "--listen", f"127.0.0.1:{port}"
                )
                assert (code, err) == (
                    2,
                    f"sift: listen: 127.0.0.1:{port}: cannot bind: Address already in use\n",
                )
                assert not (other / "sift.db").exists()
                assert owner_of(other) is None

                # 4. In-process `sift batch` and `sift fetch` go through the server, as the
                # operator (which may reach loopback).
                urls = tmp_path / "urls.txt"
                urls.write_text(up.url("/fast") + "\n")
                out = tmp_path / "out.ndjson"
                code, _, err = await cli(
                    capsys, "batch", str(urls), "--config", str(cfg), "--data-dir", str(data),
                    "--out", str(out), "--poll-s", "0.05",
                )  # fmt: skip
                assert code == 0, err
                going_through = (
                    f"sift: {data} belongs to sift serve (pid {served.proc.pid}, "
                    f"listening on 127.0.0.1:{port}); going through it\n"
                )
                assert err.startswith(going_through)
                (line,) = out.read_text().splitlines()
                assert json.loads(line)["result"]["content"] == "fast page"
                code, stdout, err = await cli(
                    capsys, "fetch", up.url("/fast"), "--config", str(cfg), "--data-dir", str(data)
                )
                assert (code, stdout) == (0, "fast page\n"), err

                # 5. `sift stats` goes through it too: the server's figures, as of now (one
                # page, fetched once by the job and served twice from the cache since).
                code, stdout, err = await cli(
                    capsys, "stats", "--json", "--config", str(cfg), "--data-dir", str(data)
                )
                assert (code, err) == (0, going_through)
                stats = json.loads(stdout)
                assert (stats["pages"], stats["robots"], stats["batch_jobs"]) == (1, 1, 2)
                assert (stats["hits"], stats["misses"], stats["hit_rate"]) == (2, 1, 0.6667)
                health = (await client.get("/healthz")).json()
                assert stats["browser"]["state"] == health["browser"]
                # `sift mcp` cannot go through it: it refuses, one line.
                code, _, err = await cli(
                    capsys, "mcp", "--config", str(cfg), "--data-dir", str(data)
                )
                assert (code, err) == (
                    2,
                    owner_line + "let the agent use that server's /mcp endpoint (docs/mcp.md), "
                    "or give sift mcp its own --data-dir\n",
                )

                # The first server's job was never touched: release the page, it ends done.
                release.set()
                deadline = time.monotonic() + 30
                while True:
                    view = (await client.get(f"/v1/batch/{job_id}")).json()
                    if view["status"] not in ("queued", "running"):
                        break
                    assert time.monotonic() < deadline, view
                    await asyncio.sleep(0.05)
                assert (view["status"], view["error"], view["counts"]["done"]) == ("done", "", 2)
        assert served.proc.returncode == 0, served.output
        assert not (data / OPERATOR_FILE).exists()  # removed at stop
    # Once the server has stopped, the directory is free for in-process commands again.
    code, stdout, err = await cli(
        capsys, "stats", "--config", str(cfg), "--data-dir", str(data), "--json"
    )
    assert code == 0, err
    assert json.loads(stdout)["batch_jobs"] == 2
