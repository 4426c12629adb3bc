"""The embedded store's composite operations: several batch methods as one worker-thread call.

``SqliteBatchStore`` runs each function here with ``AsyncDB.run``, so it executes whole on
the database's one worker thread: nothing else touches the database between its steps, which
is what makes a submission's idempotency lookup, quotas and insert — or a cancellation, or a
job's final status — atomic (the PostgreSQL store gets the same from one transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sift.errors import NotFound, SiftError
from sift.store.base import BatchJob, BatchTarget, JobStatus, NewTarget, job_not_found
from sift.store.sqlite.tables import BatchTables
from sift.store.views import CANCELLED_REASON, error_text, job_view, quota_exceeded, service_busy


def owned_job(db: BatchTables, job_id: str, caller: str) -> BatchJob:
    job = db.batch_job(job_id)
    if job is None or job.caller != caller:
        raise job_not_found(job_id)
    return job


def status_view(
    db: BatchTables, job_id: str, caller: str, now: int, ttl_s: int, running: int = 0
) -> dict[str, Any]:
    """``running``: targets the runner is fetching, pending in the store (see runner)."""
    job = owned_job(db, job_id, caller)
    counts = db.batch_target_counts(job_id) or {}
    moved = min(running, counts.get("pending", 0))
    counts["pending"] = counts.get("pending", 0) - moved
    counts["running"] = counts.get("running", 0) + moved
    db.touch_batch_job(job_id, now)
    job.lease = now
    return job_view(job, counts, ttl_s)


def cancel_job(db: BatchTables, job_id: str, caller: str, now: int, ttl_s: int) -> dict[str, Any]:
    job = owned_job(db, job_id, caller)
    if job.status in ("queued", "running"):
        db.set_batch_job_status(job_id, "cancelled", CANCELLED_REASON, now)
        db.finish_pending_targets(job_id, "cancelled", CANCELLED_REASON, None, now)
    return status_view(db, job_id, caller, now, ttl_s)


def touch_owned(db: BatchTables, job_id: str, caller: str, now: int) -> BatchJob:
    job = owned_job(db, job_id, caller)
    db.touch_batch_job(job_id, now)
    return job


def begin_job(db: BatchTables, job_id: str, now: int) -> None:
    job = db.batch_job(job_id)
    if job is None:
        raise NotFound(f"batch job {job_id} not found")
    if job.status == "queued":
        db.set_batch_job_status(job_id, "running", "", now)


def store_outcome(
    db: BatchTables,
    job_id: str,
    idx: int,
    now: int,
    status: str,
    result: str | None,
    error: str | None,
    hint: str | None,
    max_bytes: int,
    caller: str | None,
) -> None:
    db.update_batch_target(job_id, idx, now, status, result, error, hint)  # type: ignore[arg-type]
    if db.batch_nbytes() > max_bytes:  # a read: no write transaction when under budget
        db.evict_batch_oldest(max_bytes, caller=caller)  # the caller's own finished jobs first


def finish_job(
    db: BatchTables, job_id: str, now: int, max_bytes: int, caller: str | None
) -> JobStatus | None:
    """Set the final status from the target counts (unless the job is no longer live)."""
    job = db.batch_job(job_id)
    counts = db.batch_target_counts(job_id)
    if job is None or counts is None:
        return None
    if job.status not in ("queued", "running"):
        return job.status
    if counts["pending"] or counts["running"]:
        # Only after a store error lost a target's outcome: it still gets exactly one.
        lost = SiftError("sift lost track of this target")
        counts["failed"] += db.finish_pending_targets(job_id, "failed", error_text(lost), None, now)
    failed = counts["failed"] + counts["cancelled"]
    status: JobStatus
    if failed == 0:
        status, error = "done", ""
    elif counts["done"] == 0:
        status, error = "failed", "every target failed; see the results"
    else:
        status, error = "partial", ""
    db.set_batch_job_status(job_id, status, error, now)
    db.evict_batch_oldest(max_bytes, caller=caller)
    return status


def submit_job(
    db: BatchTables,
    job: BatchJob,
    targets: Sequence[NewTarget],
    *,
    ttl_s: float,
    live_jobs: int,
    live_jobs_total: int,
) -> tuple[str, bool]:
    """On the DB worker thread: ``(id, created)``. An existing job of the same caller and key
    (spec rule 3) is returned with ``created=False`` and nothing stored; otherwise the quotas
    are checked (``QuotaExceeded`` 429, ``ServiceBusy`` 503) and ``job`` with its targets is
    stored."""
    existing = db.batch_job_by_idem(job.caller, job.idem_key, job.created_at, ttl_s)
    if existing is not None:
        return existing, False
    mine = db.live_batch_jobs(job.caller)
    if mine >= live_jobs:
        raise quota_exceeded(job.caller, mine, live_jobs)
    if db.live_batch_jobs_total() >= live_jobs_total:
        raise service_busy(live_jobs_total)
    db.create_batch_job(job)
    db.put_batch_targets(
        job.id, (BatchTarget(job.id, i, t.url, t.options, "pending") for i, t in enumerate(targets))
    )
    if job.kind == "crawl":  # a crawl's seen-set starts with its start URL
        db.put_crawl_seen(job.id, [t.url for t in targets])
    return job.id, True


def file_stats(db: BatchTables) -> dict[str, int]:
    """The database's ``stats()``: the file's counters and gauges, the batch ones among them."""
    return db.stats()


def check(db: BatchTables) -> None:
    """The database's ``check()`` (it belongs to the connection, not to the batch tables)."""
    db.check()
