"""The PostgreSQL store's reads and writes inside one transaction: each takes the cursor.

``PgBatchStore`` opens the transaction (``conn.PgConn.tx``) and calls these; a composite
operation calls several in one transaction. ``counters`` is the store's per-node miss
counters dict where a function counts one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sift.errors import BadRequest, NotFound
from sift.fetch.credentials import CREDENTIAL_OPTIONS
from sift.store.base import (
    CLASS_FLEET,
    CLASS_RESTRICTED,
    IDEM_REUSE_SQL,
    JOB_COLS,
    TARGET_COLS,
    TARGET_STATUSES,
    TERMINAL_TARGET,
    BatchJob,
    BatchTarget,
    JobStatus,
    TargetStatus,
    check_job_status,
    check_target_status,
    job_not_found,
    utf8_len,
)
from sift.store.hosts import host_key
from sift.store.postgres.conn import Cursor
from sift.store.views import job_view


def job_row(row: Sequence[Any]) -> BatchJob:
    return BatchJob(*row)


def target_row(row: Sequence[Any]) -> BatchTarget:
    return BatchTarget(*row)


async def get_job(cur: Cursor, job_id: str) -> BatchJob | None:
    await cur.execute(f"SELECT {JOB_COLS} FROM batch_job WHERE id = %s", (job_id,))
    row = await cur.fetchone()
    return None if row is None else job_row(row)


async def exists(cur: Cursor, job_id: str, *, lock: bool = False) -> bool:
    sql = "SELECT 1 FROM batch_job WHERE id = %s" + (" FOR UPDATE" if lock else "")
    await cur.execute(sql, (job_id,))
    return await cur.fetchone() is not None


async def require_job(cur: Cursor, job_id: str) -> None:
    if not await exists(cur, job_id, lock=True):
        raise NotFound(f"batch job {job_id} not found")


async def target_counts(cur: Cursor, job_id: str) -> dict[str, int]:
    await cur.execute(
        "SELECT status, count(*) FROM batch_target WHERE job_id = %s GROUP BY status",
        (job_id,),
    )
    counts = dict.fromkeys(sorted(TARGET_STATUSES), 0)
    counts.update({str(s): int(n) for s, n in await cur.fetchall()})
    return counts


async def set_status(cur: Cursor, job_id: str, status: JobStatus, error: str, now: int) -> None:
    """A job that ends loses the caller's headers and cookies (``forget_credentials``)."""
    await cur.execute(
        "UPDATE batch_job SET status = %s, error = %s, lease = %s WHERE id = %s",
        (status, error, now, job_id),
    )
    if cur.rowcount == 0:
        raise NotFound(f"batch job {job_id} not found")
    if status not in ("queued", "running"):
        await forget_credentials(cur, job_id)


async def forget_credentials(cur: Cursor, job_id: str) -> None:
    """Remove the caller's headers and cookies from a job that has ended: from every
    target's options and from a crawl's spec (kept at rest only while the job lives,
    docs/batch.md). A batch job's spec is empty: NULLIF keeps it out of the cast."""
    names = list(CREDENTIAL_OPTIONS)
    await cur.execute(
        "UPDATE batch_target SET options = (options::jsonb - %s::text[])::text "
        "WHERE job_id = %s AND options::jsonb ?| %s::text[]",
        (names, job_id, names),
    )
    await cur.execute(
        "UPDATE batch_job SET spec = jsonb_set(spec::jsonb, '{options}', "
        "(spec::jsonb -> 'options') - %s::text[])::text "
        "WHERE id = %s AND (NULLIF(spec, '')::jsonb -> 'options') ?| %s::text[]",
        (names, job_id, names),
    )


async def touch(cur: Cursor, job_id: str, now: int) -> None:
    await cur.execute("UPDATE batch_job SET lease = %s WHERE id = %s", (now, job_id))
    if cur.rowcount == 0:
        raise NotFound(f"batch job {job_id} not found")


async def finish_targets(
    cur: Cursor, job_id: str, status: str, error: str, hint: str | None
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


async def update_target(
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
        await require_job(cur, job_id)
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


async def insert_job(cur: Cursor, job: BatchJob) -> None:
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


async def insert_targets(cur: Cursor, job_id: str, targets: Sequence[BatchTarget]) -> None:
    done = nbytes = 0
    hosts: set[str] = set()
    for t in targets:
        check_target_status(t.status)
        done += t.status in TERMINAL_TARGET
        nbytes += utf8_len(t.result)
    await require_job(cur, job_id)
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


async def mark_seen(cur: Cursor, job_id: str, urls: Sequence[str]) -> None:
    if urls:
        await cur.execute(
            "INSERT INTO crawl_seen (job_id, url) SELECT %s, unnest(%s::text[]) "
            "ON CONFLICT DO NOTHING",
            (job_id, list(urls)),
        )


async def idem(
    cur: Cursor, counters: dict[str, int], caller: str, idem_key: str, now: int, ttl_s: float
) -> str | None:
    await cur.execute(
        "SELECT id FROM batch_job WHERE caller = %s AND idem_key = %s AND lease > %s "
        f"AND status IN {IDEM_REUSE_SQL} ORDER BY created_at DESC, seq DESC LIMIT 1",
        (caller, idem_key, now - ttl_s),
    )
    row = await cur.fetchone()
    if row is None:
        counters["batch_idem_misses"] += 1
        return None
    return str(row[0])


async def owned(cur: Cursor, counters: dict[str, int], job_id: str, caller: str) -> BatchJob:
    job = await get_job(cur, job_id)
    if job is None:
        counters["batch_misses"] += 1
    if job is None or job.caller != caller:
        raise job_not_found(job_id)
    return job


async def status_view(
    cur: Cursor,
    counters: dict[str, int],
    job_id: str,
    caller: str,
    now: int,
    ttl_s: int,
    running: int,
) -> dict[str, Any]:
    job = await owned(cur, counters, job_id, caller)
    counts = await target_counts(cur, job_id)
    moved = min(running, counts.get("pending", 0))
    counts["pending"] -= moved
    counts["running"] += moved
    await touch(cur, job_id, now)
    job.lease = now
    return job_view(job, counts, ttl_s)
