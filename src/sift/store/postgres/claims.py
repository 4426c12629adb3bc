"""Claims, leases and fencing on the PostgreSQL batch store: how several nodes share work.

A node *claims* targets (``sift_claim``, see ``schema``): each claimed target becomes
``running`` with a fresh fencing token (``lease_token``, from a sequence) and a lease
(``lease_until``, on PostgreSQL's clock so nodes' clocks never matter). While it fetches, the
node renews its leases (``renew``). Every write it makes about the target names the token,
and lands only if the target is still ``running`` under that very token: a node that
stalled past its lease, whose target another node's reaper put back and a third claimed,
writes nothing — its late write is *fenced* and counted (``fenced_writes``). So a target
is fetched at least once and recorded exactly once, and ``targets_done`` stays exact.

A node that dies loses its leases; any node's ``reap`` puts expired targets back to
``pending`` (``stalls + 1``) and, on the ``max_stalls``-th loss, fails the target with code
``interrupted``. Recovery is by lease time only, never by node identity.

Every exit from ``running`` (complete, retry, release, reap, cancel, sweep) moves the
host's ``host_gate.inflight`` in the same statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sift.store.hosts import MAX_CRAWL_DELAY_S
from sift.store.postgres.conn import PgConn

# Pending targets of each job a claim looks through for an open host.
CLAIM_WINDOW: Final = 64
INTERRUPTED_REASON: Final = "interrupted: the sift node fetching this target was lost {n} times"
_PG_NOW: Final = "extract(epoch FROM clock_timestamp())"


@dataclass(frozen=True, slots=True)
class Claim:
    """One claimed target: what to fetch, and the token every write about it must carry."""

    job_id: str
    idx: int
    token: int
    url: str
    options: str
    host: str
    attempt: int
    caller: str
    caller_class: str
    claimed_at: float  # PostgreSQL clock, unix seconds
    probed: bool  # the host's robots.txt Crawl-delay is known cluster-wide


@dataclass(frozen=True, slots=True)
class Completion:
    """What a fenced write did: ``fenced`` (nothing written) or the job's new counts."""

    fenced: bool
    targets_done: int = 0
    targets_total: int = 0

    @property
    def job_complete(self) -> bool:
        return not self.fenced and self.targets_done >= self.targets_total


class PgWork:
    """The cluster's work queue over the store's ``PgConn`` (its pool and error translation)."""

    def __init__(self, conn: PgConn) -> None:
        self._conn = conn
        self.fenced_writes = 0
        self.reaped = 0
        self.interrupted = 0

    async def live_callers(self) -> list[str]:
        """Callers with queued or running jobs, in the order their oldest live job came."""
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT caller FROM batch_job WHERE status IN ('queued', 'running') "
                "GROUP BY caller ORDER BY min(seq)"
            )
            return [str(r[0]) for r in await cur.fetchall()]

    async def claim(
        self, caller: str, node: str, per_host: int, max_n: int, lease_s: float
    ) -> list[Claim]:
        """Up to ``max_n`` pending targets of ``caller``'s live jobs, all on one open host."""
        if max_n < 1:
            return []
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT * FROM sift_claim(%s, %s, %s, %s, %s, %s)",
                (caller, node, per_host, max_n, lease_s, CLAIM_WINDOW),
            )
            rows = await cur.fetchall()
        return [
            Claim(
                str(r[0]),
                int(r[1]),
                int(r[2]),
                str(r[3]),
                str(r[4]),
                str(r[5]),
                int(r[6]),
                caller,
                str(r[7]),
                float(r[8]),
                bool(r[9]),
            )
            for r in rows
        ]

    async def complete(
        self,
        claim: Claim,
        now: int,
        status: str,
        result: str | None,
        error: str | None,
        hint: str | None,
    ) -> Completion:
        """Record the target's outcome if ``claim``'s token still holds it (else fenced)."""
        async with self._conn.tx() as cur:
            await cur.execute(
                """
                WITH t AS (
                    UPDATE batch_target SET status = %(st)s, result = %(res)s, error = %(err)s,
                           hint = %(hint)s, lease_token = NULL, lease_until = NULL,
                           lease_owner = NULL
                     WHERE job_id = %(job)s AND idx = %(idx)s AND status = 'running'
                       AND lease_token = %(tok)s
                    RETURNING host),
                g AS (UPDATE host_gate SET inflight = greatest(inflight - 1, 0)
                       WHERE host = (SELECT host FROM t))
                UPDATE batch_job SET targets_done = targets_done + 1,
                       nbytes = nbytes + coalesce(octet_length(%(res)s::text), 0),
                       lease = %(now)s
                 WHERE id = %(job)s AND EXISTS (SELECT 1 FROM t)
                RETURNING targets_done, targets_total
                """,
                {
                    "st": status,
                    "res": result,
                    "err": error,
                    "hint": hint,
                    "job": claim.job_id,
                    "idx": claim.idx,
                    "tok": claim.token,
                    "now": now,
                },
            )
            row = await cur.fetchone()
        if row is None:
            self.fenced_writes += 1
            return Completion(fenced=True)
        return Completion(False, int(row[0]), int(row[1]))

    async def retry_later(self, claim: Claim, wait_s: float) -> bool:
        """Put the target back to pending with ``attempt + 1``; no target of its host starts
        for ``wait_s`` (Retry-After or backoff), cluster-wide. False when fenced."""
        async with self._conn.tx() as cur:
            await cur.execute(
                f"""
                WITH t AS (
                    UPDATE batch_target SET status = 'pending', attempt = attempt + 1,
                           lease_token = NULL, lease_until = NULL, lease_owner = NULL
                     WHERE job_id = %(job)s AND idx = %(idx)s AND status = 'running'
                       AND lease_token = %(tok)s
                    RETURNING host)
                UPDATE host_gate SET inflight = greatest(inflight - 1, 0),
                       not_before = greatest(not_before, {_PG_NOW} + %(wait)s)
                 WHERE host = (SELECT host FROM t)
                RETURNING 1
                """,
                {"job": claim.job_id, "idx": claim.idx, "tok": claim.token, "wait": wait_s},
            )
            ok = await cur.fetchone() is not None
        if not ok:
            self.fenced_writes += 1
        return ok

    async def learn_crawl_delay(self, host: str, delay_s: float | None) -> None:
        """robots.txt was read for ``host``: it may now take ``per_host`` targets, spaced by
        its Crawl-delay (clamped). The delay counts from now (PostgreSQL clock), not from
        the claim: the page request of the target that read robots.txt leaves only now,
        after that read, and the next request must keep the delay from it."""
        delay = min(delay_s or 0.0, MAX_CRAWL_DELAY_S)
        async with self._conn.tx() as cur:
            await cur.execute(
                "UPDATE host_gate SET probed = true, crawl_delay_s = %(d)s, "
                "not_before = CASE WHEN %(d)s > 0 "
                f"THEN greatest(not_before, {_PG_NOW} + %(d)s) "
                "ELSE not_before END WHERE host = %(host)s",
                {"d": delay, "host": host},
            )

    async def host_probed(self, host: str) -> bool:
        async with self._conn.tx() as cur:
            await cur.execute("SELECT probed FROM host_gate WHERE host = %s", (host,))
            row = await cur.fetchone()
        return bool(row[0]) if row else False

    async def renew(self, tokens: Sequence[int], lease_s: float) -> set[int]:
        """Extend the leases of ``tokens``; the tokens still held (the others were reaped,
        cancelled or swept: their fetches should stop)."""
        if not tokens:
            return set()
        async with self._conn.tx() as cur:
            await cur.execute(
                f"UPDATE batch_target SET lease_until = {_PG_NOW} + %s "
                "WHERE status = 'running' AND lease_token = ANY(%s) RETURNING lease_token",
                (lease_s, list(tokens)),
            )
            return {int(r[0]) for r in await cur.fetchall()}

    async def release(self, tokens: Sequence[int]) -> int:
        """Graceful shutdown: give claimed targets back (pending, stalls unchanged)."""
        if not tokens:
            return 0
        async with self._conn.tx() as cur:
            await cur.execute(
                """
                WITH t AS (
                    UPDATE batch_target SET status = 'pending', lease_token = NULL,
                           lease_until = NULL, lease_owner = NULL
                     WHERE status = 'running' AND lease_token = ANY(%s) RETURNING host),
                g AS (UPDATE host_gate h SET inflight = greatest(h.inflight - c.n, 0)
                        FROM (SELECT host, count(*) AS n FROM t GROUP BY host) c
                       WHERE h.host = c.host)
                SELECT count(*) FROM t
                """,
                (list(tokens),),
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def reap(self, now: int, max_stalls: int) -> list[str]:
        """Requeue every target whose lease ran out (its node is gone or stalled); on its
        ``max_stalls``-th loss a target fails with ``interrupted``. Returns the ids of jobs
        in which a target failed so (the caller finishes those that are complete).
        Idempotent and safe on every node at once (SKIP LOCKED)."""
        async with self._conn.tx() as cur:
            await cur.execute(
                f"""
                WITH exp AS (
                    SELECT job_id, idx FROM batch_target
                     WHERE status = 'running' AND lease_until < {_PG_NOW}
                     ORDER BY lease_until LIMIT 1000 FOR UPDATE SKIP LOCKED),
                r AS (
                    UPDATE batch_target t SET
                           status = CASE WHEN t.stalls + 1 >= %(max)s THEN 'failed'
                                         ELSE 'pending' END,
                           error = CASE WHEN t.stalls + 1 >= %(max)s
                                        THEN replace(%(reason)s, '{{n}}', (t.stalls + 1)::text)
                                        ELSE t.error END,
                           stalls = t.stalls + 1, lease_token = NULL, lease_until = NULL,
                           lease_owner = NULL
                      FROM exp WHERE t.job_id = exp.job_id AND t.idx = exp.idx
                    RETURNING t.job_id, t.host, t.status),
                g AS (UPDATE host_gate h SET inflight = greatest(h.inflight - c.n, 0)
                        FROM (SELECT host, count(*) AS n FROM r GROUP BY host) c
                       WHERE h.host = c.host),
                j AS (UPDATE batch_job b SET targets_done = b.targets_done + c.n,
                             lease = %(now)s
                        FROM (SELECT job_id, count(*) AS n FROM r WHERE status = 'failed'
                               GROUP BY job_id) c
                       WHERE b.id = c.job_id)
                SELECT job_id, status FROM r
                """,
                {"max": max_stalls, "reason": INTERRUPTED_REASON, "now": now},
            )
            rows = await cur.fetchall()
        failed = sorted({str(j) for j, st in rows if st == "failed"})
        self.reaped += len(rows)
        self.interrupted += sum(1 for _, st in rows if st == "failed")
        return failed

    async def complete_jobs(self, job_ids: Sequence[str]) -> list[str]:
        """Of ``job_ids``, those whose every target has an outcome (live ones only)."""
        if not job_ids:
            return []
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT id FROM batch_job WHERE id = ANY(%s) AND targets_done >= targets_total "
                "AND status IN ('queued', 'running')",
                (list(job_ids),),
            )
            return [str(r[0]) for r in await cur.fetchall()]

    async def gate(self, host: str) -> tuple[int, bool, float, float] | None:
        """``(inflight, probed, crawl_delay_s, not_before)`` of ``host`` (for tests, ops)."""
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT inflight, probed, crawl_delay_s, not_before FROM host_gate WHERE host = %s",
                (host,),
            )
            row = await cur.fetchone()
        if row is None:
            return None
        return int(row[0]), bool(row[1]), float(row[2]), float(row[3])

    async def cluster_counts(self) -> dict[str, int]:
        """Cluster-wide counts for ``sift stats``: live jobs, pending and running targets, and
        the nodes holding leases now."""
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT (SELECT count(*) FROM batch_job WHERE status IN ('queued', 'running')),"
                " count(*) FILTER (WHERE status = 'pending'),"
                " count(*) FILTER (WHERE status = 'running'),"
                " count(DISTINCT lease_owner) FILTER (WHERE status = 'running')"
                " FROM batch_target"
            )
            row = await cur.fetchone()
        keys = ("live_jobs", "pending_targets", "running_targets", "nodes_leasing")
        return dict(zip(keys, (int(v) for v in row), strict=True)) if row else {}
