"""Rule 6 on PostgreSQL: whole finished jobs go, oldest lease first, past the byte budget.

``evict`` takes a cluster-wide advisory lock (``schema.EVICT_LOCK``), so one node evicts at a
time and the others then see less to do. ``delete_jobs`` (also the sweep's) releases the host
gates the deleted jobs' running targets held.
"""

from __future__ import annotations

from sift.store.base import LIVE_SQL
from sift.store.postgres.conn import Cursor
from sift.store.postgres.schema import EVICT_LOCK


async def evict(
    cur: Cursor, counters: dict[str, int], max_bytes: int, caller: str | None = None
) -> int:
    # One evictor at a time across the cluster; the others wait and then see less.
    await cur.execute("SELECT pg_advisory_xact_lock(%s)", (EVICT_LOCK,))
    total = await total_nbytes(cur)
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
        await delete_jobs(cur, victims)
    counters["batch_evictions"] += len(victims)
    return len(victims)


async def delete_jobs(cur: Cursor, ids: list[str]) -> int:
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


async def total_nbytes(cur: Cursor) -> int:
    await cur.execute("SELECT coalesce(sum(nbytes), 0) FROM batch_job")
    row = await cur.fetchone()
    return int(row[0]) if row else 0
