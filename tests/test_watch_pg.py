"""Watches on a real PostgreSQL shared by two nodes: each due check runs on exactly one node,
once per interval; the quota holds under concurrent creates; a stale claim writes nothing.

Two nodes = two assembled sifts (own data dir, own fetcher, service and scheduler) on one
database, driven by one fake clock: each step moves the clock and runs both schedulers'
``run_due()`` at the same time; the upstream counts every request."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from batchrig import T0, FakeClock
from sift.errors import QuotaExceeded
from sift.store.watches import WatchEvent
from upstream import Upstream
from watchrig import INDEXER, watch_rig, watch_settings

pytestmark = pytest.mark.timeout(120)


async def test_each_due_check_runs_on_exactly_one_of_two_nodes(tmp_path: Path, pg_url: str) -> None:
    hits: dict[str, int] = {}

    async def slow(request: web.Request) -> web.StreamResponse:
        hits[request.path] = hits.get(request.path, 0) + 1
        await asyncio.sleep(0.01)  # long enough for both nodes to be claiming at once
        return web.Response(text=f"page {request.path}", content_type="text/plain")

    settings = watch_settings(tmp_path, store_url=pg_url, concurrency=3, claim_batch=2)
    clock = FakeClock()
    async with (
        Upstream() as up,
        watch_rig(settings, clock, data_dir=tmp_path / "a") as a,
        watch_rig(settings, clock, data_dir=tmp_path / "b") as b,
    ):
        up.route("/w", slow, prefix=True)  # type: ignore[arg-type]
        ids = [
            (await (a if i % 2 else b).create(INDEXER, {"url": up.url(f"/w{i}"), "every": 10}))[
                "id"
            ]
            for i in range(20)
        ]
        ran = []
        for at in (0, 3, 10, 15, 20, 29):
            clock.now = T0 + at
            ran.append(await asyncio.gather(a.scheduler.run_due(), b.scheduler.run_due()))
        assert [x + y for x, y in ran] == [20, 0, 20, 0, 20, 0]
        assert hits == {f"/w{i}": 3 for i in range(20)}
        # Both nodes took part (each can run three at once; twenty were due together).
        assert a.scheduler.checks_done > 0 and b.scheduler.checks_done > 0
        assert a.scheduler.checks_done + b.scheduler.checks_done == 60
        for wid in ids:
            shown = await a.watches.get(INDEXER, wid, 10)
            assert [e["seq"] for e in shown["events"]] == [3, 2, 1]
            assert [e["checked_at"] for e in shown["events"]] == [T0 + 20, T0 + 10, T0]


async def test_the_watch_quota_is_exact_across_nodes(tmp_path: Path, pg_url: str) -> None:
    settings = watch_settings(tmp_path, store_url=pg_url, max_watches=3)
    clock = FakeClock()
    async with (
        watch_rig(settings, clock, data_dir=tmp_path / "a") as a,
        watch_rig(settings, clock, data_dir=tmp_path / "b") as b,
    ):
        results = await asyncio.gather(
            *(
                (a if i % 2 else b).create(INDEXER, {"url": f"http://127.0.0.1:9/{i}", "every": 5})
                for i in range(10)
            ),
            return_exceptions=True,
        )
        assert sum(isinstance(r, dict) for r in results) == 3
        assert sum(isinstance(r, QuotaExceeded) for r in results) == 7
        assert len(await b.watches.list(INDEXER)) == 3


async def test_a_stale_claim_writes_nothing_on_postgres(tmp_path: Path, pg_url: str) -> None:
    settings = watch_settings(tmp_path, store_url=pg_url, events_kept=2)
    async with watch_rig(settings, FakeClock()) as rig:
        store = rig.watches.store.watches
        view = await rig.create(INDEXER, {"url": "http://127.0.0.1:9/x", "every": 10})
        (first,) = await store.claim_due_watches(T0, 10, 1)
        assert first.next_due == T0 + 10 and first.lease_until == T0 + 1
        assert await store.claim_due_watches(T0, 10, 1) == []  # leased and not due
        (second,) = await store.claim_due_watches(T0 + 35, 10, 1)  # late: skips 20 and 30
        assert second.next_due == T0 + 40 and second.token == first.token + 1
        assert not await store.record_check(WatchEvent(first.id, 0, T0, "ok", 200), first.token, 2)
        for _ in range(3):
            assert await store.record_check(WatchEvent(first.id, 0, T0, "ok", 200), second.token, 2)
        assert [e.seq for e in await store.watch_events(first.id, 10)] == [3, 2]
        await rig.watches.delete(INDEXER, view["id"])
        assert await store.watch_events(first.id, 10) == []
        assert not await store.record_check(WatchEvent(first.id, 0, T0, "ok", 200), second.token, 2)
