"""The batch store, one test per rule of spec/batchstore.md, exact values, ``now`` passed in.

Every test runs on both backends of ``BatchStore``: the embedded SQLite store and
PostgreSQL (a fresh database per test; see tests/pgserver.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from sift.config import StoreSettings
from sift.dcache import DB, AsyncDB
from sift.errors import BadRequest, NotFound, StoreError
from sift.store import CLASS_FLEET, CLASS_RESTRICTED, BatchJob, BatchStore, BatchTarget, JobStatus
from sift.store.postgres.store import PgBatchStore
from sift.store.sqlite.store import SqliteBatchStore


@pytest.fixture(params=["sqlite", "postgres"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BatchStore]:
    if request.param == "sqlite":
        adb = AsyncDB(DB.open(":memory:"))
        yield SqliteBatchStore(adb)
        await adb.close()
        return
    url = request.getfixturevalue("pg_url")
    pg = await PgBatchStore.open(StoreSettings(url=url), migrate=False)
    yield pg
    await pg.close()


def job(
    id: str,
    *,
    caller: str = "alice",
    idem_key: str = "k1",
    status: JobStatus = "queued",
    created_at: int = 100,
    lease: int = 100,
    total: int = 3,
) -> BatchJob:
    return BatchJob(id, caller, CLASS_FLEET, idem_key, status, "", total, 0, created_at, lease, 0)


def targets(job_id: str, n: int) -> list[BatchTarget]:
    return [BatchTarget(job_id, i, f"https://example.com/{i}", "{}", "pending") for i in range(n)]


async def add_job(db: BatchStore, j: BatchJob) -> BatchJob:
    await db.create_batch_job(j)
    await db.put_batch_targets(j.id, targets(j.id, j.targets_total))
    return j


async def with_result_bytes(db: BatchStore, j: BatchJob, nbytes: int, *, status: JobStatus) -> None:
    """A finished job holding exactly ``nbytes`` of results, lease restored to ``j.lease``."""
    await add_job(db, j)
    await db.update_batch_target(j.id, 0, j.lease, "done", "x" * nbytes, None, None)
    await db.set_batch_job_status(j.id, status, "", j.lease)


async def lease(db: BatchStore, id: str) -> int:
    found = await db.batch_job(id)
    assert found is not None
    return found.lease


def test_constants_and_positional_construction() -> None:
    assert (CLASS_FLEET, CLASS_RESTRICTED) == ("fleet", "restricted")
    j = BatchJob("j", "c", CLASS_RESTRICTED, "k", "queued", "", 2, 0, 10, 11, 0)
    # The spec's eleven fields, in order, then the crawl's two (defaults: a batch job).
    assert astuple(j) == ("j", "c", "restricted", "k", "queued", "", 2, 0, 10, 11, 0, "batch", "")
    assert (j.targets_total, j.targets_done, j.created_at, j.lease, j.nbytes) == (2, 0, 10, 11, 0)
    t = BatchTarget("j", 1, "https://a.test/", "{}", "pending", None, "e", "h")
    assert (t.job_id, t.idx, t.options, t.result, t.error, t.hint) == (
        "j",
        1,
        "{}",
        None,
        "e",
        "h",
    )


async def test_rule1_create_stores_as_given_and_the_lease_slides_only_on_writes(
    db: BatchStore,
) -> None:
    j = job("j1", created_at=90, lease=100)
    await add_job(db, j)
    assert await db.batch_job("j1") == j  # stored exactly as given

    # Reads never write: nothing below moves the lease.
    await db.batch_job("j1")
    await db.batch_targets("j1")
    await db.batch_targets_page("j1", 0, 10)
    await db.batch_target_counts("j1")
    await db.next_pending_targets("j1", 10)
    await db.batch_job_by_idem("alice", "k1", 500, 1000)
    await db.live_batch_jobs("alice")
    await db.live_batch_jobs_total()
    await db.queued_jobs()
    await db.batch_nbytes()
    assert await lease(db, "j1") == 100

    await db.update_batch_target("j1", 0, 150, "running", None, None, None)
    assert await lease(db, "j1") == 150
    await db.set_batch_job_status("j1", "running", "", 160)
    assert await lease(db, "j1") == 160
    await db.touch_batch_job("j1", 170)
    assert await lease(db, "j1") == 170
    assert await db.mark_in_flight_failed("restart", 180) == 1
    assert await lease(db, "j1") == 180
    got = await db.batch_job("j1")
    assert got is not None and got.created_at == 90  # only the lease moved


async def test_rule2_accessors_are_keyed_by_job_id_only(db: BatchStore) -> None:
    await add_job(db, job("a", caller="alice", total=2))
    await add_job(db, job("b", caller="bob", total=2))
    await db.update_batch_target("b", 1, 200, "done", '{"c":1}', None, None)

    # Whoever asks, the store answers by id: the caller filter is the API's job.
    got = await db.batch_job("b")
    assert got is not None and got.caller == "bob"
    a_targets = await db.batch_targets("a")
    b_targets = await db.batch_targets("b")
    assert a_targets is not None and b_targets is not None
    assert [(t.job_id, t.idx, t.status) for t in a_targets] == [
        ("a", 0, "pending"),
        ("a", 1, "pending"),
    ]
    assert [(t.job_id, t.idx, t.status) for t in b_targets] == [
        ("b", 0, "pending"),
        ("b", 1, "done"),
    ]
    a = await db.batch_job("a")
    assert a is not None and (a.targets_done, a.nbytes, a.lease) == (0, 0, 100)


async def test_rule3_idempotency_lookup_lease_caller_status_and_newest(db: BatchStore) -> None:
    await db.create_batch_job(job("j1", lease=100))
    # lease + ttl > now: alive at 149, gone at exactly 150.
    assert await db.batch_job_by_idem("alice", "k1", 149, 50) == "j1"
    assert await db.batch_job_by_idem("alice", "k1", 150, 50) is None
    assert await db.batch_job_by_idem("alice", "k1", 150, 50.5) == "j1"  # ttl in (float) seconds
    # Scoped to the caller and the key.
    assert await db.batch_job_by_idem("bob", "k1", 120, 50) is None
    assert await db.batch_job_by_idem("alice", "k2", 120, 50) is None

    expected: dict[JobStatus, str | None] = {
        "queued": "j1",
        "running": "j1",
        "done": "j1",
        "partial": "j1",
        "failed": None,
        "cancelled": None,
    }
    for status, want in expected.items():
        await db.set_batch_job_status("j1", status, "", 100)
        assert await db.batch_job_by_idem("alice", "k1", 120, 50) == want, status

    # Several matches: the newest by created_at, whatever the insertion order.
    await db.create_batch_job(job("new", status="done", created_at=300, lease=300))
    await db.create_batch_job(job("old", status="done", created_at=200, lease=300))
    assert await db.batch_job_by_idem("alice", "k1", 310, 50) == "new"
    assert (await db.batch_stats())["batch_idem_misses"] == 5


async def test_live_counts_per_caller_and_total(db: BatchStore) -> None:
    statuses: list[JobStatus] = ["queued", "running", "done", "partial", "failed", "cancelled"]
    for i, status in enumerate(statuses):
        await db.create_batch_job(job(f"a{i}", caller="alice", status=status))
    await db.create_batch_job(job("b0", caller="bob", status="running"))
    assert await db.live_batch_jobs("alice") == 2
    assert await db.live_batch_jobs("bob") == 1
    assert await db.live_batch_jobs("carol") == 0
    assert await db.live_batch_jobs_total() == 3


async def test_rule4_targets_in_idx_order_and_targets_done_exactly_once(db: BatchStore) -> None:
    await db.create_batch_job(job("j", total=4, lease=100))
    shuffled = [targets("j", 4)[i] for i in (2, 0, 3, 1)]
    await db.put_batch_targets("j", shuffled)
    got = await db.batch_targets("j")
    assert got is not None and [t.idx for t in got] == [0, 1, 2, 3]
    assert [t.url for t in got] == [f"https://example.com/{i}" for i in range(4)]

    async def state() -> tuple[int, int, int]:
        j = await db.batch_job("j")
        assert j is not None
        return j.targets_done, j.nbytes, j.lease

    await db.update_batch_target("j", 1, 200, "running", None, None, None)
    assert await state() == (0, 0, 200)
    await db.update_batch_target("j", 1, 201, "done", "abc", None, None)
    assert await state() == (1, 3, 201)
    # A rewrite of the same target does not count twice; its bytes are replaced (é is 2 bytes).
    await db.update_batch_target("j", 1, 202, "done", "héllo", None, None)
    assert await state() == (1, 6, 202)
    await db.update_batch_target(
        "j", 0, 203, "failed", None, "connect_failed: refused", "retry later"
    )
    assert await state() == (2, 6, 203)
    await db.update_batch_target(
        "j", 0, 204, "failed", None, "connect_failed: refused", "retry later"
    )
    assert await state() == (2, 6, 204)
    await db.update_batch_target("j", 2, 205, "cancelled", None, "cancelled by caller", None)
    assert await state() == (3, 6, 205)

    got = await db.batch_targets("j")
    assert got is not None
    assert got[0] == BatchTarget(
        "j",
        0,
        "https://example.com/0",
        "{}",
        "failed",
        None,
        "connect_failed: refused",
        "retry later",
    )
    assert got[1] == BatchTarget("j", 1, "https://example.com/1", "{}", "done", "héllo", None, None)
    assert await db.batch_target_counts("j") == {
        "pending": 1,
        "running": 0,
        "done": 1,
        "failed": 1,
        "cancelled": 1,
    }

    with pytest.raises(NotFound):
        await db.update_batch_target("j", 4, 300, "done", "x", None, None)
    with pytest.raises(NotFound):
        await db.update_batch_target("nope", 0, 300, "done", "x", None, None)
    with pytest.raises(BadRequest):
        await db.update_batch_target("j", 3, 300, "finished", None, None, None)  # type: ignore[arg-type]
    assert await state() == (3, 6, 205)  # failed writes changed nothing


async def test_rule5_sweep_deletes_jobs_whose_lease_ran_out_with_their_targets(
    db: BatchStore,
) -> None:
    await add_job(db, job("old-done", status="done", lease=100))
    await add_job(db, job("edge-running", status="running", lease=150))
    await add_job(db, job("fresh", status="done", lease=151))
    # lease + ttl <= now: 100 + 100 <= 250 and 150 + 100 <= 250; 151 + 100 > 250.
    assert await db.sweep_batch(250, 100) == 2
    assert await db.batch_job("old-done") is None
    assert await db.batch_targets("edge-running") is None
    assert await db.batch_job("fresh") is not None
    fresh = await db.batch_targets("fresh")
    assert fresh is not None and len(fresh) == 3
    assert await db.sweep_batch(250, 100) == 0
    assert await db.sweep_batch(251, 100) == 1
    assert (await db.batch_stats())["batch_jobs"] == 0


async def test_rule6_evict_oldest_whole_finished_jobs_never_live_ones(db: BatchStore) -> None:
    await with_result_bytes(db, job("live-oldest", lease=50), 30, status="running")
    # created_at runs against lease order: eviction goes by lease.
    await with_result_bytes(db, job("a", created_at=30, lease=100), 10, status="done")
    await with_result_bytes(db, job("b", created_at=20, lease=110), 20, status="partial")
    await with_result_bytes(db, job("d", created_at=10, lease=120), 5, status="failed")
    await add_job(db, job("queued-empty", lease=10))
    assert await db.batch_nbytes() == 65

    assert await db.evict_batch_oldest(65) == 0
    # 65 -> drop a (55) -> drop b (35 <= 40): two jobs, oldest lease first.
    assert await db.evict_batch_oldest(40) == 2
    assert await db.batch_nbytes() == 35
    assert await db.batch_job("a") is None and await db.batch_targets("b") is None
    assert await db.batch_job("d") is not None
    # Only d can go; the running and queued jobs stay even over budget.
    assert await db.evict_batch_oldest(0) == 1
    assert await db.batch_nbytes() == 30
    assert await db.evict_batch_oldest(0) == 0
    live = await db.batch_job("live-oldest")
    assert live is not None and live.status == "running"
    assert await db.batch_job("queued-empty") is not None
    assert (await db.batch_stats())["batch_evictions"] == 3


async def _two_callers(db: BatchStore) -> None:
    # bob's job has the oldest lease: lease order alone would evict it first.
    await with_result_bytes(db, job("b1", caller="bob", lease=50), 30, status="done")
    await with_result_bytes(db, job("a1", created_at=20, lease=100), 10, status="done")
    await with_result_bytes(db, job("a2", created_at=10, lease=110), 20, status="partial")
    await with_result_bytes(db, job("a-live", lease=40), 30, status="running")
    assert await db.batch_nbytes() == 90


async def test_rule6_eviction_takes_the_submitting_callers_own_jobs_first(db: BatchStore) -> None:
    await _two_callers(db)
    # alice's result pushed the store over 60: her own a1 (80) and a2 (60) go, not bob's b1.
    assert await db.evict_batch_oldest(60, caller="alice") == 2
    assert await db.batch_nbytes() == 60
    assert (await db.batch_job("a1")) is None and (await db.batch_job("a2")) is None
    assert (await db.batch_job("b1")) is not None
    # alice has no finished job left: only then may bob's go. Her running job stays.
    assert await db.evict_batch_oldest(40, caller="alice") == 1
    assert await db.batch_nbytes() == 30
    assert (await db.batch_job("b1")) is None and (await db.batch_job("a-live")) is not None
    assert (await db.batch_stats())["batch_evictions"] == 3


async def test_rule6_eviction_for_another_caller_and_without_one(db: BatchStore) -> None:
    await _two_callers(db)
    # For bob, his own b1 goes first (60 <= 60).
    assert await db.evict_batch_oldest(60, caller="bob") == 1
    assert (await db.batch_job("b1")) is None
    # A caller with no jobs, or none named: oldest lease first across callers (a1, then a2).
    assert await db.evict_batch_oldest(50, caller="carol") == 1
    assert (await db.batch_job("a1")) is None and (await db.batch_job("a2")) is not None
    assert await db.evict_batch_oldest(30) == 1
    assert await db.batch_nbytes() == 30


async def test_rule7_mark_in_flight_failed_fails_live_jobs_only(db: BatchStore) -> None:
    statuses: list[JobStatus] = ["queued", "running", "done", "partial"]
    for status in statuses:
        await add_job(db, job(status, idem_key=status, status=status, lease=100))
    await db.update_batch_target("running", 0, 100, "done", "ok", None, None)
    await db.update_batch_target("running", 1, 100, "running", None, None, None)

    reason = "interrupted: sift restarted; resubmit the job"
    assert await db.mark_in_flight_failed(reason, 500) == 2
    for id in ("queued", "running"):
        got = await db.batch_job(id)
        assert got is not None
        assert (got.status, got.error, got.lease) == ("failed", reason, 500)
    for id in ("done", "partial"):
        got = await db.batch_job(id)
        assert got is not None
        assert (got.status, got.error, got.lease) == (id, "", 100)
    running = await db.batch_job("running")
    assert running is not None and running.targets_done == 1  # targets untouched by default
    # A failed job is never an idempotent match: resubmitting starts a new job.
    assert await db.batch_job_by_idem("alice", "running", 501, 1000) is None
    assert await db.mark_in_flight_failed(reason, 600) == 0


async def test_rule7_mark_in_flight_failed_can_also_finish_unfinished_targets(
    db: BatchStore,
) -> None:
    await add_job(db, job("r", status="running", total=3))
    await db.update_batch_target("r", 0, 100, "done", "ok", None, None)
    await db.update_batch_target("r", 1, 100, "running", None, None, None)
    assert await db.mark_in_flight_failed("restarted", 200, targets_status="failed") == 1
    got = await db.batch_targets("r")
    assert got is not None
    assert [(t.status, t.error) for t in got] == [
        ("done", None),
        ("failed", "restarted"),
        ("failed", "restarted"),
    ]
    r = await db.batch_job("r")
    assert r is not None and (r.targets_done, r.nbytes) == (3, 2)


async def test_rule8_batch_bytes_are_their_own_budget(db: BatchStore) -> None:
    await with_result_bytes(db, job("a", status="done"), 7, status="done")
    await with_result_bytes(db, job("b", status="done"), 11, status="done")
    assert await db.batch_nbytes() == 18
    assert (await db.batch_stats())["batch_bytes"] == 18
    if isinstance(db, SqliteBatchStore):
        # The embedded store shares its file with the content cache: the budgets stay apart.
        content = db.adb.db
        assert content.size() == 0  # not content bytes
        content.max_bytes = 0
        content.put_body(b"a body", 100)
        assert content.evict() == 1  # the content LRU removes the body, never a batch job
        assert await db.batch_nbytes() == 18
        assert content.stats()["batch_bytes"] == 18
        assert content.stats()["bytes"] == 0


async def test_rule9_reads_return_none_and_count_misses_writes_raise_not_found(
    db: BatchStore,
) -> None:
    assert await db.batch_job("nope") is None
    assert await db.batch_targets("nope") is None
    assert await db.batch_targets_page("nope", 0, 10) is None
    assert await db.batch_target_counts("nope") is None
    assert await db.next_pending_targets("nope", 10) == []
    assert (await db.batch_stats())["batch_misses"] == 4
    with pytest.raises(NotFound):
        await db.touch_batch_job("nope", 1)
    with pytest.raises(NotFound):
        await db.set_batch_job_status("nope", "done", "", 1)
    with pytest.raises(NotFound):
        await db.put_batch_targets("nope", targets("nope", 1))
    with pytest.raises(NotFound):
        await db.finish_pending_targets("nope", "cancelled", "cancelled", None, 1)
    assert (await db.batch_stats())["batch_jobs"] == 0


async def test_create_rejects_bad_input(db: BatchStore) -> None:
    await db.create_batch_job(job("j"))
    with pytest.raises(StoreError):
        await db.create_batch_job(job("j"))  # duplicate id
    with pytest.raises(BadRequest):
        await db.create_batch_job(job("x", status="weird"))  # type: ignore[arg-type]
    bad_class = BatchJob("y", "c", "admin", "k", "queued", "", 1, 0, 1, 1, 0)
    with pytest.raises(BadRequest):
        await db.create_batch_job(bad_class)
    assert await db.batch_job("x") is None and await db.batch_job("y") is None


async def test_put_ten_thousand_targets_in_one_transaction(db: BatchStore) -> None:
    await db.create_batch_job(job("big", total=10_000))
    await db.put_batch_targets("big", targets("big", 10_000))
    assert await db.batch_target_counts("big") == {
        "pending": 10_000,
        "running": 0,
        "done": 0,
        "failed": 0,
        "cancelled": 0,
    }
    # All or nothing: a duplicate idx at the very end stores none of the batch.
    await db.create_batch_job(job("dup", total=10_000))
    rows = [*targets("dup", 10_000), BatchTarget("dup", 9_999, "https://x.test/", "{}", "pending")]
    with pytest.raises(StoreError):
        await db.put_batch_targets("dup", rows)
    assert await db.batch_targets("dup") == []


async def test_pages_next_pending_and_queued_order(db: BatchStore) -> None:
    await add_job(db, job("later", created_at=200, total=5))
    await add_job(db, job("first", created_at=100, total=5))
    await add_job(db, job("started", created_at=50, status="running"))
    assert [j.id for j in await db.queued_jobs()] == ["first", "later"]

    page = await db.batch_targets_page("first", 1, 3)
    assert page is not None and [t.idx for t in page] == [1, 2, 3]
    page = await db.batch_targets_page("first", 4, 3)
    assert page is not None and [t.idx for t in page] == [4]

    await db.update_batch_target("first", 0, 110, "running", None, None, None)
    await db.update_batch_target("first", 2, 110, "done", "r", None, None)
    assert [t.idx for t in await db.next_pending_targets("first", 2)] == [1, 3]
    assert [t.idx for t in await db.next_pending_targets("first", 10)] == [1, 3, 4]


async def test_finish_pending_targets_counts_each_target_once(db: BatchStore) -> None:
    await add_job(db, job("j", total=4, lease=100))
    await db.update_batch_target("j", 0, 110, "done", "ok", None, None)
    await db.update_batch_target("j", 1, 111, "running", None, None, None)
    assert (
        await db.finish_pending_targets("j", "cancelled", "cancelled by caller", "resubmit", 120)
        == 3
    )
    j = await db.batch_job("j")
    assert j is not None and (j.targets_done, j.lease) == (4, 120)
    # The abandoned running target finishing late is a rewrite, not a new terminal target.
    await db.update_batch_target("j", 1, 130, "done", "late", None, None)
    j = await db.batch_job("j")
    assert j is not None and (j.targets_done, j.nbytes) == (4, 6)
    assert await db.finish_pending_targets("j", "cancelled", "again", None, 140) == 0
    counts = await db.batch_target_counts("j")
    assert counts is not None and (counts["cancelled"], counts["done"]) == (2, 2)
    with pytest.raises(BadRequest):
        await db.finish_pending_targets("j", "done", "", None, 150)


async def test_jobs_of_lists_one_callers_jobs_newest_first_and_moves_no_lease(
    db: BatchStore,
) -> None:
    await add_job(db, job("old", created_at=100, lease=100))
    await add_job(db, job("tie1", idem_key="k2", created_at=200, lease=200))
    await add_job(db, job("tie2", idem_key="k3", created_at=200, lease=200))
    await add_job(db, job("theirs", caller="bob", created_at=300, lease=300))
    # Newest first; a tie on created_at goes to the later submission.
    assert [j.id for j in await db.jobs_of("alice", 10)] == ["tie2", "tie1", "old"]
    assert [j.id for j in await db.jobs_of("alice", 2)] == ["tie2", "tie1"]
    assert await db.jobs_of("alice", 0) == []
    assert [j.id for j in await db.jobs_of("bob", 10)] == ["theirs"]
    assert await db.jobs_of("nobody", 10) == []
    leases = [await lease(db, i) for i in ("old", "tie1", "tie2", "theirs")]
    assert leases == [100, 200, 200, 300]


async def test_credentials_are_kept_only_while_the_job_lives(db: BatchStore) -> None:
    """The caller's headers and cookies (fetch options) leave the store when the job ends —
    done, cancelled, or failed at a restart — from every target and from a crawl's spec;
    every other option and the results stay."""
    secret = {"headers": {"Authorization": "Bearer tok"}, "cookies": {"sid": "c"}}
    options = json.dumps({**secret, "format": "text"}, separators=(",", ":"))
    spec = json.dumps({"url": "https://example.com/", "options": {**secret, "links": True}})

    async def add(id: str, kind: str, status: JobStatus = "running") -> None:
        j = dataclasses.replace(job(id, idem_key=id, status=status, total=2), kind=kind)
        await db.create_batch_job(dataclasses.replace(j, spec=spec if kind == "crawl" else ""))
        own = [BatchTarget(id, i, f"https://example.com/{i}", options, "pending") for i in (0, 1)]
        await db.put_batch_targets(id, own)

    async def kept(id: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        targets = await db.batch_targets(id)
        found = await db.batch_job(id)
        assert targets is not None and found is not None
        return [json.loads(t.options) for t in targets], (
            json.loads(found.spec)["options"] if found.spec else None
        )

    for id, kind in (("done", "batch"), ("cancelled", "crawl"), ("restarted", "crawl")):
        await add(id, kind)
    await db.update_batch_target("done", 0, 100, "done", "result", None, None)
    await db.set_batch_job_status("done", "running", "", 100)  # still live: kept
    assert await kept("done") == ([{**secret, "format": "text"}] * 2, None)
    await db.set_batch_job_status("done", "done", "", 101)
    await db.cancel_job("cancelled", "alice", 101, 1000)
    assert await db.mark_in_flight_failed("restarted", 102) == 1
    assert await kept("done") == ([{"format": "text"}] * 2, None)
    for id in ("cancelled", "restarted"):
        assert await kept(id) == ([{"format": "text"}] * 2, {"links": True})
    done = await db.batch_targets("done")
    assert done is not None and done[0].result == "result"
    crawl = await db.batch_job("restarted")
    assert crawl is not None and json.loads(crawl.spec)["url"] == "https://example.com/"
