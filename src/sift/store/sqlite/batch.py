"""The batch job store's SQLite SQL: spec/batchstore.md, rules 1–9, on the DB's one connection.

A job is one ``batch_job`` row plus its ``batch_target`` rows, and is only ever removed whole:
by lease (``sweep_batch``), by the batch byte budget (``evict_batch_oldest``, never a live job),
never by the content cache's LRU. Rules the code below relies on:

- Time is a parameter: every method that moves a lease takes ``now`` (unix seconds).
- Reads never write (rule 1): ``batch_job``, ``batch_targets`` and the counts leave the lease
  alone; the API calls ``touch_batch_job`` after a read.
- ``targets_done`` is the number of targets in a terminal status (done, failed, cancelled) and
  ``nbytes`` the UTF-8 bytes of the results currently stored; every write adjusts both by the
  difference it makes, so a rewrite never counts twice.
- Accessors are keyed by job id only (rule 2); checking the caller is the API's job.
- A write aimed at a missing job or target raises NotFound; a read of one returns None and
  counts a miss (rule 9).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from sift.errors import BadRequest, NotFound
from sift.fetch.credentials import CREDENTIAL_OPTIONS
from sift.store.base import (
    CLASS_FLEET,
    CLASS_RESTRICTED,
    IDEM_REUSE_SQL,
    JOB_COLS,
    LIVE_SQL,
    TARGET_COLS,
    TARGET_STATUSES,
    TERMINAL_TARGET,
    BatchJob,
    BatchTarget,
    JobStatus,
    TargetStatus,
    check_job_status,
    check_target_status,
    utf8_len,
)
from sift.store.sqlite.host import SqliteHost


def _job(row: Sequence[object]) -> BatchJob:
    return BatchJob(*row)  # type: ignore[arg-type]  # columns are JOB_COLS, in order


def _target(row: Sequence[object]) -> BatchTarget:
    return BatchTarget(*row)  # type: ignore[arg-type]  # columns are TARGET_COLS, in order


class BatchStoreMixin(SqliteHost):
    """The batch methods of ``sift.dcache.DB``."""

    # -- jobs ------------------------------------------------------------------------------

    def create_batch_job(self, job: BatchJob) -> None:
        """Store ``job`` exactly as given (rule 1: the caller sets lease and created_at).

        Raises BadRequest for an unknown status or caller class, StoreError for a duplicate id.
        """
        check_job_status(job.status)
        if job.caller_class not in (CLASS_FLEET, CLASS_RESTRICTED):
            raise BadRequest(f"unknown caller class {job.caller_class!r}")
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO batch_job ({JOB_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
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

    def batch_job(self, id: str) -> BatchJob | None:
        """The job, or None (a counted miss). Never writes."""
        with self._read() as conn:
            row = conn.execute(f"SELECT {JOB_COLS} FROM batch_job WHERE id = ?", (id,)).fetchone()
        if row is None:
            self._count("batch_misses")
            return None
        return _job(row)

    def batch_job_by_idem(self, caller: str, idem_key: str, now: int, ttl_s: float) -> str | None:
        """Rule 3: the newest job of ``(caller, idem_key)`` with ``lease + ttl_s > now`` and a
        status of queued, running, done or partial; None when there is none."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT id FROM batch_job WHERE caller = ? AND idem_key = ? AND lease > ? "
                f"AND status IN {IDEM_REUSE_SQL} ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (caller, idem_key, now - ttl_s),
            ).fetchone()
        if row is None:
            self._count("batch_idem_misses")
            return None
        return str(row[0])

    def live_batch_jobs(self, caller: str) -> int:
        """How many of ``caller``'s jobs are queued or running."""
        with self._read() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM batch_job WHERE caller = ? AND status IN {LIVE_SQL}",
                (caller,),
            ).fetchone()
        return int(row[0])

    def live_batch_jobs_total(self) -> int:
        """How many jobs, of every caller, are queued or running."""
        with self._read() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM batch_job WHERE status IN {LIVE_SQL}"
            ).fetchone()
        return int(row[0])

    def queued_jobs(self) -> list[BatchJob]:
        """Every queued job, oldest first (created_at, then insertion order)."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {JOB_COLS} FROM batch_job WHERE status = 'queued' "
                "ORDER BY created_at, rowid"
            ).fetchall()
        return [_job(r) for r in rows]

    def batch_jobs_of(self, caller: str, limit: int) -> list[BatchJob]:
        """``caller``'s jobs, newest first (created_at, then insertion order), at most
        ``limit``. Never writes: listing moves no lease."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {JOB_COLS} FROM batch_job WHERE caller = ? "
                "ORDER BY created_at DESC, rowid DESC LIMIT ?",
                (caller, max(limit, 0)),
            ).fetchall()
        return [_job(r) for r in rows]

    def set_batch_job_status(self, id: str, status: JobStatus, error: str, now: int) -> None:
        """Set status and error, and the lease to ``now``. NotFound for an unknown id. A
        job that ends loses the caller's headers and cookies (``_forget_credentials``)."""
        check_job_status(status)
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE batch_job SET status = ?, error = ?, lease = ? WHERE id = ?",
                (status, error, now, id),
            )
            if cur.rowcount == 0:
                raise NotFound(f"batch job {id} not found")
            if status not in ("queued", "running"):
                _forget_credentials(conn, id)

    def touch_batch_job(self, id: str, now: int) -> None:
        """Set the lease to ``now`` (rule 1). NotFound for an unknown id."""
        with self._write() as conn:
            cur = conn.execute("UPDATE batch_job SET lease = ? WHERE id = ?", (now, id))
            if cur.rowcount == 0:
                raise NotFound(f"batch job {id} not found")

    # -- targets ---------------------------------------------------------------------------

    def put_batch_targets(self, job_id: str, targets: Iterable[BatchTarget]) -> None:
        """Insert the targets of ``job_id`` in one transaction (all or none).

        Each row is stored under ``job_id`` whatever its own ``job_id`` field says. A target
        given already terminal, or with a result, is counted into targets_done / nbytes.
        NotFound for an unknown job; StoreError for a duplicate idx.
        """
        rows: list[tuple[object, ...]] = []
        done = nbytes = 0
        for t in targets:
            check_target_status(t.status)
            done += t.status in TERMINAL_TARGET
            nbytes += utf8_len(t.result)
            rows.append(
                (
                    job_id,
                    *(t.idx, t.url, t.options, t.status, t.result, t.error, t.hint),
                    *(t.depth, t.parent),
                )
            )
        with self._write() as conn:
            self._require_job(conn, job_id)
            conn.executemany(
                f"INSERT INTO batch_target ({TARGET_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows
            )
            if done or nbytes:
                conn.execute(
                    "UPDATE batch_job SET targets_done = targets_done + ?, nbytes = nbytes + ? "
                    "WHERE id = ?",
                    (done, nbytes, job_id),
                )

    def batch_targets(self, job_id: str) -> list[BatchTarget] | None:
        """Every target of the job in idx order, or None for an unknown job. Never writes."""
        with self._read() as conn:
            if not self._job_exists(conn, job_id):
                self._count("batch_misses")
                return None
            rows = conn.execute(
                f"SELECT {TARGET_COLS} FROM batch_target WHERE job_id = ? ORDER BY idx",
                (job_id,),
            ).fetchall()
        return [_target(r) for r in rows]

    def batch_targets_page(self, job_id: str, offset: int, limit: int) -> list[BatchTarget] | None:
        """Targets with ``offset <= idx < offset + limit`` in idx order; None for an unknown job."""
        with self._read() as conn:
            if not self._job_exists(conn, job_id):
                self._count("batch_misses")
                return None
            rows = conn.execute(
                f"SELECT {TARGET_COLS} FROM batch_target WHERE job_id = ? AND idx >= ? "
                "ORDER BY idx LIMIT ?",
                (job_id, offset, max(limit, 0)),
            ).fetchall()
        return [_target(r) for r in rows]

    def next_pending_targets(self, job_id: str, limit: int) -> list[BatchTarget]:
        """Up to ``limit`` pending targets, lowest idx first ([] for an unknown job)."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {TARGET_COLS} FROM batch_target INDEXED BY batch_target_pending "
                "WHERE job_id = ? AND status = 'pending' ORDER BY idx LIMIT ?",
                (job_id, max(limit, 0)),
            ).fetchall()
        return [_target(r) for r in rows]

    def batch_target_counts(self, job_id: str) -> dict[str, int] | None:
        """``{status: count}`` over every TargetStatus (zeros included); None for an unknown job."""
        with self._read() as conn:
            if not self._job_exists(conn, job_id):
                self._count("batch_misses")
                return None
            rows = conn.execute(
                "SELECT status, count(*) FROM batch_target WHERE job_id = ? GROUP BY status",
                (job_id,),
            ).fetchall()
        counts = dict.fromkeys(sorted(TARGET_STATUSES), 0)
        counts.update({str(s): int(n) for s, n in rows})
        return counts

    def update_batch_target(
        self,
        job_id: str,
        idx: int,
        now: int,
        status: TargetStatus,
        result: str | None = None,
        error: str | None = None,
        hint: str | None = None,
    ) -> None:
        """Write one target's status, result, error and hint (rule 4), and in the same
        transaction adjust the job: targets_done by +1 when the target enters a terminal status
        (-1 if it leaves one), nbytes by the change in stored result bytes, lease = ``now``.
        NotFound for an unknown job or idx."""
        check_target_status(status)
        with self._write() as conn:
            row = conn.execute(
                "SELECT status, length(CAST(result AS BLOB)) FROM batch_target "
                "WHERE job_id = ? AND idx = ?",
                (job_id, idx),
            ).fetchone()
            if row is None:
                self._require_job(conn, job_id)
                raise NotFound(f"batch job {job_id} has no target {idx}")
            old_status, old_len = str(row[0]), int(row[1] or 0)
            done_delta = (status in TERMINAL_TARGET) - (old_status in TERMINAL_TARGET)
            conn.execute(
                "UPDATE batch_target SET status = ?, result = ?, error = ?, hint = ? "
                "WHERE job_id = ? AND idx = ?",
                (status, result, error, hint, job_id, idx),
            )
            conn.execute(
                "UPDATE batch_job SET targets_done = targets_done + ?, nbytes = nbytes + ?, "
                "lease = ? WHERE id = ?",
                (done_delta, utf8_len(result) - old_len, now, job_id),
            )

    def finish_pending_targets(
        self, job_id: str, status: TargetStatus, error: str, hint: str | None, now: int
    ) -> int:
        """Mark every pending or running target of the job ``status`` (failed or cancelled)
        with ``error``/``hint``, count each into targets_done once, set the lease to ``now``,
        and return how many were marked. NotFound for an unknown job."""
        if status not in ("failed", "cancelled"):
            raise BadRequest(f"finish_pending_targets needs failed or cancelled, not {status!r}")
        with self._write() as conn:
            self._require_job(conn, job_id)
            n = self._finish_targets(conn, job_id, status, error, hint)
            conn.execute("UPDATE batch_job SET lease = ? WHERE id = ?", (now, job_id))
        return n

    # -- lifetime and budgets ----------------------------------------------------------------

    def sweep_batch(self, now: int, ttl_s: float) -> int:
        """Rule 5: delete every job with ``lease + ttl_s <= now`` (whatever its status) and its
        targets; return how many jobs were deleted."""
        with self._write() as conn:
            ids = conn.execute(
                "SELECT id FROM batch_job WHERE lease <= ?", (now - ttl_s,)
            ).fetchall()
            self._delete_jobs(conn, [str(r[0]) for r in ids])
        return len(ids)

    def evict_batch_oldest(self, max_bytes: int, *, caller: str | None = None) -> int:
        """Rule 6: delete whole finished jobs, oldest lease first, until batch_nbytes() <=
        ``max_bytes``; return how many. Queued and running jobs are never evicted, nor jobs
        holding no result bytes (deleting them would free nothing).

        With ``caller`` (whose result just pushed the store over budget), that caller's own
        finished jobs go first, oldest lease first, and only then other callers' jobs: one
        caller's results never evict another's while it still has its own to give up."""
        with self._write() as conn:
            total = self._nbytes(conn)
            if total <= max_bytes:
                return 0
            # (caller IS NOT ?) is 0 for the caller's own jobs; all 1 when caller is None.
            candidates = conn.execute(
                f"SELECT id, nbytes FROM batch_job WHERE status NOT IN {LIVE_SQL} "
                "AND nbytes > 0 ORDER BY (caller IS NOT ?), lease, created_at, rowid",
                (caller,),
            ).fetchall()
            victims: list[str] = []
            for job_id, nbytes in candidates:
                if total <= max_bytes:
                    break
                victims.append(str(job_id))
                total -= int(nbytes)
            self._delete_jobs(conn, victims)
        self._count("batch_evictions", len(victims))
        return len(victims)

    def mark_in_flight_failed(
        self, reason: str, now: int, *, targets_status: TargetStatus | None = None
    ) -> int:
        """Rule 7 (restart reconciliation): every queued or running job becomes failed with
        ``error=reason`` and lease ``now``; returns how many. With ``targets_status`` ("failed"
        or "cancelled") their unfinished targets are also marked so, with ``reason`` as error."""
        if targets_status not in (None, "failed", "cancelled"):
            raise BadRequest(f"targets_status must be failed or cancelled, not {targets_status!r}")
        with self._write() as conn:
            ids = [
                str(r[0])
                for r in conn.execute(
                    f"SELECT id FROM batch_job WHERE status IN {LIVE_SQL}"
                ).fetchall()
            ]
            conn.execute(
                f"UPDATE batch_job SET status = 'failed', error = ?, lease = ? "
                f"WHERE status IN {LIVE_SQL}",
                (reason, now),
            )
            for job_id in ids:
                if targets_status is not None:
                    self._finish_targets(conn, job_id, targets_status, reason, None)
                _forget_credentials(conn, job_id)
        return len(ids)

    def batch_nbytes(self) -> int:
        """Rule 8: the sum of nbytes over every job. Not part of size() or evict()."""
        with self._read() as conn:
            return self._nbytes(conn)

    # -- helpers (inside a caller's transaction) ---------------------------------------------

    @staticmethod
    def _nbytes(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT coalesce(sum(nbytes), 0) FROM batch_job").fetchone()[0])

    @staticmethod
    def _job_exists(conn: sqlite3.Connection, job_id: str) -> bool:
        row = conn.execute("SELECT 1 FROM batch_job WHERE id = ?", (job_id,)).fetchone()
        return row is not None

    def _require_job(self, conn: sqlite3.Connection, job_id: str) -> None:
        if not self._job_exists(conn, job_id):
            raise NotFound(f"batch job {job_id} not found")

    @staticmethod
    def _finish_targets(
        conn: sqlite3.Connection, job_id: str, status: str, error: str, hint: str | None
    ) -> int:
        n = conn.execute(
            "UPDATE batch_target SET status = ?, error = ?, hint = ? "
            "WHERE job_id = ? AND status IN ('pending', 'running')",
            (status, error, hint, job_id),
        ).rowcount
        conn.execute(
            "UPDATE batch_job SET targets_done = targets_done + ? WHERE id = ?", (n, job_id)
        )
        return n

    @staticmethod
    def _delete_jobs(conn: sqlite3.Connection, ids: list[str]) -> None:
        conn.executemany("DELETE FROM batch_target WHERE job_id = ?", [(i,) for i in ids])
        conn.executemany("DELETE FROM crawl_seen WHERE job_id = ?", [(i,) for i in ids])
        conn.executemany("DELETE FROM batch_job WHERE id = ?", [(i,) for i in ids])


def _json_paths(column: str, prefix: str) -> tuple[str, str]:
    """``json_remove``'s path list and the test that any of them is in ``column``, for the
    credential options under ``prefix`` (``$`` for a target's options, ``$.options`` for a
    crawl's spec). The names are sift's own constants, never input."""
    paths = [f"'{prefix}.{name}'" for name in CREDENTIAL_OPTIONS]
    has = " OR ".join(f"json_type({column}, {p}) IS NOT NULL" for p in paths)
    return ", ".join(paths), has


_TARGET_PATHS, _TARGET_HAS = _json_paths("options", "$")
_SPEC_PATHS, _SPEC_HAS = _json_paths("spec", "$.options")


def _forget_credentials(conn: sqlite3.Connection, job_id: str) -> None:
    """Remove the caller's headers and cookies from a job that has ended: from every
    target's options and from a crawl's spec. They are kept at rest only while the job
    lives (docs/batch.md); its results and everything else stay."""
    conn.execute(
        f"UPDATE batch_target SET options = json_remove(options, {_TARGET_PATHS}) "
        f"WHERE job_id = ? AND ({_TARGET_HAS})",
        (job_id,),
    )
    conn.execute(
        f"UPDATE batch_job SET spec = json_remove(spec, {_SPEC_PATHS}) "
        f"WHERE id = ? AND CASE WHEN json_valid(spec) THEN ({_SPEC_HAS}) ELSE 0 END",
        (job_id,),
    )
