"""Claims, leases and fencing on the PostgreSQL store (``store/postgres/claims.py``), exact values.

Each "node" below is its own ``PgBatchStore`` (its own connection pool) on one fresh
database, as separate sift processes would be. Leases are made to expire without sleeping:
a claim with a negative lease is expired the moment it is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from apphelpers import fetcher_for, make_settings
from batchrig import FakeClock
from sift.assembly.runner import make_runner
from sift.batch.jobs import BatchJobs
from sift.config import BatchSettings, StoreSettings
from sift.dcache import DB, AsyncDB
from sift.errors import QuotaExceeded
from sift.principal import Principal
from sift.service import Service
from sift.store import CLASS_FLEET, BatchJob, NewTarget
from sift.store.postgres.store import PgBatchStore
from sift.workers import RenderPool
from upstream import Upstream


def new_job(id: str, total: int, *, caller: str = "alice", key: str = "k") -> BatchJob:
    return BatchJob(id, caller, CLASS_FLEET, key, "queued", "", total, 0, 100, 100, 0)


def urls(host: str, n: int) -> list[NewTarget]:
    return [NewTarget(f"http://{host}/{i}", "{}") for i in range(n)]


@pytest.fixture
async def nodes(pg_url: str) -> AsyncIterator[list[PgBatchStore]]:
    stores = [await PgBatchStore.open(StoreSettings(url=pg_url), migrate=False) for _ in range(3)]
    yield stores
    for s in stores:
        await s.close()


async def submit(store: PgBatchStore, job: BatchJob, targets: list[NewTarget]) -> str:
    job_id, created = await store.submit_job(
        job, targets, ttl_s=3600, live_jobs=10, live_jobs_total=100
    )
    assert created
    return job_id


async def probe(store: PgBatchStore, host: str) -> None:
    await store.work.learn_crawl_delay(host, None)


async def inflight_matches_running(store: PgBatchStore) -> dict[str, tuple[int, int]]:
    """host -> (gate inflight, running targets); the invariant is that they are equal."""
    async with store._tx() as cur:
        await cur.execute(
            "SELECT h.host, h.inflight, (SELECT count(*) FROM batch_target t "
            "WHERE t.host = h.host AND t.status = 'running') FROM host_gate h ORDER BY h.host"
        )
        return {str(h): (int(i), int(n)) for h, i, n in await cur.fetchall()}


async def test_a_late_write_after_reap_and_reclaim_is_fenced(nodes: list[PgBatchStore]) -> None:
    a, b, _ = nodes
    await submit(a, new_job("j", 1), urls("h.test", 1))
    await probe(a, "h.test:80")
    [first] = await a.work.claim("alice", "node-a", 4, 4, -1.0)  # expired at once
    assert (first.job_id, first.idx, first.attempt) == ("j", 0, 0)
    assert await b.work.reap(200, 3) == []  # requeued, not failed
    [second] = await b.work.claim("alice", "node-b", 4, 4, 30.0)
    assert second.token > first.token

    late = await a.work.complete(first, 300, "done", '"stale"', None, None)
    assert late.fenced and a.work.fenced_writes == 1
    on_time = await b.work.complete(second, 301, "done", '"fresh"', None, None)
    assert (on_time.fenced, on_time.targets_done, on_time.targets_total) == (False, 1, 1)
    assert on_time.job_complete

    [t] = await a.batch_targets("j") or []
    assert (t.status, t.result) == ("done", '"fresh"')
    job = await a.batch_job("j")
    assert job is not None and (job.targets_done, job.nbytes, job.lease) == (1, 7, 301)
    assert await inflight_matches_running(a) == {"h.test:80": (0, 0)}


async def test_a_target_lost_three_times_fails_as_interrupted(nodes: list[PgBatchStore]) -> None:
    a, b, c = nodes
    await submit(a, new_job("j", 2), urls("h.test", 2))
    await probe(a, "h.test:80")
    for n, node in enumerate((a, b, c), start=1):
        claims = await node.work.claim("alice", f"n{n}", 4, 1, -1.0)
        assert [x.idx for x in claims] == [0]
        failed = await node.work.reap(500 + n, 3)
        assert failed == ([] if n < 3 else ["j"])
    targets = await a.batch_targets("j") or []
    assert [(t.status, t.error) for t in targets] == [
        ("failed", "interrupted: the sift node fetching this target was lost 3 times"),
        ("pending", None),
    ]
    job = await a.batch_job("j")
    assert job is not None and (job.targets_done, job.lease) == (1, 503)
    assert (a.work.reaped, b.work.reaped, c.work.reaped) == (1, 1, 1)
    assert c.work.interrupted == 1
    assert await a.work.complete_jobs(["j"]) == []  # idx 1 still pending


async def test_the_host_gate_holds_across_nodes(nodes: list[PgBatchStore]) -> None:
    a, b, c = nodes
    await submit(a, new_job("j", 6), urls("h.test", 6))
    # Until robots.txt is read, one target at a time, whichever node asks.
    assert len(await a.work.claim("alice", "a", 2, 4, 30.0)) == 1
    assert await b.work.claim("alice", "b", 2, 4, 30.0) == []
    await probe(a, "h.test:80")
    got_b = await b.work.claim("alice", "b", 2, 4, 30.0)
    assert [x.idx for x in got_b] == [1]  # per_host 2: one more slot
    assert await c.work.claim("alice", "c", 2, 4, 30.0) == []
    assert await inflight_matches_running(a) == {"h.test:80": (2, 2)}
    await b.work.complete(got_b[0], 10, "failed", None, "connect_failed: refused", None)
    got_c = await c.work.claim("alice", "c", 2, 4, 30.0)
    assert [x.idx for x in got_c] == [2]
    assert await inflight_matches_running(a) == {"h.test:80": (2, 2)}


async def test_crawl_delay_and_retry_after_close_the_host_for_every_node(
    nodes: list[PgBatchStore],
) -> None:
    a, b, _ = nodes
    await submit(a, new_job("j", 3), urls("slow.test", 3))
    [first] = await a.work.claim("alice", "a", 4, 4, 30.0)
    await a.work.learn_crawl_delay("slow.test:80", 100.0)
    assert await b.work.claim("alice", "b", 4, 4, 30.0) == []  # spaced by the delay
    gate = await a.work.gate("slow.test:80")
    async with a._tx() as cur:
        await cur.execute("SELECT extract(epoch FROM clock_timestamp())")
        row = await cur.fetchone()
    assert gate is not None and row is not None
    assert gate[:3] == (1, True, 100.0)
    # Counted from when robots.txt was learned: after the claim, before this read.
    assert first.claimed_at + 100.0 <= gate[3] <= float(row[0]) + 100.0

    await submit(a, new_job("k", 2, key="k2"), urls("busy.test", 2))
    await probe(a, "busy.test:80")
    [busy] = await b.work.claim("alice", "b", 4, 1, 30.0)
    assert busy.host == "busy.test:80"
    assert await b.work.retry_later(busy, 3600.0)
    assert await a.work.claim("alice", "a", 4, 4, 30.0) == []  # Retry-After, cluster-wide
    targets = await a.batch_targets("k") or []
    assert [(t.status) for t in targets] == ["pending", "pending"]
    async with a._tx() as cur:
        await cur.execute("SELECT attempt FROM batch_target WHERE job_id = 'k' ORDER BY idx")
        assert [int(r[0]) for r in await cur.fetchall()] == [1, 0]
    assert not await b.work.retry_later(busy, 1.0)  # its claim is gone: fenced
    assert await inflight_matches_running(a) == {"busy.test:80": (0, 0), "slow.test:80": (1, 1)}


async def test_cancel_on_one_node_fences_and_unrenews_another(nodes: list[PgBatchStore]) -> None:
    a, b, _ = nodes
    await submit(a, new_job("j", 3), urls("h.test", 3))
    await probe(a, "h.test:80")
    claims = await b.work.claim("alice", "b", 4, 4, 30.0)
    assert [x.idx for x in claims] == [0, 1, 2]
    assert await b.work.renew([x.token for x in claims], 30.0) == {x.token for x in claims}
    view = await a.cancel_job("j", "alice", 150, 3600)
    assert (view["status"], view["targets_done"], view["counts"]["cancelled"]) == (
        "cancelled",
        3,
        3,
    )
    assert await b.work.renew([x.token for x in claims], 30.0) == set()
    late = await b.work.complete(claims[0], 160, "done", "{}", None, None)
    assert late.fenced
    job = await a.batch_job("j")
    assert job is not None and (job.status, job.targets_done, job.nbytes) == ("cancelled", 3, 0)
    assert await inflight_matches_running(a) == {"h.test:80": (0, 0)}


async def test_release_gives_targets_back_without_counting_a_loss(
    nodes: list[PgBatchStore],
) -> None:
    a, b, _ = nodes
    await submit(a, new_job("j", 2), urls("h.test", 2))
    await probe(a, "h.test:80")
    claims = await a.work.claim("alice", "a", 4, 4, 30.0)
    assert await a.work.release([x.token for x in claims]) == 2
    again = await b.work.claim("alice", "b", 4, 4, 30.0)
    assert [x.idx for x in again] == [0, 1]
    async with a._tx() as cur:
        await cur.execute("SELECT stalls FROM batch_target ORDER BY idx")
        assert [int(r[0]) for r in await cur.fetchall()] == [0, 0]


async def test_concurrent_submits_of_one_key_on_several_nodes_make_one_job(
    nodes: list[PgBatchStore],
) -> None:
    async def one(i: int) -> tuple[str, bool]:
        node = nodes[i % len(nodes)]
        return await node.submit_job(
            new_job(f"job{i}", 2, key="same"),
            urls("h.test", 2),
            ttl_s=3600,
            live_jobs=50,
            live_jobs_total=500,
        )

    results = await asyncio.gather(*(one(i) for i in range(24)))
    assert sum(created for _, created in results) == 1
    assert len({job_id for job_id, _ in results}) == 1
    assert await nodes[0].live_batch_jobs("alice") == 1


async def test_the_live_job_quota_is_exact_under_concurrent_submits(
    nodes: list[PgBatchStore],
) -> None:
    async def one(i: int) -> str:
        node = nodes[i % len(nodes)]
        try:
            await node.submit_job(
                new_job(f"job{i}", 1, key=f"key{i}"),
                urls("h.test", 1),
                ttl_s=3600,
                live_jobs=5,
                live_jobs_total=500,
            )
        except QuotaExceeded:
            return "429"
        return "created"

    outcomes = await asyncio.gather(*(one(i) for i in range(24)))
    assert (outcomes.count("created"), outcomes.count("429")) == (5, 19)
    assert await nodes[1].live_batch_jobs("alice") == 5


async def test_two_cluster_runners_share_one_job_each_target_once(
    tmp_path: Path, pg_url: str
) -> None:
    settings = dataclasses.replace(
        make_settings(tmp_path),
        batch=BatchSettings(concurrency=4, per_host=2),
        store=StoreSettings(url=pg_url, lease_s=30.0, renew_s=5.0),
    )
    async with Upstream() as up:
        for i in range(12):
            up.page(f"/p{i}", "<html><body><p>page</p></body></html>")
        async with contextlib.AsyncExitStack() as stack:
            pool = RenderPool(1)
            stack.callback(pool.close)
            nodes = []
            for n in range(2):
                # Each part is registered for closing as soon as it exists, so a failure
                # half-way leaves nothing running behind.
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
                nodes.append((store, runner, BatchJobs(settings, store, runner)))
            owner = Principal("indexer", "fleet")
            view, created = await nodes[0][2].submit(
                owner, "k", {"targets": [up.url(f"/p{i}") for i in range(12)]}, 1000
            )
            assert created
            await asyncio.gather(*(runner.run_until_idle() for _, runner, _ in nodes))
            status = await nodes[1][2].status(owner, view["id"], 1001)
            assert (status["status"], status["targets_done"], status["counts"]["done"]) == (
                "done",
                12,
                12,
            )
            pages = {p: n for p, n in up.hits.items() if p.startswith("/p")}
            assert pages == {f"/p{i}": 1 for i in range(12)}  # every target fetched once
            assert await inflight_matches_running(nodes[0][0]) == {f"127.0.0.1:{up.port}": (0, 0)}


async def test_stopping_a_runner_releases_its_claims_without_a_loss(
    tmp_path: Path, pg_url: str
) -> None:
    settings = dataclasses.replace(
        make_settings(tmp_path),
        batch=BatchSettings(concurrency=4, per_host=4),
        store=StoreSettings(url=pg_url),
    )
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="late", content_type="text/plain")

    async with Upstream() as up:
        up.route("/h", hang, prefix=True)
        adb = AsyncDB(DB.open(tmp_path / "node.db"))
        fetcher = fetcher_for(settings)
        await fetcher.start()
        store = await PgBatchStore.open(settings.store, migrate=False)
        pool = RenderPool(1)
        try:
            service = Service(settings, adb, fetcher, render_pool=pool)
            runner = make_runner(settings, store, service)
            jobs = BatchJobs(settings, store, runner)
            owner = Principal("indexer", "fleet")
            body = {"targets": [up.url("/h0"), up.url("/h1")], "options": {"robots": False}}
            await jobs.submit(owner, "k", body, 1000)
            runner.start()
            # One at a time: the host's robots.txt is never read here (robots=false), and an
            # unprobed host takes one target at a time (as in the embedded runner).
            both_running = {
                "live_jobs": 1,
                "pending_targets": 1,
                "running_targets": 1,
                "nodes_leasing": 1,
            }
            for _ in range(1000):
                if await store.work.cluster_counts() == both_running:
                    break
                await asyncio.sleep(0.02)
            assert await store.work.cluster_counts() == both_running
            await runner.stop(0)
            async with store._tx() as cur:
                await cur.execute("SELECT status, stalls FROM batch_target ORDER BY idx")
                assert await cur.fetchall() == [("pending", 0), ("pending", 0)]
            assert await inflight_matches_running(store) == {f"127.0.0.1:{up.port}": (0, 0)}
        finally:
            release.set()
            await fetcher.close()
            await store.close()
            await adb.close()
            pool.close()
