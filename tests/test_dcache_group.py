"""Group commit: many calls, one transaction, each undone alone when it fails."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sift.dcache import DB, AsyncDB, PageEntry
from sift.errors import NotFound, StoreError
from sift.store import BatchJob, BatchTarget


def _job(id: str, n: int) -> BatchJob:
    return BatchJob(id, "c", "fleet", f"k-{id}", "running", "", n, 0, 100, 100, 0)


def _page(digest: str) -> PageEntry:
    return PageEntry("http://x.test/", "http://x.test/", 200, "text/plain", None, None, 5, digest)


def test_run_group_commits_the_good_calls_and_undoes_the_failing_one(tmp_path: Path) -> None:
    db = DB.open(tmp_path / "g.db")
    db.create_batch_job(_job("j", 3))
    db.put_batch_targets(
        "j", [BatchTarget("j", i, "http://x.test/", "{}", "pending") for i in range(3)]
    )

    def fails_after_writing() -> None:
        db.put_body(b"x" * 5000, 7)  # counted into size(), then undone with the savepoint
        db.update_batch_target("nope", 0, 7, "done", "r", None, None)  # raises NotFound

    outcomes = db.run_group(
        [
            lambda: db.update_batch_target("j", 0, 7, "done", "ab", None, None),
            fails_after_writing,
            lambda: db.update_batch_target("j", 1, 8, "failed", None, "boom", "retry"),
        ]
    )
    assert [type(exc) if exc else None for _, exc in outcomes] == [None, NotFound, None]
    job = db.batch_job("j")
    assert job is not None
    assert (job.targets_done, job.lease, job.nbytes) == (2, 8, 2)
    assert db.size() == 0  # the undone body's bytes are not counted
    assert db.stats()["bodies"] == 0
    db.close()
    again = DB.open(tmp_path / "g.db")
    assert [t.status for t in again.batch_targets("j") or []] == ["done", "failed", "pending"]
    again.close()


async def test_concurrent_writes_through_asyncdb_are_grouped_and_all_durable(
    tmp_path: Path,
) -> None:
    adb = AsyncDB(DB.open(tmp_path / "a.db"))
    await adb.run(DB.create_batch_job, _job("j", 300))
    targets = [BatchTarget("j", i, "http://x.test/", "{}", "pending") for i in range(300)]
    await adb.run(DB.put_batch_targets, "j", targets)
    digests = await asyncio.gather(
        *(adb.run(DB.put_body, f"body {i}".encode(), 9) for i in range(100)),
        *(adb.run(DB.update_batch_target, "j", i, 9, "done", "r", None, None) for i in range(300)),
    )
    assert len(set(digests[:100])) == 100
    with pytest.raises(NotFound):
        await adb.run(DB.update_batch_target, "missing", 0, 9, "done", "r", None, None)
    await adb.run(DB.put_page, "k", _page(str(digests[0])), 9)
    await adb.close()
    db = DB.open(tmp_path / "a.db")
    job = db.batch_job("j")
    assert job is not None and job.targets_done == 300
    assert db.stats()["bodies"] == 100
    assert db.get_page("k", 10) == _page(str(digests[0]))
    db.close()


def test_run_group_on_a_closed_db_raises(tmp_path: Path) -> None:
    db = DB.open(tmp_path / "c.db")
    db.close()
    with pytest.raises(StoreError):
        db.run_group([lambda: None])
