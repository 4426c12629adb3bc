"""``SqliteBatchStore``: the embedded batch store, the batch SQL of the node's SQLite database
behind ``BatchStore``.

Every method is one ``AsyncDB.run`` call, so it runs whole on the database's one worker
thread: the composite operations (``submit_job``, ``cancel_job``, …)
are atomic because nothing else runs between their steps (``steps`` holds them).

The store does not own the ``AsyncDB``: the content cache shares it, and whoever opened it
closes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sift.store.base import Backend, BatchJob, BatchTarget, JobStatus, NewTarget, TargetStatus
from sift.store.sqlite import steps
from sift.store.sqlite.tables import BatchTables as DB
from sift.store.sqlite.watchstore import SqliteWatchStore
from sift.store.sqlite.worker import DBWorker as DBWorker

_STAT_KEYS = ("batch_jobs", "batch_bytes", "batch_misses", "batch_idem_misses", "batch_evictions")


class SqliteBatchStore:
    """``BatchStore`` over the node's own ``AsyncDB`` (any ``DBWorker``)."""

    def __init__(self, adb: DBWorker) -> None:
        self.adb = adb
        self.watches = SqliteWatchStore(adb)

    @property
    def backend(self) -> Backend:
        return "sqlite"

    @property
    def shared(self) -> bool:
        return False

    # -- the spec's fourteen methods -------------------------------------------------------

    async def create_batch_job(self, job: BatchJob) -> None:
        await self.adb.run(DB.create_batch_job, job)

    async def batch_job(self, id: str) -> BatchJob | None:
        return await self.adb.run(DB.batch_job, id)

    async def batch_job_by_idem(
        self, caller: str, idem_key: str, now: int, ttl_s: float
    ) -> str | None:
        return await self.adb.run(DB.batch_job_by_idem, caller, idem_key, now, ttl_s)

    async def live_batch_jobs(self, caller: str) -> int:
        return await self.adb.run(DB.live_batch_jobs, caller)

    async def live_batch_jobs_total(self) -> int:
        return await self.adb.run(DB.live_batch_jobs_total)

    async def put_batch_targets(self, job_id: str, targets: Sequence[BatchTarget]) -> None:
        await self.adb.run(DB.put_batch_targets, job_id, targets)

    async def batch_targets(self, job_id: str) -> list[BatchTarget] | None:
        return await self.adb.run(DB.batch_targets, job_id)

    async def update_batch_target(
        self,
        job_id: str,
        idx: int,
        now: int,
        status: TargetStatus,
        result: str | None = None,
        error: str | None = None,
        hint: str | None = None,
    ) -> None:
        await self.adb.run(DB.update_batch_target, job_id, idx, now, status, result, error, hint)

    async def set_batch_job_status(self, id: str, status: JobStatus, error: str, now: int) -> None:
        await self.adb.run(DB.set_batch_job_status, id, status, error, now)

    async def touch_batch_job(self, id: str, now: int) -> None:
        await self.adb.run(DB.touch_batch_job, id, now)

    async def sweep_batch(self, now: int, ttl_s: float) -> int:
        return await self.adb.run(DB.sweep_batch, now, ttl_s)

    async def evict_batch_oldest(self, max_bytes: int, *, caller: str | None = None) -> int:
        return await self.adb.run(DB.evict_batch_oldest, max_bytes, caller=caller)

    async def mark_in_flight_failed(
        self, reason: str, now: int, *, targets_status: TargetStatus | None = None
    ) -> int:
        return await self.adb.run(
            DB.mark_in_flight_failed, reason, now, targets_status=targets_status
        )

    async def batch_nbytes(self) -> int:
        return await self.adb.run(DB.batch_nbytes)

    # -- reads and writes the runner and the API use ----------------------------------------

    async def queued_jobs(self) -> list[BatchJob]:
        return await self.adb.run(DB.queued_jobs)

    async def jobs_of(self, caller: str, limit: int) -> list[BatchJob]:
        return await self.adb.run(DB.batch_jobs_of, caller, limit)

    async def batch_targets_page(
        self, job_id: str, offset: int, limit: int
    ) -> list[BatchTarget] | None:
        return await self.adb.run(DB.batch_targets_page, job_id, offset, limit)

    async def next_pending_targets(self, job_id: str, limit: int) -> list[BatchTarget]:
        return await self.adb.run(DB.next_pending_targets, job_id, limit)

    async def batch_target_counts(self, job_id: str) -> dict[str, int] | None:
        return await self.adb.run(DB.batch_target_counts, job_id)

    async def finish_pending_targets(
        self, job_id: str, status: TargetStatus, error: str, hint: str | None, now: int
    ) -> int:
        return await self.adb.run(DB.finish_pending_targets, job_id, status, error, hint, now)

    # -- composite operations, each one worker-thread call ---------------------------------

    async def submit_job(
        self,
        job: BatchJob,
        targets: Sequence[NewTarget],
        *,
        ttl_s: float,
        live_jobs: int,
        live_jobs_total: int,
    ) -> tuple[str, bool]:
        return await self.adb.run(
            steps.submit_job,
            job,
            targets,
            ttl_s=ttl_s,
            live_jobs=live_jobs,
            live_jobs_total=live_jobs_total,
        )

    async def owned_job(self, job_id: str, caller: str) -> BatchJob:
        return await self.adb.run(steps.owned_job, job_id, caller)

    async def touch_owned(self, job_id: str, caller: str, now: int) -> BatchJob:
        return await self.adb.run(steps.touch_owned, job_id, caller, now)

    async def status_view(
        self, job_id: str, caller: str, now: int, ttl_s: int, running: int = 0
    ) -> dict[str, Any]:
        return await self.adb.run(steps.status_view, job_id, caller, now, ttl_s, running)

    async def cancel_job(self, job_id: str, caller: str, now: int, ttl_s: int) -> dict[str, Any]:
        return await self.adb.run(steps.cancel_job, job_id, caller, now, ttl_s)

    async def begin_job(self, job_id: str, now: int) -> None:
        await self.adb.run(steps.begin_job, job_id, now)

    async def store_outcome(
        self,
        job_id: str,
        idx: int,
        now: int,
        status: TargetStatus,
        result: str | None,
        error: str | None,
        hint: str | None,
        max_bytes: int,
        caller: str | None = None,
    ) -> None:
        await self.adb.run(
            steps.store_outcome, job_id, idx, now, status, result, error, hint, max_bytes, caller
        )

    async def finish_job(
        self, job_id: str, now: int, max_bytes: int, caller: str | None = None
    ) -> JobStatus | None:
        return await self.adb.run(steps.finish_job, job_id, now, max_bytes, caller)

    # -- crawls ------------------------------------------------------------------------------

    async def put_crawl_seen(self, job_id: str, urls: Sequence[str]) -> None:
        await self.adb.run(DB.put_crawl_seen, job_id, urls)

    async def append_crawl_targets(
        self,
        job_id: str,
        urls: Sequence[str],
        *,
        options: str,
        depth: int,
        parent: int,
        max_total: int,
        now: int,
        seen: Sequence[str] = (),
    ) -> tuple[int, int]:
        return await self.adb.run(
            DB.append_crawl_targets,
            job_id,
            urls,
            options=options,
            depth=depth,
            parent=parent,
            max_total=max_total,
            now=now,
            seen=seen,
        )

    # -- operations ----------------------------------------------------------------------------

    async def batch_stats(self) -> dict[str, int]:
        stats = await self.adb.run(steps.file_stats)
        return {k: int(stats.get(k, 0)) for k in _STAT_KEYS}

    async def check(self) -> None:
        await self.adb.run(steps.check)

    async def close(self) -> None:
        """Nothing to release: the ``AsyncDB`` belongs to whoever opened it."""
