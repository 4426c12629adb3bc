"""The crawl's addition to the batch store, on both backends: a job that grows."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sift.config import StoreSettings
from sift.store import CLASS_FLEET, BatchJob, BatchStore, NewTarget
from sift.store.postgres.store import PgBatchStore
from test_dcache_batch import db  # noqa: F401  (the fixture: both backends)

U = "https://a.test/"


def crawl_job(id: str) -> BatchJob:
    return BatchJob(
        id, "alice", CLASS_FLEET, f"k-{id}", "queued", "", 1, 0, 100, 100, 0, "crawl", "{}"
    )


async def start(db: BatchStore, id: str = "c") -> str:  # noqa: F811
    job_id, created = await db.submit_job(
        crawl_job(id), [NewTarget(U, "{}")], ttl_s=86400, live_jobs=10, live_jobs_total=10
    )
    assert created
    return job_id


async def test_append_grows_the_job_once_per_url_up_to_max_total(db: BatchStore) -> None:  # noqa: F811
    job_id = await start(db)
    kw = {"options": '{"format":"text"}', "now": 150, "max_total": 5}
    # The start URL is seen from the submission on; repeats within a call count once.
    got = await db.append_crawl_targets(
        job_id, [U, U + "a", U + "b", U + "a"], depth=1, parent=0, seen=[U + "moved"], **kw
    )
    assert got == (2, 3)
    assert await db.append_crawl_targets(
        job_id, [U + "moved", U + "b"], depth=2, parent=1, **kw
    ) == (0, 3)
    # Only two more fit under max_total: the rest are not enqueued.
    assert await db.append_crawl_targets(
        job_id, [U + "c", U + "d", U + "e"], depth=2, parent=2, **kw
    ) == (2, 5)
    rows = await db.batch_targets(job_id)
    assert rows is not None
    assert [(t.idx, t.url, t.depth, t.parent, t.status, t.options) for t in rows] == [
        (0, U, 0, None, "pending", "{}"),
        (1, U + "a", 1, 0, "pending", '{"format":"text"}'),
        (2, U + "b", 1, 0, "pending", '{"format":"text"}'),
        (3, U + "c", 2, 2, "pending", '{"format":"text"}'),
        (4, U + "d", 2, 2, "pending", '{"format":"text"}'),
    ]
    job = await db.batch_job(job_id)
    assert job is not None
    assert (job.kind, job.targets_total, job.targets_done, job.lease) == ("crawl", 5, 0, 150)
    assert await db.batch_target_counts(job_id) == {
        "pending": 5,
        "running": 0,
        "done": 0,
        "failed": 0,
        "cancelled": 0,
    }


async def test_a_cancelled_job_never_grows_and_a_swept_one_takes_its_seen_set(
    db: BatchStore,  # noqa: F811
) -> None:
    job_id = await start(db)
    await db.cancel_job(job_id, "alice", 120, 86400)
    kw = {"options": "{}", "now": 130, "max_total": 10, "depth": 1, "parent": 0}
    assert await db.append_crawl_targets(job_id, [U + "a"], **kw) == (0, 1)
    assert await db.sweep_batch(10**9, 86400) == 1
    # A new crawl with the same id starts with an empty seen-set.
    await start(db)
    assert await db.append_crawl_targets(job_id, [U + "a"], **kw) == (1, 2)


async def test_concurrent_appends_on_several_nodes_enqueue_each_url_once(
    pg_url: str, tmp_path: Path
) -> None:
    nodes = [await PgBatchStore.open(StoreSettings(url=pg_url), migrate=False) for _ in range(3)]
    try:
        job_id = await start(nodes[0])
        urls = [f"{U}{i}" for i in range(60)]

        async def append(n: int) -> tuple[int, int]:
            # Each node finds an overlapping share of the links, in its own order.
            mine = urls[n * 15 : n * 15 + 30][:: 1 if n % 2 else -1]
            return await nodes[n].append_crawl_targets(
                job_id, mine, options="{}", depth=1, parent=0, max_total=1000, now=200
            )

        added = await asyncio.gather(*(append(n) for n in range(3)))
        rows = await nodes[1].batch_targets(job_id)
        assert rows is not None
        assert sum(a for a, _ in added) == 60
        assert [t.idx for t in rows] == list(range(61))
        assert sorted(t.url for t in rows[1:]) == sorted(urls)
        job = await nodes[2].batch_job(job_id)
        assert job is not None and job.targets_total == 61
    finally:
        for node in nodes:
            await node.close()
