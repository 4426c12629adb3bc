"""The webhook outbox on the PostgreSQL store several nodes share (``sift.store.webhooks``
tells the tables and their rules).

Exactly one node sends each attempt: a claim moves due rows to ``sending`` under a fresh
token in one statement that locks them with ``FOR UPDATE SKIP LOCKED`` (a row another node
is claiming is skipped, not waited for), and an outcome lands only under that token. A node
that dies holds its rows until their lease (``next_at``) passes; then any node claims them
again. A job's webhook fires once: the row is deleted and the delivery inserted in one
transaction, and only the node whose delete found the row inserts.

``DDL`` is this part's migration step, applied by ``schema.MIGRATIONS``.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, Final

from sift.store.postgres.conn import Cursor, PgConn
from sift.store.webhooks import (
    ENDED_JOB_STATES,
    Attempt,
    Delivery,
    DeliveryState,
    JobWebhook,
    NewDelivery,
    Source,
    log_view,
)

DDL: Final = """
    CREATE TABLE webhook_delivery (
        seq         bigserial PRIMARY KEY,
        id          text NOT NULL UNIQUE,
        owner       text NOT NULL,
        source      text NOT NULL,
        source_id   text NOT NULL,
        url         text NOT NULL,
        secret      text NOT NULL,
        event       text NOT NULL,
        state       text NOT NULL,
        attempts    integer NOT NULL DEFAULT 0,
        next_at     double precision NOT NULL,
        token       bigint NOT NULL DEFAULT 0,
        created_at  bigint NOT NULL,
        finished_at bigint
    );
    CREATE INDEX webhook_delivery_due ON webhook_delivery (next_at)
        WHERE state IN ('pending', 'sending');
    CREATE INDEX webhook_delivery_source ON webhook_delivery (source, source_id, owner, seq);
    CREATE INDEX webhook_delivery_finished ON webhook_delivery (finished_at)
        WHERE finished_at IS NOT NULL;
    CREATE TABLE webhook_attempt (
        delivery_id text NOT NULL REFERENCES webhook_delivery (id) ON DELETE CASCADE,
        n           integer NOT NULL,
        at          double precision NOT NULL,
        status      integer,
        error       text,
        duration_ms integer NOT NULL,
        PRIMARY KEY (delivery_id, n)
    );
    CREATE TABLE webhook_job (
        job_id     text PRIMARY KEY REFERENCES batch_job (id) ON DELETE CASCADE,
        owner      text NOT NULL,
        url        text NOT NULL,
        secret     text NOT NULL,
        created_at bigint NOT NULL
    );
"""
_COLS: Final = "id, owner, url, secret, event, attempts"


async def _insert(cur: Cursor, d: NewDelivery) -> None:
    await cur.execute(
        "INSERT INTO webhook_delivery (id, owner, source, source_id, url, secret, event, "
        "state, next_at, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, 'pending', %s, %s)",
        (
            d.id,
            d.owner,
            d.source,
            d.source_id,
            d.url,
            d.secret,
            d.event,
            d.created_at,
            d.created_at,
        ),
    )


class PgOutbox:
    """``Outbox`` over the store's ``PgConn``."""

    def __init__(self, conn: PgConn) -> None:
        self._conn = conn

    async def add(self, delivery: NewDelivery) -> None:
        async with self._conn.tx() as cur:
            await _insert(cur, delivery)

    async def due(
        self, now: float, limit: int, skip_owners: Sequence[str]
    ) -> list[tuple[str, str]]:
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT id, owner FROM webhook_delivery WHERE state IN ('pending', 'sending') "
                "AND next_at <= %s AND NOT (owner = ANY(%s)) ORDER BY next_at, seq LIMIT %s",
                (now, list(skip_owners), limit),
            )
            return [(str(r[0]), str(r[1])) for r in await cur.fetchall()]

    async def claim(self, ids: Sequence[str], now: float, lease_s: float) -> list[Delivery]:
        if not ids:
            return []
        token = secrets.randbits(62)
        async with self._conn.tx() as cur:
            await cur.execute(
                "WITH c AS (SELECT seq FROM webhook_delivery WHERE id = ANY(%s) "
                "AND state IN ('pending', 'sending') AND next_at <= %s "
                "FOR UPDATE SKIP LOCKED) "
                "UPDATE webhook_delivery d SET state = 'sending', next_at = %s, token = %s "
                f"FROM c WHERE d.seq = c.seq RETURNING {_COLS}",
                (list(ids), now, now + lease_s, token),
            )
            rows = await cur.fetchall()
        return [Delivery(r[0], r[1], r[2], r[3], r[4], r[5], token) for r in rows]

    async def record(
        self, delivery: Delivery, attempt: Attempt, state: DeliveryState, next_at: float
    ) -> bool:
        final = state in ("delivered", "failed")
        a = attempt
        async with self._conn.tx() as cur:
            await cur.execute(
                "UPDATE webhook_delivery SET state = %s, attempts = %s, next_at = %s, token = 0, "
                "secret = CASE WHEN %s THEN '' ELSE secret END, finished_at = %s "
                "WHERE id = %s AND state = 'sending' AND token = %s",
                (
                    state,
                    a.n,
                    next_at,
                    final,
                    int(a.at) if final else None,
                    delivery.id,
                    delivery.token,
                ),
            )
            if cur.rowcount != 1:
                return False
            await cur.execute(
                "INSERT INTO webhook_attempt (delivery_id, n, at, status, error, duration_ms) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (delivery_id, n) DO UPDATE SET "
                "at = excluded.at, status = excluded.status, error = excluded.error, "
                "duration_ms = excluded.duration_ms",
                (delivery.id, a.n, a.at, a.status, a.error, a.duration_ms),
            )
        return True

    async def release(self, deliveries: Sequence[Delivery], now: float) -> int:
        n = 0
        async with self._conn.tx() as cur:
            for d in deliveries:
                await cur.execute(
                    "UPDATE webhook_delivery SET state = 'pending', next_at = %s, token = 0 "
                    "WHERE id = %s AND state = 'sending' AND token = %s",
                    (now, d.id, d.token),
                )
                n += cur.rowcount
        return n

    async def log(
        self, source: Source, source_id: str, owner: str, limit: int
    ) -> list[dict[str, Any]]:
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT id, url, state, event, attempts, next_at, created_at, finished_at "
                "FROM webhook_delivery WHERE source = %s AND source_id = %s AND owner = %s "
                "ORDER BY seq DESC LIMIT %s",
                (source, source_id, owner, limit),
            )
            rows = await cur.fetchall()
            await cur.execute(
                "SELECT delivery_id, n, at, status, error, duration_ms FROM webhook_attempt "
                "WHERE delivery_id = ANY(%s) ORDER BY delivery_id, n",
                ([r[0] for r in rows],),
            )
            attempts = await cur.fetchall()
        return log_view(rows, attempts)

    async def prune(self, before: int) -> int:
        async with self._conn.tx() as cur:
            await cur.execute(
                "DELETE FROM webhook_delivery WHERE finished_at IS NOT NULL AND finished_at < %s",
                (before,),
            )
            return cur.rowcount

    async def add_job_webhook(
        self, job_id: str, owner: str, url: str, secret: str, now: int
    ) -> None:
        async with self._conn.tx() as cur:
            await cur.execute(
                "INSERT INTO webhook_job (job_id, owner, url, secret, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (job_id) DO UPDATE SET "
                "owner = excluded.owner, url = excluded.url, secret = excluded.secret",
                (job_id, owner, url, secret, now),
            )

    async def ended_jobs(self, limit: int) -> list[JobWebhook]:
        async with self._conn.tx() as cur:
            await cur.execute(
                "SELECT w.job_id, w.owner, w.url, w.secret, j.status FROM webhook_job w "
                "JOIN batch_job j ON j.id = w.job_id WHERE j.status = ANY(%s) "
                "ORDER BY w.created_at LIMIT %s",
                (list(ENDED_JOB_STATES), limit),
            )
            rows = await cur.fetchall()
            out = []
            for job_id, owner, url, secret, status in rows:
                await cur.execute(
                    "SELECT status, count(*) FROM batch_target WHERE job_id = %s GROUP BY status",
                    (job_id,),
                )
                counts = {str(s): int(n) for s, n in await cur.fetchall()}
                out.append(JobWebhook(job_id, owner, url, secret, status, counts))
        return out

    async def fire_job(self, job_id: str, delivery: NewDelivery) -> bool:
        async with self._conn.tx() as cur:
            await cur.execute("DELETE FROM webhook_job WHERE job_id = %s", (job_id,))
            if cur.rowcount != 1:
                return False
            await _insert(cur, delivery)
        return True
