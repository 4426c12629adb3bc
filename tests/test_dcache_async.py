"""AsyncDB: one worker thread owns the connection; hundreds of tasks at once lose nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sift.dcache import DB, AsyncDB, PageEntry
from sift.errors import NotFound, StoreError
from sift.store import BatchJob, BatchTarget, TargetStatus

N = 500


@pytest.fixture
async def adb(tmp_path: Path) -> AsyncIterator[AsyncDB]:
    store = await AsyncDB.open(tmp_path / "sift.db", compress_level=0)
    yield store
    await store.close()


async def test_hundreds_of_concurrent_target_updates_lose_nothing(adb: AsyncDB) -> None:
    job = BatchJob("j", "alice", "fleet", "k", "running", "", N, 0, 100, 100, 0)
    await adb.run(DB.create_batch_job, job)
    rows = [BatchTarget("j", i, f"https://a.test/{i}", "{}", "pending") for i in range(N)]
    await adb.run(DB.put_batch_targets, "j", rows)

    async def finish(i: int) -> None:
        await adb.run(DB.update_batch_target, "j", i, 1000 + i, "running", None, None, None)
        status: TargetStatus = "done" if i % 5 else "failed"
        result = "r" * (i % 7) if status == "done" else None
        await adb.run(DB.update_batch_target, "j", i, 2000 + i, status, result, None, None)
        await adb.run(DB.touch_batch_job, "j", 2000 + i)

    await asyncio.gather(*(finish(i) for i in range(N)))
    got = await adb.run(DB.batch_job, "j")
    assert got is not None
    assert got.targets_done == N
    assert got.nbytes == sum(i % 7 for i in range(N) if i % 5)
    counts = await adb.run(DB.batch_target_counts, "j")
    assert counts == {"pending": 0, "running": 0, "done": 400, "failed": 100, "cancelled": 0}
    assert await adb.run(DB.integrity_check) == "ok"


async def test_concurrent_cache_traffic_stays_consistent(adb: AsyncDB) -> None:
    async def fetch_like(i: int) -> bytes | None:
        body = f"<p>page {i % 50}</p>".encode() * 20  # 50 distinct bodies, each put 6 times
        digest = await adb.run(DB.put_body, body, i)
        entry = PageEntry(
            f"https://a.test/{i}", f"https://a.test/{i}", 200, "text/html", None, None, i, digest
        )
        await adb.run(DB.put_page, f"k{i}", entry, i)
        await adb.run(DB.put_render, digest, "md", body[:40], i)
        page = await adb.run(DB.get_page, f"k{i}", i)
        assert page == entry
        return await adb.run(DB.get_render, digest, "md", i)

    results = await asyncio.gather(*(fetch_like(i) for i in range(300)))
    assert all(r is not None and len(r) == 40 for r in results)
    stats = await adb.run(DB.stats)
    assert (stats["bodies"], stats["pages"], stats["renders"]) == (50, 300, 50)
    assert stats["page_hits"] == 300 and stats["render_hits"] == 300


async def test_calls_run_in_order_on_one_thread_off_the_loop(adb: AsyncDB) -> None:
    seen: list[tuple[int, int]] = []

    def record(db: DB, i: int) -> None:
        seen.append((i, threading.get_ident()))

    await asyncio.gather(*(adb.run(record, i) for i in range(200)))
    assert [i for i, _ in seen] == list(range(200))  # FIFO: submitted order is run order
    threads = {t for _, t in seen}
    assert len(threads) == 1
    assert threads != {threading.get_ident()}


async def test_errors_propagate_and_keyword_arguments_pass(adb: AsyncDB) -> None:
    with pytest.raises(NotFound):
        await adb.run(DB.touch_batch_job, "missing", 1)
    job = BatchJob("j", "alice", "fleet", "k", "queued", "", 1, 0, 1, 1, 0)
    await adb.run(DB.create_batch_job, job)
    await adb.run(
        DB.put_batch_targets, "j", [BatchTarget("j", 0, "https://a.test/", "{}", "pending")]
    )
    assert await adb.run(DB.mark_in_flight_failed, "restarted", 5, targets_status="failed") == 1
    counts = await adb.run(DB.batch_target_counts, "j")
    assert counts is not None and counts["failed"] == 1


async def test_close_is_idempotent_and_later_runs_raise(tmp_path: Path) -> None:
    adb = await AsyncDB.open(tmp_path / "sift.db")
    pending = [adb.run(DB.put_body, f"body {i}".encode(), i) for i in range(50)]
    tasks = [asyncio.ensure_future(p) for p in pending]
    await asyncio.sleep(0)  # let the tasks submit their calls before close is queued
    await adb.close()
    await adb.close()
    assert len(set(await asyncio.gather(*tasks))) == 50  # queued calls finished before closing
    with pytest.raises(StoreError, match="closed"):
        await adb.run(DB.size)
    with pytest.raises(StoreError, match="closed"):
        adb.db.check()
    reopened = DB.open(tmp_path / "sift.db")
    assert reopened.stats()["bodies"] == 50
    reopened.close()


async def test_open_failure_is_a_store_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(StoreError) as info:
        await AsyncDB.open(bad)
    assert str(bad) in info.value.message


async def test_wrapping_an_open_db(tmp_path: Path) -> None:
    db = DB.open(tmp_path / "sift.db")
    db.mark_in_flight_failed("restarted", 1)  # start-up work on the sync DB, before the loop serves
    adb = AsyncDB(db)
    assert adb.db is db
    assert await adb.run(DB.live_batch_jobs_total) == 0
    await adb.close()
