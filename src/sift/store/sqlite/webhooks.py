"""The webhook outbox on the node's SQLite database (``sift.store.webhooks`` tells the
tables and their rules). Each function runs whole on the database's worker thread
(``AsyncDB.run``), so a claim or a fired job webhook is atomic as one transaction is.

``DDL`` is this part's schema step, applied by ``sift.dcache.schema.MIGRATIONS``.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from sift.store.sqlite.host import SqliteHost
from sift.store.sqlite.store import DBWorker
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

DDL: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS webhook_delivery (
        seq         INTEGER PRIMARY KEY,    -- insertion order
        id          TEXT NOT NULL UNIQUE,   -- the webhook-id
        owner       TEXT NOT NULL,          -- the caller it is sent for (its egress policy)
        source      TEXT NOT NULL,          -- 'watch' | 'job'
        source_id   TEXT NOT NULL,
        url         TEXT NOT NULL,
        secret      TEXT NOT NULL,          -- '' once final
        event       TEXT NOT NULL,          -- the JSON body, byte for byte
        state       TEXT NOT NULL,          -- pending | sending | delivered | failed
        attempts    INTEGER NOT NULL DEFAULT 0,
        next_at     REAL NOT NULL,          -- pending: due time; sending: end of the lease
        token       INTEGER NOT NULL DEFAULT 0,
        created_at  INTEGER NOT NULL,
        finished_at INTEGER
    )""",
    """CREATE INDEX IF NOT EXISTS webhook_delivery_due
        ON webhook_delivery(next_at) WHERE state IN ('pending', 'sending')""",
    """CREATE INDEX IF NOT EXISTS webhook_delivery_source
        ON webhook_delivery(source, source_id, owner, seq)""",
    """CREATE INDEX IF NOT EXISTS webhook_delivery_finished
        ON webhook_delivery(finished_at) WHERE finished_at IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS webhook_attempt (
        delivery_id TEXT NOT NULL,
        n           INTEGER NOT NULL,
        at          REAL NOT NULL,
        status      INTEGER,
        error       TEXT,
        duration_ms INTEGER NOT NULL,
        PRIMARY KEY (delivery_id, n)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS webhook_job (
        job_id     TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        url        TEXT NOT NULL,
        secret     TEXT NOT NULL,
        created_at INTEGER NOT NULL
    )""",
)
_COLS: Final = "id, owner, url, secret, event, attempts"


def _insert(conn: sqlite3.Connection, d: NewDelivery) -> None:
    conn.execute(
        "INSERT INTO webhook_delivery (id, owner, source, source_id, url, secret, event, "
        "state, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
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


def add(db: SqliteHost, d: NewDelivery) -> None:
    with db._write() as conn:
        _insert(conn, d)


def due(db: SqliteHost, now: float, limit: int, skip: Sequence[str]) -> list[tuple[str, str]]:
    marks = ",".join("?" * len(skip))
    skip_sql = f" AND owner NOT IN ({marks})" if skip else ""
    with db._read() as conn:
        rows = conn.execute(
            "SELECT id, owner FROM webhook_delivery WHERE state IN ('pending', 'sending') "
            f"AND next_at <= ?{skip_sql} ORDER BY next_at, seq LIMIT ?",
            (now, *skip, limit),
        ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def claim(db: SqliteHost, ids: Sequence[str], now: float, lease_s: float) -> list[Delivery]:
    out: list[Delivery] = []
    with db._write() as conn:
        for id_ in ids:
            token = secrets.randbits(62)
            row = conn.execute(
                "UPDATE webhook_delivery SET state = 'sending', next_at = ?, token = ? "
                "WHERE id = ? AND state IN ('pending', 'sending') AND next_at <= ? "
                f"RETURNING {_COLS}",
                (now + lease_s, token, id_, now),
            ).fetchone()
            if row is not None:
                id_, owner, url, secret, event, attempts = row
                out.append(Delivery(id_, owner, url, secret, event, attempts, token))
    return out


def record(db: SqliteHost, d: Delivery, a: Attempt, state: DeliveryState, next_at: float) -> bool:
    final = state in ("delivered", "failed")
    with db._write() as conn:
        cur = conn.execute(
            "UPDATE webhook_delivery SET state = ?, attempts = ?, next_at = ?, token = 0, "
            "secret = CASE WHEN ? THEN '' ELSE secret END, finished_at = ? "
            "WHERE id = ? AND state = 'sending' AND token = ?",
            (state, a.n, next_at, final, int(a.at) if final else None, d.id, d.token),
        )
        if cur.rowcount != 1:
            return False
        conn.execute(
            "INSERT OR REPLACE INTO webhook_attempt (delivery_id, n, at, status, error, "
            "duration_ms) VALUES (?, ?, ?, ?, ?, ?)",
            (d.id, a.n, a.at, a.status, a.error, a.duration_ms),
        )
    return True


def release(db: SqliteHost, claimed: Sequence[tuple[str, int]], now: float) -> int:
    with db._write() as conn:
        n = 0
        for id_, token in claimed:
            n += conn.execute(
                "UPDATE webhook_delivery SET state = 'pending', next_at = ?, token = 0 "
                "WHERE id = ? AND state = 'sending' AND token = ?",
                (now, id_, token),
            ).rowcount
    return n


def log(db: SqliteHost, source: str, source_id: str, owner: str, limit: int) -> list[Any]:
    with db._read() as conn:
        rows = conn.execute(
            "SELECT id, url, state, event, attempts, next_at, created_at, finished_at "
            "FROM webhook_delivery WHERE source = ? AND source_id = ? AND owner = ? "
            "ORDER BY seq DESC LIMIT ?",
            (source, source_id, owner, limit),
        ).fetchall()
        ids = [r[0] for r in rows]
        marks = ",".join("?" * len(ids))
        attempts = conn.execute(
            "SELECT delivery_id, n, at, status, error, duration_ms FROM webhook_attempt "
            f"WHERE delivery_id IN ({marks}) ORDER BY delivery_id, n",
            ids,
        ).fetchall()
    return [rows, attempts]


def prune(db: SqliteHost, before: int) -> int:
    with db._write() as conn:
        conn.execute(
            "DELETE FROM webhook_attempt WHERE delivery_id IN (SELECT id FROM webhook_delivery "
            "WHERE finished_at IS NOT NULL AND finished_at < ?)",
            (before,),
        )
        return conn.execute(
            "DELETE FROM webhook_delivery WHERE finished_at IS NOT NULL AND finished_at < ?",
            (before,),
        ).rowcount


def add_job_webhook(
    db: SqliteHost, job_id: str, owner: str, url: str, secret: str, now: int
) -> None:
    with db._write() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO webhook_job (job_id, owner, url, secret, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (job_id, owner, url, secret, now),
        )


def ended_jobs(db: SqliteHost, limit: int) -> list[JobWebhook]:
    marks = ",".join("?" * len(ENDED_JOB_STATES))
    with db._read() as conn:  # polled every turn: no write transaction when nothing waits
        waiting = conn.execute("SELECT EXISTS (SELECT 1 FROM webhook_job)").fetchone()[0]
    if not waiting:
        return []
    with db._write() as conn:
        # A job swept before its webhook fired takes the webhook with it (PostgreSQL: a
        # foreign key does it).
        conn.execute("DELETE FROM webhook_job WHERE job_id NOT IN (SELECT id FROM batch_job)")
        rows = conn.execute(
            "SELECT w.job_id, w.owner, w.url, w.secret, j.status FROM webhook_job w "
            f"JOIN batch_job j ON j.id = w.job_id WHERE j.status IN ({marks}) "
            "ORDER BY w.created_at LIMIT ?",
            (*ENDED_JOB_STATES, limit),
        ).fetchall()
        out = []
        for job_id, owner, url, secret, status in rows:
            counts = dict(
                conn.execute(
                    "SELECT status, count(*) FROM batch_target WHERE job_id = ? GROUP BY status",
                    (job_id,),
                ).fetchall()
            )
            out.append(JobWebhook(job_id, owner, url, secret, status, counts))
    return out


def fire_job(db: SqliteHost, job_id: str, d: NewDelivery) -> bool:
    with db._write() as conn:
        gone = conn.execute("DELETE FROM webhook_job WHERE job_id = ?", (job_id,)).rowcount
        if gone != 1:
            return False
        _insert(conn, d)
    return True


class SqliteOutbox:
    """``Outbox`` over the node's ``AsyncDB`` (any ``DBWorker``)."""

    def __init__(self, adb: DBWorker) -> None:
        self.adb = adb

    async def add(self, delivery: NewDelivery) -> None:
        await self.adb.run(add, delivery)

    async def due(
        self, now: float, limit: int, skip_owners: Sequence[str]
    ) -> list[tuple[str, str]]:
        return await self.adb.run(due, now, limit, list(skip_owners))

    async def claim(self, ids: Sequence[str], now: float, lease_s: float) -> list[Delivery]:
        return await self.adb.run(claim, list(ids), now, lease_s)

    async def record(
        self, delivery: Delivery, attempt: Attempt, state: DeliveryState, next_at: float
    ) -> bool:
        return await self.adb.run(record, delivery, attempt, state, next_at)

    async def release(self, deliveries: Sequence[Delivery], now: float) -> int:
        return await self.adb.run(release, [(d.id, d.token) for d in deliveries], now)

    async def log(
        self, source: Source, source_id: str, owner: str, limit: int
    ) -> list[dict[str, Any]]:
        rows, attempts = await self.adb.run(log, source, source_id, owner, limit)
        return log_view(rows, attempts)

    async def prune(self, before: int) -> int:
        return await self.adb.run(prune, before)

    async def add_job_webhook(
        self, job_id: str, owner: str, url: str, secret: str, now: int
    ) -> None:
        await self.adb.run(add_job_webhook, job_id, owner, url, secret, now)

    async def ended_jobs(self, limit: int) -> list[JobWebhook]:
        return await self.adb.run(ended_jobs, limit)

    async def fire_job(self, job_id: str, delivery: NewDelivery) -> bool:
        return await self.adb.run(fire_job, job_id, delivery)
