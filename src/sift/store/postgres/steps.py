"""The PostgreSQL store's composite operations, each inside the caller's one transaction.

A submission (idempotency lookup, quotas, insert), a cancellation, a job's final status and
a crawl's append each read and write several rows; run in one transaction with the row or
advisory locks named below, they are atomic across every node sharing the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from sift.errors import NotFound, SiftError
from sift.store.base import JOB_COLS, LIVE_SQL, BatchJob, BatchTarget, JobStatus, NewTarget
from sift.store.postgres import rows
from sift.store.postgres.conn import Cursor
from sift.store.views import (
    CANCELLED_REASON,
    error_text,
    final_status,
    quota_exceeded,
    service_busy,
)

NOTIFY_CHANNEL: Final = "sift_batch"


async def submit(
    cur: Cursor,
    counters: dict[str, int],
    job: BatchJob,
    targets: Sequence[NewTarget],
    ttl_s: float,
    live_jobs: int,
    live_jobs_total: int,
) -> tuple[str, bool]:
    """``BatchStore.submit_job``: ``(id, created)``."""
    # Serialise this caller's submissions across the cluster: the lookup, the quota
    # and the insert below see each other's effects.
    await cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (job.caller,))
    existing = await rows.idem(cur, counters, job.caller, job.idem_key, job.created_at, ttl_s)
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
    await rows.insert_job(cur, job)
    new_rows = [BatchTarget(job.id, i, t.url, t.options, "pending") for i, t in enumerate(targets)]
    await rows.insert_targets(cur, job.id, new_rows)
    if job.kind == "crawl":
        await rows.mark_seen(cur, job.id, [t.url for t in targets])
    await cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"submit:{job.id}"))
    return job.id, True


async def cancel(
    cur: Cursor, counters: dict[str, int], job_id: str, caller: str, now: int, ttl_s: int
) -> dict[str, Any]:
    """``BatchStore.cancel_job``: the status view after cancelling a live job."""
    await cur.execute("SELECT 1 FROM batch_job WHERE id = %s FOR UPDATE", (job_id,))
    job = await rows.owned(cur, counters, job_id, caller)  # read under the row lock
    if job.status in ("queued", "running"):
        await rows.set_status(cur, job_id, "cancelled", CANCELLED_REASON, now)
        await rows.finish_targets(cur, job_id, "cancelled", CANCELLED_REASON, None)
        await cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"cancel:{job_id}"))
    return await rows.status_view(cur, counters, job_id, caller, now, ttl_s, 0)


async def finish(cur: Cursor, job_id: str, now: int) -> tuple[JobStatus | None, bool]:
    """``BatchStore.finish_job`` inside the transaction: ``(status, True)`` when it set the
    final status now (the caller then evicts past the budget), ``(status, False)`` for a job
    no longer live and ``(None, False)`` for a missing one."""
    await cur.execute(f"SELECT {JOB_COLS} FROM batch_job WHERE id = %s FOR UPDATE", (job_id,))
    row = await cur.fetchone()
    if row is None:
        return None, False
    job = rows.job_row(row)
    if job.status not in ("queued", "running"):
        return job.status, False
    counts = await rows.target_counts(cur, job_id)
    if counts["pending"] or counts["running"]:
        lost = SiftError("sift lost track of this target")
        counts["failed"] += await rows.finish_targets(cur, job_id, "failed", error_text(lost), None)
    status, error = final_status(counts)
    await rows.set_status(cur, job_id, status, error, now)
    return status, True


async def append_crawl(
    cur: Cursor,
    job_id: str,
    urls: Sequence[str],
    options: str,
    depth: int,
    parent: int,
    max_total: int,
    now: int,
    seen: Sequence[str],
) -> tuple[int, int]:
    """``BatchStore.append_crawl_targets``: ``(added, targets_total)``."""
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
    await rows.mark_seen(cur, job_id, seen)
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
    await rows.mark_seen(cur, job_id, new)
    new_rows = [
        BatchTarget(job_id, total + i, u, options, "pending", depth=depth, parent=parent)
        for i, u in enumerate(new)
    ]
    await rows.insert_targets(cur, job_id, new_rows)
    total += len(new)
    await cur.execute(
        "UPDATE batch_job SET targets_total = %s, lease = %s WHERE id = %s",
        (total, now, job_id),
    )
    return len(new), total
