"""Restart safety: a real `sift serve` killed with SIGKILL in the middle of a batch."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from servehelpers import sift_serve, write_config
from upstream import Upstream

CONFIG = "[batch]\nconcurrency = 4\nper_host = 4\nshutdown_grace_s = 0.5\n"


async def _view(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/batch/{job_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_sigkill_mid_batch_then_restart(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text=f"late {request.path}", content_type="text/plain")

    async with Upstream() as up:
        for i in range(5):
            up.page(f"/f{i}", f"fast page {i}", content_type="text/plain")
        up.route("/h", hang, prefix=True)
        targets = [up.url(f"/f{i}") for i in range(5)] + [up.url(f"/h{i}") for i in range(15)]
        config = write_config(tmp_path, CONFIG)
        data = tmp_path / "data"
        headers = {"Idempotency-Key": "crash-1"}

        with sift_serve(tmp_path, config=config, data_dir=data) as served:
            auth = {"Authorization": f"Bearer {served.fleet_key}"}
            async with httpx.AsyncClient(base_url=served.base_url, headers=auth) as client:
                r = await client.post("/v1/batch", json={"targets": targets}, headers=headers)
                assert r.status_code == 202, r.text
                job_id = r.json()["id"]
                deadline = time.monotonic() + 30
                while True:
                    counts = (await _view(client, job_id))["counts"]
                    if counts["done"] == 5 and counts["running"] == 4:
                        break
                    assert time.monotonic() < deadline, counts
                    await asyncio.sleep(0.02)
                before = (await client.get(f"/v1/batch/{job_id}/results?limit=5")).json()
            served.kill_hard()

        with sift_serve(tmp_path, config=config, data_dir=data) as served:
            auth = {"Authorization": f"Bearer {served.fleet_key}"}
            async with httpx.AsyncClient(base_url=served.base_url, headers=auth) as client:
                view = await _view(client, job_id)
                assert (view["status"], view["error"]) == (
                    "failed",
                    "interrupted: sift restarted; resubmit the job",
                )
                assert view["counts"] == {
                    "pending": 0,
                    "running": 0,
                    "done": 5,
                    "failed": 15,
                    "cancelled": 0,
                }
                assert view["targets_done"] == 20
                after = (await client.get(f"/v1/batch/{job_id}/results?limit=20")).json()
                # Every result that had finished is still there, unchanged.
                assert after["items"][:5] == before["items"]
                assert [i["result"]["content"] for i in after["items"][:5]] == [
                    f"fast page {i}" for i in range(5)
                ]
                assert {i["error"]["code"] for i in after["items"][5:]} == {"interrupted"}
                # The same key after a failed job starts a new job, which completes.
                r = await client.post("/v1/batch", json={"targets": targets}, headers=headers)
                assert r.status_code == 202, r.text
                new_id = r.json()["id"]
                assert new_id != job_id
                release.set()
                deadline = time.monotonic() + 30
                while (view := await _view(client, new_id))["status"] in ("queued", "running"):
                    assert time.monotonic() < deadline, view
                    await asyncio.sleep(0.02)
                assert view["status"] == "done"
                assert view["counts"]["done"] == 20

    with sqlite3.connect(data / "sift.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_sigterm_gives_running_targets_a_grace_then_exits_cleanly(tmp_path: Path) -> None:
    async def hang(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="late", content_type="text/plain")

    async with Upstream() as up:
        up.page("/fast", "fast", content_type="text/plain")
        up.route("/h", hang, prefix=True)
        config = write_config(tmp_path, CONFIG)
        data = tmp_path / "data"
        with sift_serve(tmp_path, config=config, data_dir=data) as served:
            auth = {"Authorization": f"Bearer {served.fleet_key}"}
            async with httpx.AsyncClient(base_url=served.base_url, headers=auth) as client:
                body = {"targets": [up.url("/fast"), up.url("/h0"), up.url("/h1")]}
                r = await client.post("/v1/batch", json=body, headers={"Idempotency-Key": "t"})
                job_id = r.json()["id"]
                while (await _view(client, job_id))["counts"]["running"] < 2:
                    await asyncio.sleep(0.02)
            started = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            out = await asyncio.to_thread(served.wait_output, 30)
            assert served.proc.returncode == 0, out
            assert "Traceback" not in out
            # The grace period (0.5 s) passed, the hanging targets were let go.
            assert time.monotonic() - started < 10

        with sift_serve(tmp_path, config=config, data_dir=data) as served:
            auth = {"Authorization": f"Bearer {served.fleet_key}"}
            async with httpx.AsyncClient(base_url=served.base_url, headers=auth) as client:
                view = await _view(client, job_id)
    assert (view["status"], view["error"]) == (
        "failed",
        "interrupted: sift restarted; resubmit the job",
    )
    assert view["counts"] == {"pending": 0, "running": 0, "done": 1, "failed": 2, "cancelled": 0}
