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
  statement (see ``pgschema``).
- Miss and eviction counters are per node (Prometheus sums them).

Foreign exceptions stop here: a connection problem is ``StoreUnavailable`` (503
``store_unavailable``), any other database error ``StoreError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import psycopg
from psycopg import AsyncCursor
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from sift.batch.politeness import host_key
from sift.batch.submit import quota_exceeded, service_busy
from sift.batch.views import CANCELLED_REASON, error_text, final_status, job_view
from sift.config import StoreSettings
from sift.errors import BadRequest, NotFound, SiftError, StoreError, StoreUnavailable
from sift.store import (
    CLASS_FLEET,
    CLASS_RESTRICTED,
    Backend,
    BatchJob,
    BatchTarget,
    JobStatus,
    TargetStatus,
)
from sift.store.base import (
    IDEM_REUSE_SQL,
    JOB_COLS,
    LIVE_SQL,
    TARGET_COLS,
    TARGET_STATUSES,
    TERMINAL_TARGET,
    NewTarget,
    check_job_status,
    check_target_status,
    utf8_len,
)
from sift.store.postgres.claims import PgWork
from sift.store.postgres.schema import EVICT_LOCK, prepare

_TERMINAL: Final = "('done', 'failed', 'cancelled')"
NOTIFY_CHANNEL: Final = "sift_batch"

Cursor = AsyncCursor[tuple[Any, ...]]


def _job(row: Sequence[Any]) -> BatchJob:
    return BatchJob(*row)


def _target(row: Sequence[Any]) -> BatchTarget:
    return BatchTarget(*row)


def _not_found(job_id: str) -> NotFound:
    return NotFound(
        f"no batch job {job_id!r}",
        hint="Check the id; jobs expire when their lease runs out, and only the caller who "
        "submitted a job can see it.",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class PgBatchStore:
    """``BatchStore`` on PostgreSQL. Open with ``PgBatchStore.open(settings.store)``."""

    def __init__(self, pool: AsyncConnectionPool[Any], settings: StoreSettings) -> None:
        self._pool = pool
        self.settings = settings
        self.counters: dict[str, int] = {
            "batch_misses": 0,
            "batch_idem_misses": 0,
            "batch_evictions": 0,
        }
        self._closed = False
        self.work = PgWork(self)

    @classmethod
    async def open(cls, settings: StoreSettings, *, migrate: bool = True) -> PgBatchStore:
        """Migrate (unless told not to), then open the pool. ``ConfigError`` if unusable."""
        if migrate:
            # Sync on purpose: start-up, before any request; one clear line when it fails.
            prepare(settings.url)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            settings.url,
            min_size=1,
            max_size=settings.pool_size,
            timeout=settings.connect_timeout_s,
            kwargs={"autocommit": True, "prepare_threshold": None},
            open=False,
            name="sift-batch",
        )
        await pool.open(wait=False)
        return cls(pool, settings)

    @property
    def backend(self) -> Backend:
        return "postgres"

    @property
    def shared(self) -> bool:
        return True

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Cursor]:
        """One transaction; psycopg's exceptions become sift's here and nowhere else."""
        if self._closed:
            raise StoreError("the batch store is closed")
        try:
            async with self._pool.connection() as conn, conn.transaction():
                yield conn.cursor()
        except SiftError:
            raise
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreUnavailable(
                f"the batch store (PostgreSQL) is unreachable: {_first_line(exc)}"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"batch store error: {_first_line(exc)}") from exc

    # -- helpers inside one transaction ------------------------------------------------------

    async def _get_job(self, cur: Cursor, job_id: str) -> BatchJob | None:
        await cur.execute(f"SELECT {JOB_COLS} FROM batch_job WHERE id = %s", (job_id,))
        row = await cur.fetchone()
        return None if row is None else _job(row)

    async def _exists(self, cur: Cursor, job_id: str, *, lock: bool = False) -> bool:
        sql = "SELECT 1 FROM batch_job WHERE id = %s" + (" FOR UPDATE" if lock else "")
        await cur.execute(sql, (job_id,))
        return await cur.fetchone() is not None

    async def _require_job(self, cur: Cursor, job_id: str) -> None:
        if not await self._exists(cur, job_id, lock=True):
            raise NotFound(f"batch job {job_id} not found")

    async def _counts(self, cur: Cursor, job_id: str) -> dict[str, int]:
        await cur.execute(
            "SELECT status, count(*) FROM batch_target WHERE job_id = %s GROUP BY status",
            (job_id,),
        )
        counts = dict.fromkeys(sorted(TARGET_STATUSES), 0)
        counts.update({str(s): int(n) for s, n in await cur.fetchall()})
        return counts

    async def _set_status(
        self, cur: Cursor, job_id: str, status: JobStatus, error: str, now: int
    ) -> None:
        await cur.execute(
            "UPDATE batch_job SET status = %s, error = %s, lease = %s WHERE id = %s",
            (status, error, now, job_id),
        )
        if cur.rowcount == 0:
            raise NotFound(f"batch job {job_id} not found")

    async def _touch(self, cur: Cursor, job_id: str, now: int) -> None:
        await cur.execute("UPDATE batch_job SET lease = %s WHERE id = %s", (now, job_id))
        if cur.rowcount == 0:
            raise NotFound(f"batch job {job_id} not found")

    async def _finish_targets(
        self, cur: Cursor, job_id: str, status: str, error: str, hint: str | None
    ) -> int:
        """Every pending or running target of the job becomes ``status``; gates released."""
        await cur.execute(
            """
            WITH old AS (
                SELECT idx, status, host FROM batch_target
                 WHERE job_id = %(job)s AND status IN ('pending', 'running') FOR UPDATE),
            upd AS (
                UPDATE batch_target t SET status = %(st)s, error = %(err)s, hint = %(hint)s,
                       lease_token = NULL, lease_until = NULL, lease_owner = NULL
                  FROM old WHERE t.job_id = %(job)s AND t.idx = old.idx RETURNING 1),
            gate AS (
                UPDATE host_gate h SET inflight = greatest(h.inflight - c.n, 0)
                  FROM (SELECT host, count(*) AS n FROM old WHERE status = 'running'
                         GROUP BY host) c
                 WHERE h.host = c.host)
            SELECT count(*) FROM upd
            """,
            {"job": job_id, "st": status, "err": error, "hint": hint},
        )
        row = await cur.fetchone()
        n = int(row[0]) if row else 0
        if n:
            await cur.execute(
                "UPDATE batch_job SET targets_done = targets_done + %s WHERE id = %s", (n, job_id)
            )
        return n

    async def _update_target(
        self,
        cur: Cursor,
        job_id: str,
        idx: int,
        now: int,
        status: TargetStatus,
        result: str | None,
        error: str | None,
        hint: str | None,
    ) -> None:
        await cur.execute(
            "SELECT status, octet_length(result), host FROM batch_target "
            "WHERE job_id = %s AND idx = %s FOR UPDATE",
            (job_id, idx),
        )
        row = await cur.fetchone()
        if row is None:
            await self._require_job(cur, job_id)
            raise NotFound(f"batch job {job_id} has no target {idx}")
        old_status, old_len, host = str(row[0]), int(row[1] or 0), str(row[2])
        done_delta = (status in TERMINAL_TARGET) - (old_status in TERMINAL_TARGET)
        gate_delta = (status == "running") - (old_status == "running")
        await cur.execute(
            "UPDATE batch_target SET status = %s, result = %s, error = %s, hint = %s "
            "WHERE job_id = %s AND idx = %s",
            (status, result, error, hint, job_id, idx),
        )
        if gate_delta:
            await cur.execute(
                "UPDATE host_gate SET inflight = greatest(inflight + %s, 0) WHERE host = %s",
                (gate_delta, host),
            )
        await cur.execute(
            "UPDATE batch_job SET targets_done = targets_done + %s, nbytes = nbytes + %s, "
            "lease = %s WHERE id = %s",
            (done_delta, utf8_len(result) - old_len, now, job_id),
        )

    async def _evict(self, cur: Cursor, max_bytes: int, caller: str | None = None) -> int:
        # One evictor at a time across the cluster; the others wait and then see less.
        await cur.execute("SELECT pg_advisory_xact_lock(%s)", (EVICT_LOCK,))
        total = await self._nbytes(cur)
        if total <= max_bytes:
            return 0
        # The submitting caller's own finished jobs first (false sorts before true), then
        # the spec's order: oldest lease first. NULL (no caller named) compares as unknown,
        # which sorts every row alike.
        await cur.execute(
            f"SELECT id, nbytes FROM batch_job WHERE status NOT IN {LIVE_SQL} AND nbytes > 0 "
            "ORDER BY (caller IS DISTINCT FROM %s::text) AND %s::text IS NOT NULL, "
            "lease, created_at, seq",
            (caller, caller),
        )
        victims: list[str] = []
        for job_id, nbytes in await cur.fetchall():
            if total <= max_bytes:
                break
            victims.append(str(job_id))
            total -= int(nbytes)
        if victims:
            await self._delete_jobs(cur, victims)
        self.counters["batch_evictions"] += len(victims)
        return len(victims)

    async def _delete_jobs(self, cur: Cursor, ids: list[str]) -> int:
        """Delete jobs (targets go by cascade), releasing the gates their running targets
        held; late writes for those targets then match no row."""
        await cur.execute(
            """
            WITH gone AS (DELETE FROM batch_job WHERE id = ANY(%(ids)s) RETURNING id),
            held AS (SELECT host, count(*) AS n FROM batch_target
                      WHERE job_id = ANY(%(ids)s) AND status = 'running' GROUP BY host),
            gate AS (UPDATE host_gate h SET inflight = greatest(h.inflight - held.n, 0)
                       FROM held WHERE h.host = held.host)
            SELECT count(*) FROM gone
            """,
            {"ids": ids},
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    async def _nbytes(cur: Cursor) -> int:
        await cur.execute("SELECT coalesce(sum(nbytes), 0) FROM batch_job")
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def _insert_job(self, cur: Cursor, job: BatchJob) -> None:
        check_job_status(job.status)
        if job.caller_class not in (CLASS_FLEET, CLASS_RESTRICTED):
            raise BadRequest(f"unknown caller class {job.caller_class!r}")
        await cur.execute(
            f"INSERT INTO batch_job ({JOB_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            (
                job.id,
                job.caller,
                job.caller_class,
                job.idem_key,
                job.status,
                job.error,
                job.targets_total,
                job.targets_done,
                job.created_at,
                job.lease,
                job.nbytes,
                job.kind,
                job.spec,
            ),
        )

    async def _insert_targets(
        self, cur: Cursor, job_id: str, targets: Sequence[BatchTarget]
    ) -> None:
        done = nbytes = 0
        hosts: set[str] = set()
        for t in targets:
            check_target_status(t.status)
            done += t.status in TERMINAL_TARGET
            nbytes += utf8_len(t.result)
        await self._require_job(cur, job_id)
        async with cur.copy(f"COPY batch_target ({TARGET_COLS}, host) FROM STDIN") as copy:
            for t in targets:
                host = host_key(t.url)
                hosts.add(host)
                await copy.write_row(
                    (
                        job_id,
                        *(t.idx, t.url, t.options, t.status, t.result, t.error, t.hint),
                        *(t.depth, t.parent, host),
                    )
                )
        if done or nbytes:
            await cur.execute(
                "UPDATE batch_job SET targets_done = targets_done + %s, nbytes = nbytes + %s "
                "WHERE id = %s",
                (done, nbytes, job_id),
            )
        if hosts:
            await cur.execute(
                "INSERT INTO host_gate (host) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING",
                (sorted(hosts),),
            )

    # -- the spec's fourteen methods -------------------------------------------------------

    async def create_batch_job(self, job: BatchJob) -> None:
        async with self._tx() as cur:
            await self._insert_job(cur, job)

    async def batch_job(self, id: str) -> BatchJob | None:
        async with self._tx() as cur:
            job = await self._get_job(cur, id)
        if job is None:
            self.counters["batch_misses"] += 1
        return job

    async def batch_job_by_idem(
        self, caller: str, idem_key: str, now: int, ttl_s: float
    ) -> str | None:
        async with self._tx() as cur:
            found = await self._idem(cur, caller, idem_key, now, ttl_s)
        return found

    async def _idem(
        self, cur: Cursor, caller: str, idem_key: str, now: int, ttl_s: float
    ) -> str | None:
        await cur.execute(
            "SELECT id FROM batch_job WHERE caller = %s AND idem_key = %s AND lease > %s "
            f"AND status IN {IDEM_REUSE_SQL} ORDER BY created_at DESC, seq DESC LIMIT 1",
            (caller, idem_key, now - ttl_s),
        )
        row = await cur.fetchone()
        if row is None:
            self.counters["batch_idem_misses"] += 1
            return None
        return str(row[0])

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
            await self._insert_targets(cur, job_id, list(targets))

    async def batch_targets(self, job_id: str) -> list[BatchTarget] | None:
        async with self._tx() as cur:
            if not await self._exists(cur, job_id):
                self.counters["batch_misses"] += 1
                return None
            await cur.execute(
                f"SELECT {TARGET_COLS} FROM batch_target WHERE job_id = %s ORDER BY idx",
                (job_id,),
            )
            return [_target(r) for r in await cur.fetchall()]

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
            await self._update_target(cur, job_id, idx, now, status, result, error, hint)

    async def set_batch_job_status(self, id: str, status: JobStatus, error: str, now: int) -> None:
        check_job_status(status)
        async with self._tx() as cur:
            await self._set_status(cur, id, status, error, now)

    async def touch_batch_job(self, id: str, now: int) -> None:
        async with self._tx() as cur:
            await self._touch(cur, id, now)

    async def sweep_batch(self, now: int, ttl_s: float) -> int:
        async with self._tx() as cur:
            await cur.execute(
                "SELECT id FROM batch_job WHERE lease <= %s FOR UPDATE SKIP LOCKED",
                (now - ttl_s,),
            )
            ids = [str(r[0]) for r in await cur.fetchall()]
            return await self._delete_jobs(cur, ids) if ids else 0

    async def evict_batch_oldest(self, max_bytes: int, *, caller: str | None = None) -> int:
        async with self._tx() as cur:
            return await self._evict(cur, max_bytes, caller)

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
            if targets_status is not None:
                for job_id in ids:
                    await self._finish_targets(cur, job_id, targets_status, reason, None)
        return len(ids)

    async def batch_nbytes(self) -> int:
        async with self._tx() as cur:
            return await self._nbytes(cur)

    # -- reads and writes the runner and the API use ----------------------------------------

    async def queued_jobs(self) -> list[BatchJob]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {JOB_COLS} FROM batch_job WHERE status = 'queued' ORDER BY created_at, seq"
            )
            return [_job(r) for r in await cur.fetchall()]

    async def jobs_of(self, caller: str, limit: int) -> list[BatchJob]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {JOB_COLS} FROM batch_job WHERE caller = %s "
                "ORDER BY created_at DESC, seq DESC LIMIT %s",
                (caller, max(limit, 0)),
            )
            return [_job(r) for r in await cur.fetchall()]

    async def batch_targets_page(
        self, job_id: str, offset: int, limit: int
    ) -> list[BatchTarget] | None:
        async with self._tx() as cur:
            if not await self._exists(cur, job_id):
                self.counters["batch_misses"] += 1
                return None
            await cur.execute(
                f"SELECT {TARGET_COLS} FROM batch_target WHERE job_id = %s AND idx >= %s "
                "ORDER BY idx LIMIT %s",
                (job_id, offset, max(limit, 0)),
            )
            return [_target(r) for r in await cur.fetchall()]

    async def next_pending_targets(self, job_id: str, limit: int) -> list[BatchTarget]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {TARGET_COLS} FROM batch_target "
                "WHERE job_id = %s AND status = 'pending' ORDER BY idx LIMIT %s",
                (job_id, max(limit, 0)),
            )
            return [_target(r) for r in await cur.fetchall()]

    async def batch_target_counts(self, job_id: str) -> dict[str, int] | None:
        async with self._tx() as cur:
            if not await self._exists(cur, job_id):
                self.counters["batch_misses"] += 1
                return None
            return await self._counts(cur, job_id)

    async def finish_pending_targets(
        self, job_id: str, status: TargetStatus, error: str, hint: str | None, now: int
    ) -> int:
        if status not in ("failed", "cancelled"):
            raise BadRequest(f"finish_pending_targets needs failed or cancelled, not {status!r}")
        async with self._tx() as cur:
            await self._require_job(cur, job_id)
            n = await self._finish_targets(cur, job_id, status, error, hint)
            await self._touch(cur, job_id, now)
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
            # Serialise this caller's submissions across the cluster: the lookup, the quota
            # and the insert below see each other's effects.
            await cur.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (job.caller,)
            )
            existing = await self._idem(cur, job.caller, job.idem_key, job.created_at, ttl_s)
            if existing is not None:
                return existing, False
            await cur.execute(
                f"SELECT count(*) FILTER (WHERE caller = %s), count(*) FROM batch_job "
                f"WHERE status IN {LIVE_SQL}",
                (job.caller,),
            )
            row = await cur.fetchone()
            mine, total = (int(row[0]), int(row[1])) if row else (0, 0)
            if mine >= live_jobs:
                raise quota_exceeded(job.caller, mine, live_jobs)
            if total >= live_jobs_total:
                raise service_busy(live_jobs_total)
            await self._insert_job(cur, job)
            rows = [
                BatchTarget(job.id, i, t.url, t.options, "pending") for i, t in enumerate(targets)
            ]
            await self._insert_targets(cur, job.id, rows)
            if job.kind == "crawl":
                await self._seen(cur, job.id, [t.url for t in targets])
            await cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"submit:{job.id}"))
        return job.id, True

    async def _owned(self, cur: Cursor, job_id: str, caller: str) -> BatchJob:
        job = await self._get_job(cur, job_id)
        if job is None:
            self.counters["batch_misses"] += 1
        if job is None or job.caller != caller:
            raise _not_found(job_id)
        return job

    async def owned_job(self, job_id: str, caller: str) -> BatchJob:
        async with self._tx() as cur:
            return await self._owned(cur, job_id, caller)

    async def touch_owned(self, job_id: str, caller: str, now: int) -> BatchJob:
        async with self._tx() as cur:
            job = await self._owned(cur, job_id, caller)
            await self._touch(cur, job_id, now)
            return job

    async def _status_view(
        self, cur: Cursor, job_id: str, caller: str, now: int, ttl_s: int, running: int
    ) -> dict[str, Any]:
        job = await self._owned(cur, job_id, caller)
        counts = await self._counts(cur, job_id)
        moved = min(running, counts.get("pending", 0))
        counts["pending"] -= moved
        counts["running"] += moved
        await self._touch(cur, job_id, now)
        job.lease = now
        return job_view(job, counts, ttl_s)

    async def status_view(
        self, job_id: str, caller: str, now: int, ttl_s: int, running: int = 0
    ) -> dict[str, Any]:
        async with self._tx() as cur:
            return await self._status_view(cur, job_id, caller, now, ttl_s, running)

    async def cancel_job(self, job_id: str, caller: str, now: int, ttl_s: int) -> dict[str, Any]:
        async with self._tx() as cur:
            await cur.execute("SELECT 1 FROM batch_job WHERE id = %s FOR UPDATE", (job_id,))
            job = await self._owned(cur, job_id, caller)  # read under the row lock
            if job.status in ("queued", "running"):
                await self._set_status(cur, job_id, "cancelled", CANCELLED_REASON, now)
                await self._finish_targets(cur, job_id, "cancelled", CANCELLED_REASON, None)
                await cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"cancel:{job_id}"))
            return await self._status_view(cur, job_id, caller, now, ttl_s, 0)

    async def begin_job(self, job_id: str, now: int) -> None:
        async with self._tx() as cur:
            await cur.execute(
                "UPDATE batch_job SET status = 'running', lease = %s "
                "WHERE id = %s AND status = 'queued'",
                (now, job_id),
            )
            if cur.rowcount == 0 and not await self._exists(cur, job_id):
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
            await self._update_target(cur, job_id, idx, now, status, result, error, hint)
        if await self.batch_nbytes() > max_bytes:
            await self.evict_batch_oldest(max_bytes, caller=caller)

    async def finish_job(
        self, job_id: str, now: int, max_bytes: int, caller: str | None = None
    ) -> JobStatus | None:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {JOB_COLS} FROM batch_job WHERE id = %s FOR UPDATE", (job_id,)
            )
            row = await cur.fetchone()
            if row is None:
                return None
            job = _job(row)
            if job.status not in ("queued", "running"):
                return job.status
            counts = await self._counts(cur, job_id)
            if counts["pending"] or counts["running"]:
                lost = SiftError("sift lost track of this target")
                counts["failed"] += await self._finish_targets(
                    cur, job_id, "failed", error_text(lost), None
                )
            status, error = final_status(counts)
            await self._set_status(cur, job_id, status, error, now)
        await self.evict_batch_oldest(max_bytes, caller=caller)
        return status

    # -- crawls (sift.dcache.crawl has the contract) ---------------------------------------------

    @staticmethod
    async def _seen(cur: Cursor, job_id: str, urls: Sequence[str]) -> None:
        if urls:
            await cur.execute(
                "INSERT INTO crawl_seen (job_id, url) SELECT %s, unnest(%s::text[]) "
                "ON CONFLICT DO NOTHING",
                (job_id, list(urls)),
            )

    async def put_crawl_seen(self, job_id: str, urls: Sequence[str]) -> None:
        async with self._tx() as cur:
            await self._seen(cur, job_id, urls)

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
            # The job row's lock serialises every append to this job across the cluster (and
            # against a cancel, which takes it too): the unseen check below and the inserts
            # see each other, and targets_total hands out each idx once.
            await cur.execute(
                "SELECT status, targets_total FROM batch_job WHERE id = %s FOR UPDATE", (job_id,)
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound(f"batch job {job_id} not found")
            status, total = str(row[0]), int(row[1])
            if status not in ("queued", "running"):
                return 0, total
            await self._seen(cur, job_id, seen)
            room = max_total - total
            if room <= 0 or not urls:
                return 0, total
            await cur.execute(
                "SELECT x.u FROM unnest(%s::text[]) WITH ORDINALITY AS x(u, n) "
                "WHERE NOT EXISTS (SELECT 1 FROM crawl_seen s WHERE s.job_id = %s AND s.url = x.u) "
                "ORDER BY x.n",
                (list(dict.fromkeys(urls)), job_id),
            )
            new = [str(r[0]) for r in await cur.fetchall()][:room]
            if not new:
                return 0, total
            await self._seen(cur, job_id, new)
            rows = [
                BatchTarget(job_id, total + i, u, options, "pending", depth=depth, parent=parent)
                for i, u in enumerate(new)
            ]
            await self._insert_targets(cur, job_id, rows)
            total += len(new)
            await cur.execute(
                "UPDATE batch_job SET targets_total = %s, lease = %s WHERE id = %s",
                (total, now, job_id),
            )
        return len(new), total

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
        if self._closed:
            return
        self._closed = True
        await self._pool.close()
