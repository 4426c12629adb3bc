"""The webhook outbox (sift.store.webhooks) over both backends, the node's SQLite and a real
PostgreSQL: claims and their fencing, retries, release, the delivery log, pruning, and job
webhooks that fire exactly once. Time is a parameter: every ``now`` here is exact."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sift.config import StoreSettings
from sift.dcache import DB, AsyncDB
from sift.store import BatchJob, BatchStore, NewTarget
from sift.store.outbox import outbox_of
from sift.store.postgres.store import PgBatchStore
from sift.store.sqlite.store import SqliteBatchStore
from sift.store.webhooks import Attempt, NewDelivery, Outbox
from sift.webhooks.jobs import fire_ended_jobs

T0 = 1_000_000


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BatchStore]:
    if request.param == "sqlite":
        adb = AsyncDB(DB.open(str(tmp_path / "sift.db")))
        yield SqliteBatchStore(adb)
        await adb.close()
        return
    url = request.getfixturevalue("pg_url")
    pg = await PgBatchStore.open(StoreSettings(url=url), migrate=False)
    yield pg
    await pg.close()


def delivery(i: int, owner: str = "indexer", source_id: str = "w1") -> NewDelivery:
    return NewDelivery(
        id=f"msg_{i:04d}",
        owner=owner,
        source="watch",
        source_id=source_id,
        url=f"http://127.0.0.1:9/{i}",
        secret="whsec_AAAA",
        event=f'{{"type":"watch.changed","n":{i}}}',
        created_at=T0 - 10 + i,  # due at once: before T0
    )


async def test_claim_is_exclusive_and_outcomes_are_fenced(store: BatchStore) -> None:
    box = outbox_of(store)
    for i in range(3):
        await box.add(delivery(i))
    assert await box.due(T0, 10, []) == [(f"msg_{i:04d}", "indexer") for i in range(3)]
    assert await box.due(T0, 10, ["indexer"]) == []
    first = await box.claim(["msg_0000", "msg_0001"], T0, 60.0)
    assert [d.id for d in first] == ["msg_0000", "msg_0001"]
    assert await box.claim(["msg_0000"], T0, 60.0) == []  # taken: another claim gets nothing
    assert await box.due(T0, 10, []) == [("msg_0002", "indexer")]
    d0, d1 = first
    assert (d0.attempts, d0.secret, d0.event) == (0, "whsec_AAAA", '{"type":"watch.changed","n":0}')
    # A failed attempt, retried at T0 + 5; a stale token writes nothing.
    failed = Attempt(1, T0, 500, "http_500", 12)
    stale = type(d0)(d0.id, d0.owner, d0.url, d0.secret, d0.event, 0, d0.token + 1)
    assert await box.record(stale, failed, "pending", T0 + 5) is False
    assert await box.record(d0, failed, "pending", T0 + 5) is True
    assert await box.record(d0, failed, "pending", T0 + 5) is False  # no longer claimed
    assert [i for i, _ in await box.due(T0 + 4, 10, [])] == ["msg_0002"]
    assert [i for i, _ in await box.due(T0 + 5, 10, [])] == ["msg_0002", "msg_0000"]  # by due time
    (again,) = await box.claim(["msg_0000"], T0 + 5, 60.0)
    assert again.attempts == 1
    assert await box.record(again, Attempt(2, T0 + 5, 200, None, 7), "delivered", T0 + 5)
    # A stopping node releases its claim: due at once, no attempt counted.
    assert await box.release([d1], T0 + 6) == 1
    (d1b,) = await box.claim(["msg_0001"], T0 + 6, 60.0)
    assert d1b.attempts == 0
    # A lease that ran out (the node died) makes the row due for anyone.
    assert await box.due(T0 + 6 + 59, 10, []) == [("msg_0002", "indexer")]
    assert [i for i, _ in await box.due(T0 + 6 + 60, 10, [])] == ["msg_0002", "msg_0001"]


async def test_the_log_is_per_source_and_owner_newest_first_and_pruned(store: BatchStore) -> None:
    box = outbox_of(store)
    await box.add(delivery(1))
    await box.add(delivery(2))
    await box.add(delivery(3, owner="crawler"))
    await box.add(delivery(4, source_id="w2"))
    for d in await box.claim(["msg_0001", "msg_0002"], T0, 60.0):
        await box.record(d, Attempt(1, T0 + 0.5, 200, None, 3), "delivered", T0)
    log = await box.log("watch", "w1", "indexer", 10)
    assert [e["id"] for e in log] == ["msg_0002", "msg_0001"]
    assert log[0] == {
        "id": "msg_0002",
        "type": "watch.changed",
        "url": "http://127.0.0.1:9/2",
        "state": "delivered",
        "attempts": 1,
        "next_attempt_at": None,
        "created_at": T0 - 8,
        "finished_at": T0,
        "log": [{"n": 1, "at": T0 + 0.5, "status": 200, "error": None, "duration_ms": 3}],
    }
    assert await box.log("watch", "w1", "crawler", 10) != log  # crawler sees only its own
    assert [e["id"] for e in await box.log("watch", "w1", "crawler", 10)] == ["msg_0003"]
    assert await box.log("watch", "w1", "nobody", 10) == []
    assert [e["id"] for e in await box.log("watch", "w1", "indexer", 1)] == ["msg_0002"]
    # Finished before T0 + 1: pruned with their log; pending ones never.
    assert await box.prune(T0) == 0
    assert await box.prune(T0 + 1) == 2
    assert await box.log("watch", "w1", "indexer", 10) == []
    assert [e["id"] for e in await box.log("watch", "w2", "indexer", 10)] == ["msg_0004"]


async def _ended_job(store: BatchStore, job_id: str, status: str = "done") -> None:
    job = BatchJob(job_id, "indexer", "fleet", f"k-{job_id}", "queued", "", 2, 0, T0, T0, 0)
    await store.submit_job(
        job,
        [NewTarget("http://a.test/", "{}"), NewTarget("http://b.test/", "{}")],
        ttl_s=3600,
        live_jobs=10,
        live_jobs_total=10,
    )
    await store.update_batch_target(job_id, 0, T0, "done", "{}")
    await store.update_batch_target(job_id, 1, T0, "failed", None, "x: y")
    await store.set_batch_job_status(job_id, status, "", T0)  # type: ignore[arg-type]


async def test_a_job_webhook_fires_once_when_its_job_ends(store: BatchStore) -> None:
    box = outbox_of(store)
    await _ended_job(store, "job1", "partial")
    await box.add_job_webhook("job1", "indexer", "http://127.0.0.1:9/hook", "whsec_AAAA", T0)
    # Two nodes looking at once: one event.
    fired = await asyncio.gather(fire_ended_jobs(box, T0, 10), fire_ended_jobs(box, T0, 10))
    assert sorted(fired) == [0, 1]
    assert await fire_ended_jobs(box, T0, 10) == 0
    ((id_, owner),) = await box.due(T0, 10, [])
    (d,) = await box.claim([id_], T0, 60.0)
    assert (owner, d.url, d.secret) == ("indexer", "http://127.0.0.1:9/hook", "whsec_AAAA")
    assert d.event == (
        '{"type":"job.finished","job_id":"job1","status":"partial",'
        '"counts":{"pending":0,"running":0,"done":1,"failed":1,"cancelled":0}}'
    )


async def test_a_live_jobs_webhook_waits_and_a_gone_jobs_is_forgotten(store: BatchStore) -> None:
    box: Outbox = outbox_of(store)
    job = BatchJob("live", "indexer", "fleet", "k", "queued", "", 1, 0, T0, T0, 0)
    await store.submit_job(
        job, [NewTarget("http://a.test/", "{}")], ttl_s=3600, live_jobs=10, live_jobs_total=10
    )
    await box.add_job_webhook("live", "indexer", "http://127.0.0.1:9/", "whsec_AAAA", T0)
    assert await box.ended_jobs(10) == []
    assert await fire_ended_jobs(box, T0, 10) == 0
    await store.set_batch_job_status("live", "cancelled", "cancelled by the caller", T0)
    (ended,) = await box.ended_jobs(10)
    assert (ended.job_id, ended.status, ended.counts) == ("live", "cancelled", {"pending": 1})
    # A job swept before its webhook fired: the webhook goes with it, no event.
    assert await store.sweep_batch(T0 + 7200, 3600) == 1
    assert await box.ended_jobs(10) == []
    assert await fire_ended_jobs(box, T0 + 7200, 10) == 0
    assert await box.due(T0 + 7200, 10, []) == []
