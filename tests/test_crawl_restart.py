"""A crawl survives what a batch survives: SIGKILL of `sift serve` mid-crawl (embedded
store), and several cluster runners sharing one crawl on PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from apphelpers import fetcher_for
from batchrig import FakeClock
from crawlsite import crawl_site
from servehelpers import sift_serve, write_config
from sift.assembly.runner import make_runner
from sift.batch.jobs import BatchJobs
from sift.config import BatchSettings, StoreSettings
from sift.crawl.submit import submit_crawl
from sift.dcache import DB, AsyncDB
from sift.principal import Principal
from sift.service import Service
from sift.store.postgres.store import PgBatchStore
from sift.workers import RenderPool
from test_batch_crash import CONFIG
from upstream import Upstream


async def _view(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/batch/{job_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


@pytest.mark.slow
async def test_sigkill_mid_crawl_then_restart(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await release.wait()
        n = request.path[2:]
        return web.Response(text=f'<a href="/g{n}">more</a>', content_type="text/html")

    async with Upstream() as up:
        links = [f"/f{i}" for i in range(5)] + [f"/h{i}" for i in range(10)]
        up.page("/", "".join(f'<a href="{p}">{p}</a>' for p in links))
        for i in range(5):
            up.page(f"/f{i}", f"<p>fast page {i}</p>")
        for i in range(10):
            up.page(f"/g{i}", f"<p>g {i}</p>")
        up.route("/h", hang, prefix=True)
        config = write_config(tmp_path, CONFIG)
        data = tmp_path / "data"
        body = {"url": up.url("/"), "sitemap": False}
        headers = {"Idempotency-Key": "crawl-crash"}
        with sift_serve(tmp_path, config=config, data_dir=data) as served:
            auth = {"Authorization": f"Bearer {served.fleet_key}"}
            async with httpx.AsyncClient(base_url=served.base_url, headers=auth) as client:
                r = await client.post("/v1/crawl", json=body, headers=headers)
                assert r.status_code == 202, r.text
                job_id = r.json()["id"]
                deadline = time.monotonic() + 30
                while True:
                    view = await _view(client, job_id)
                    if view["counts"]["done"] == 6 and view["counts"]["running"] == 4:
                        break
                    assert time.monotonic() < deadline, view
                    await asyncio.sleep(0.02)
                before = (await client.get(f"/v1/batch/{job_id}/results?limit=6")).json()
            served.kill_hard()

        with sift_serve(tmp_path, config=config, data_dir=data) as served:
            auth = {"Authorization": f"Bearer {served.fleet_key}"}
            async with httpx.AsyncClient(base_url=served.base_url, headers=auth) as client:
                view = await _view(client, job_id)
                assert (view["kind"], view["status"], view["error"]) == (
                    "crawl",
                    "failed",
                    "interrupted: sift restarted; resubmit the job",
                )
                assert view["targets_total"] == view["targets_done"] == 16
                assert view["counts"]["done"] == 6 and view["counts"]["failed"] == 10
                after = (await client.get(f"/v1/batch/{job_id}/results?limit=16")).json()
                assert after["items"][:6] == before["items"]  # finished pages kept, unchanged
                assert {i["error"]["code"] for i in after["items"][6:]} == {"interrupted"}
                # The same key after the failed crawl starts a new one, which completes.
                r = await client.post("/v1/crawl", json=body, headers=headers)
                assert r.status_code == 202, r.text
                new_id = r.json()["id"]
                assert new_id != job_id
                release.set()
                deadline = time.monotonic() + 60
                while (view := await _view(client, new_id))["status"] in ("queued", "running"):
                    assert time.monotonic() < deadline, view
                    await asyncio.sleep(0.05)
                assert view["status"] == "done" and view["targets_total"] == 26


async def test_two_cluster_runners_share_one_crawl(tmp_path: Path, pg_url: str) -> None:
    async with crawl_site(crawl_delay_s=0) as site:
        settings = dataclasses.replace(
            site.settings(tmp_path),
            batch=BatchSettings(concurrency=4, per_host=2),
            store=StoreSettings(url=pg_url, lease_s=30.0, renew_s=5.0),
        )
        async with contextlib.AsyncExitStack() as stack:
            pool = RenderPool(1)
            stack.callback(pool.close)
            nodes = []
            for n in range(2):
                adb = AsyncDB(DB.open(tmp_path / f"node{n}.db"))
                stack.push_async_callback(adb.close)
                fetcher = fetcher_for(settings)
                await fetcher.start()
                stack.push_async_callback(fetcher.close)
                store = await PgBatchStore.open(settings.store, migrate=False)
                stack.push_async_callback(store.close)
                service = Service(settings, adb, fetcher, render_pool=pool, clock=FakeClock())
                runner = make_runner(settings, store, service)
                stack.push_async_callback(runner.stop, 0)
                nodes.append((service, runner, BatchJobs(settings, store, runner)))
            owner = Principal("indexer", "fleet")
            view, created = await submit_crawl(
                nodes[0][2], nodes[0][0], owner, "k", {"url": site.m("/docs/")}, 1000
            )
            assert created
            await asyncio.gather(*(runner.run_until_idle() for _, runner, _ in nodes))
            status = await nodes[1][2].status(owner, view["id"], 1001)
            assert (status["kind"], status["status"], status["targets_total"]) == (
                "crawl",
                "done",
                8,
            )
            page = await nodes[1][2].results_page(owner, view["id"], 0, 100, 1001, 1 << 30)
    assert b'"depth":3' in page  # /docs/sub/deep/e.html, found three links down
    docs = {p: n for p, n in site.main.hits.items() if p.startswith("/docs/")}
    assert docs == {
        p: 1
        for p in (
            "/docs/",
            "/docs/a.html",
            "/docs/b.html",
            "/docs/sub/",
            "/docs/hidden.html",
            "/docs/sub/c.html",
            "/docs/sub/d.html",
            "/docs/sub/deep/e.html",
        )
    }
