"""``PgBatchStore``: the batch store on PostgreSQL, shared by several sift nodes.

psycopg 3, async, over a ``psycopg_pool.AsyncConnectionPool``. Every method is one
transaction; the spec's rules 1–9 hold exactly as on the embedded store (the conformance
tests run over both). What differs, and why:

- Atomicity comes from the database, not from one worker thread. A submission takes a
  transaction-level advisory lock on its caller, so two nodes submitting one
  Idempotency-Key at once serialise: the second finds the first's job. The per-caller quota
  is exact for the same reason; ``batch.live_jobs_total`` is soft across callers (it may be
  passed by the number of callers submitting at the same instant: a load-shedding limit,
  not worth serialising every submission of the cluster).
- ``targets_done`` stays exactly-once: the delta comes from the target's old status, read
  under its row lock.
- ``host_gate.inflight`` follows every target that enters or leaves ``running`` in the same
  statement (see ``schema``).
- Miss and eviction counters are per node (Prometheus sums them).

Foreign exceptions stop here: a connection problem is ``StoreUnavailable`` (503
``store_unavailable``), any other database error ``StoreError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from sift.config import StoreSettings
from sift.errors import BadRequest, NotFound
from sift.store.base import (
    JOB_COLS,
    LIVE_SQL,
    TARGET_COLS,
    Backend,
    BatchJob,
    BatchTarget,
    JobStatus,
    NewTarget,
    TargetStatus,
    check_job_status,
    check_target_status,
)
from sift.store.postgres import eviction, rows, steps
from sift.store.postgres.claims import PgWork
from sift.store.postgres.conn import Cursor, PgConn
from sift.store.postgres.history import PgHistory
from sift.store.postgres.schema import prepare
from sift.store.postgres.watches import PgWatchStore


class PgBatchStore:
    """``BatchStore`` on PostgreSQL. Open with ``PgBatchStore.open(settings.store)``."""

    def __init__(self, conn: PgConn, settings: StoreSettings) -> None:
        self._conn = conn
        self.settings = settings
        self.counters: dict[str, int] = {
            "batch_misses": 0,
            "batch_idem_misses": 0,
            "batch_evictions": 0,
        }
        self.work = PgWork(conn)
        self.history = PgHistory(conn)  # the change history shares the pool
        self.watches = PgWatchStore(conn)

    @classmethod
    async def open(cls, settings: StoreSettings, *, migrate: bool = True) -> PgBatchStore:
        """Migrate (unless told not to), then open the pool. ``ConfigError`` if unusable."""
        if migrate:
            # Sync on purpose: start-up, before any request; one clear line when it fails.
            prepare(settings.url)
        return cls(await PgConn.open(settings), settings)

    @property
    def conn(self) -> PgConn:
        """The pool (the webhook outbox, ``sift.store.webhooks``, shares it)."""
        return self._conn

    def _tx(self) -> AbstractAsyncContextManager[Cursor]:
        """One transaction (``PgConn.tx``): for the store's methods and for tests."""
        return self._conn.tx()

    @property
    def backend(self) -> Backend:
        return "postgres"

    @property
    def shared(self) -> bool:
        return True

    # -- the spec's fourteen methods -------------------------------------------------------

    async def create_batch_job(self, job: BatchJob) -> None:
        async with self._tx() as cur:
            await rows.insert_job(cur, job)

    async def batch_job(self, id: str) -> BatchJob | None:
        async with self._tx() as cur:
            job = await rows.get_job(cur, id)
        if job is None:
            self.counters["batch_misses"] += 1
        return job

    async def batch_job_by_idem(
        self, caller: str, idem_key: str, now: int, ttl_s: float
    ) -> str | None:
        async with self._tx() as cur:
            found = await rows.idem(cur, self.counters, caller, idem_key, now, ttl_s)
        return found

    async def live_batch_jobs(self, caller: str) -> int:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT count(*) FROM batch_job WHERE caller = %s AND status IN {LIVE_SQL}",
                (caller,),
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def live_batch_jobs_total(self) -> int:
        async with self._tx() as cur:
            await cur.execute(f"SELECT count(*) FROM batch_job WHERE status IN {LIVE_SQL}")
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def put_batch_targets(self, job_id: str, targets: Sequence[BatchTarget]) -> None:
        async with self._tx() as cur:
            await rows.insert_targets(cur, job_id, list(targets))

    async def batch_targets(self, job_id: str) -> list[BatchTarget] | None:
        async with self._tx() as cur:
            if not await rows.exists(cur, job_id):
                self.counters["batch_misses"] += 1
                return None
            await cur.execute(
                f"SELECT {TARGET_COLS} FROM batch_target WHERE job_id = %s ORDER BY idx",
                (job_id,),
            )
            return [rows.target_row(r) for r in await cur.fetchall()]

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
        check_target_status(status)
        async with self._tx() as cur:
            await rows.update_target(cur, job_id, idx, now, status, result, error, hint)

    async def set_batch_job_status(self, id: str, status: JobStatus, error: str, now: int) -> None:
        check_job_status(status)
        async with self._tx() as cur:
            await rows.set_status(cur, id, status, error, now)

    async def touch_batch_job(self, id: str, now: int) -> None:
        async with self._tx() as cur:
            await rows.touch(cur, id, now)

    async def sweep_batch(self, now: int, ttl_s: float) -> int:
        async with self._tx() as cur:
            await cur.execute(
                "SELECT id FROM batch_job WHERE lease <= %s FOR UPDATE SKIP LOCKED",
                (now - ttl_s,),
            )
            ids = [str(r[0]) for r in await cur.fetchall()]
            return await eviction.delete_jobs(cur, ids) if ids else 0

    async def evict_batch_oldest(self, max_bytes: int, *, caller: str | None = None) -> int:
        async with self._tx() as cur:
            return await eviction.evict(cur, self.counters, max_bytes, caller)

    async def mark_in_flight_failed(
        self, reason: str, now: int, *, targets_status: TargetStatus | None = None
    ) -> int:
        if targets_status not in (None, "failed", "cancelled"):
            raise BadRequest(f"targets_status must be failed or cancelled, not {targets_status!r}")
        async with self._tx() as cur:
            await cur.execute(
                f"UPDATE batch_job SET status = 'failed', error = %s, lease = %s "
                f"WHERE status IN {LIVE_SQL} RETURNING id",
                (reason, now),
            )
            ids = [str(r[0]) for r in await cur.fetchall()]
            for job_id in ids:
                if targets_status is not None:
                    await rows.finish_targets(cur, job_id, targets_status, reason, None)
                await rows.forget_credentials(cur, job_id)
        return len(ids)

    async def batch_nbytes(self) -> int:
        async with self._tx() as cur:
            return await eviction.total_nbytes(cur)

    # -- reads and writes the runner and the API use ----------------------------------------

    async def queued_jobs(self) -> list[BatchJob]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {JOB_COLS} FROM batch_job WHERE status = 'queued' ORDER BY created_at, seq"
            )
            return [rows.job_row(r) for r in await cur.fetchall()]

    async def jobs_of(self, caller: str, limit: int) -> list[BatchJob]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {JOB_COLS} FROM batch_job WHERE caller = %s "
                "ORDER BY created_at DESC, seq DESC LIMIT %s",
                (caller, max(limit, 0)),
            )
            return [rows.job_row(r) for r in await cur.fetchall()]

    async def batch_targets_page(
        self, job_id: str, offset: int, limit: int
    ) -> list[BatchTarget] | None:
        async with self._tx() as cur:
            if not await rows.exists(cur, job_id):
                self.counters["batch_misses"] += 1
                return None
            await cur.execute(
                f"SELECT {TARGET_COLS} FROM batch_target WHERE job_id = %s AND idx >= %s "
                "ORDER BY idx LIMIT %s",
                (job_id, offset, max(limit, 0)),
            )
            return [rows.target_row(r) for r in await cur.fetchall()]

    async def next_pending_targets(self, job_id: str, limit: int) -> list[BatchTarget]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {TARGET_COLS} FROM batch_target "
                "WHERE job_id = %s AND status = 'pending' ORDER BY idx LIMIT %s",
                (job_id, max(limit, 0)),
            )
            return [rows.target_row(r) for r in await cur.fetchall()]

    async def batch_target_counts(self, job_id: str) -> dict[str, int] | None:
        async with self._tx() as cur:
            if not await rows.exists(cur, job_id):
                self.counters["batch_misses"] += 1
                return None
            return await rows.target_counts(cur, job_id)

    async def finish_pending_targets(
        self, job_id: str, status: TargetStatus, error: str, hint: str | None, now: int
    ) -> int:
        if status not in ("failed", "cancelled"):
            raise BadRequest(f"finish_pending_targets needs failed or cancelled, not {status!r}")
        async with self._tx() as cur:
            await rows.require_job(cur, job_id)
            n = await rows.finish_targets(cur, job_id, status, error, hint)
            await rows.touch(cur, job_id, now)
        return n

    # -- composite operations, each one transaction --------------------------------------------

    async def submit_job(
        self,
        job: BatchJob,
        targets: Sequence[NewTarget],
        *,
        ttl_s: float,
        live_jobs: int,
        live_jobs_total: int,
    ) -> tuple[str, bool]:
        async with self._tx() as cur:
            return await steps.submit(
                cur, self.counters, job, targets, ttl_s, live_jobs, live_jobs_total
            )

    async def owned_job(self, job_id: str, caller: str) -> BatchJob:
        async with self._tx() as cur:
            return await rows.owned(cur, self.counters, job_id, caller)

    async def touch_owned(self, job_id: str, caller: str, now: int) -> BatchJob:
        async with self._tx() as cur:
            job = await rows.owned(cur, self.counters, job_id, caller)
            await rows.touch(cur, job_id, now)
            return job

    async def status_view(
        self, job_id: str, caller: str, now: int, ttl_s: int, running: int = 0
    ) -> dict[str, Any]:
        async with self._tx() as cur:
            return await rows.status_view(cur, self.counters, job_id, caller, now, ttl_s, running)

    async def cancel_job(self, job_id: str, caller: str, now: int, ttl_s: int) -> dict[str, Any]:
        async with self._tx() as cur:
            return await steps.cancel(cur, self.counters, job_id, caller, now, ttl_s)

    async def begin_job(self, job_id: str, now: int) -> None:
        async with self._tx() as cur:
            await cur.execute(
                "UPDATE batch_job SET status = 'running', lease = %s "
                "WHERE id = %s AND status = 'queued'",
                (now, job_id),
            )
            if cur.rowcount == 0 and not await rows.exists(cur, job_id):
                raise NotFound(f"batch job {job_id} not found")

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
        check_target_status(status)
        async with self._tx() as cur:
            await rows.update_target(cur, job_id, idx, now, status, result, error, hint)
        if await self.batch_nbytes() > max_bytes:
            await self.evict_batch_oldest(max_bytes, caller=caller)

    async def finish_job(
        self, job_id: str, now: int, max_bytes: int, caller: str | None = None
    ) -> JobStatus | None:
        async with self._tx() as cur:
            status, finished = await steps.finish(cur, job_id, now)
        if finished:
            await self.evict_batch_oldest(max_bytes, caller=caller)
        return status

    # -- crawls (sift.store.sqlite.crawl has the contract) ----------------------------------

    async def put_crawl_seen(self, job_id: str, urls: Sequence[str]) -> None:
        async with self._tx() as cur:
            await rows.mark_seen(cur, job_id, urls)

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
        async with self._tx() as cur:
            return await steps.append_crawl(
                cur, job_id, urls, options, depth, parent, max_total, now, seen
            )

    # -- operations ----------------------------------------------------------------------------

    async def batch_stats(self) -> dict[str, int]:
        async with self._tx() as cur:
            await cur.execute("SELECT count(*), coalesce(sum(nbytes), 0) FROM batch_job")
            row = await cur.fetchone()
        jobs, nbytes = (int(row[0]), int(row[1])) if row else (0, 0)
        return {"batch_jobs": jobs, "batch_bytes": nbytes, **self.counters}

    async def check(self) -> None:
        async with self._tx() as cur:
            await cur.execute("SELECT 1")

    async def close(self) -> None:
        await self._conn.close()
