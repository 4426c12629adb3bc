"""``PgWatchStore``: the watch tables on the PostgreSQL store, shared by several nodes.

Each method is one transaction on the batch store's pool (``PgConn``). The claim is the one
that must hold across nodes: due watches are selected ``FOR UPDATE SKIP LOCKED`` (a row
another node is claiming right now is passed over, never waited for) and moved on and
leased in the same statement, so each due check goes to exactly one node. The quota count
and the insert of ``create_watch`` run under a transaction-level advisory lock on the
caller, so two nodes creating at once cannot both pass the limit.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from sift.store.history import Conflict, HistoryWrite, SnapshotRow
from sift.store.postgres.conn import Cursor, PgConn
from sift.store.postgres.history import record_in
from sift.store.watches import (
    CHANGE_SUMMARIES,
    EVENT_COLS,
    WATCH_COLS,
    Watch,
    WatchEvent,
    event_row,
    event_summary,
    event_values,
    too_many_watches,
    watch_not_found,
    watch_row,
    watch_values,
)

# pg_advisory_xact_lock namespace of a caller's watch quota (hashtext of the caller).
_QUOTA_LOCK_NS = 0x73697677  # "sivw"


async def _owned(cur: Cursor, watch_id: str, caller: str, lock: bool = False) -> Watch:
    await cur.execute(
        f"SELECT {WATCH_COLS} FROM watch WHERE id = %s" + (" FOR UPDATE" if lock else ""),
        (watch_id,),
    )
    row = await cur.fetchone()
    if row is None or row[1] != caller:
        raise watch_not_found(watch_id)
    return watch_row(row)


class PgWatchStore:
    """``WatchStore`` on PostgreSQL over the batch store's connection pool."""

    def __init__(self, conn: PgConn) -> None:
        self._conn = conn

    def _tx(self) -> AbstractAsyncContextManager[Cursor]:
        return self._conn.tx()

    async def create_watch(self, watch: Watch, max_watches: int) -> None:
        async with self._tx() as cur:
            await cur.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_QUOTA_LOCK_NS, watch.caller)
            )
            await cur.execute("SELECT count(*) FROM watch WHERE caller = %s", (watch.caller,))
            row = await cur.fetchone()
            if row is not None and int(row[0]) >= max_watches:
                raise too_many_watches(max_watches)
            marks = ", ".join(["%s"] * len(WATCH_COLS.split(",")))
            await cur.execute(
                f"INSERT INTO watch ({WATCH_COLS}) VALUES ({marks})", watch_values(watch)
            )

    async def watches_of(self, caller: str) -> list[Watch]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {WATCH_COLS} FROM watch WHERE caller = %s ORDER BY created_at, id",
                (caller,),
            )
            return [watch_row(r) for r in await cur.fetchall()]

    async def owned_watch(self, watch_id: str, caller: str) -> Watch:
        async with self._tx() as cur:
            return await _owned(cur, watch_id, caller)

    async def delete_watch(self, watch_id: str, caller: str) -> None:
        async with self._tx() as cur:
            await _owned(cur, watch_id, caller, lock=True)
            await cur.execute("DELETE FROM watch WHERE id = %s", (watch_id,))  # events cascade

    async def watch_events(self, watch_id: str, limit: int) -> list[WatchEvent]:
        async with self._tx() as cur:
            await cur.execute(
                f"SELECT {EVENT_COLS} FROM watch_event WHERE watch_id = %s "
                "ORDER BY seq DESC LIMIT %s",
                (watch_id, limit),
            )
            return [event_row(r) for r in await cur.fetchall()]

    async def claim_due_watches(self, now: float, limit: int, lease_s: float) -> list[Watch]:
        async with self._tx() as cur:
            await cur.execute(
                "WITH due AS (SELECT id FROM watch WHERE next_due <= %(now)s "
                "AND lease_until <= %(now)s ORDER BY next_due, id LIMIT %(limit)s "
                "FOR UPDATE SKIP LOCKED) "
                "UPDATE watch w SET token = w.token + 1, lease_until = %(lease)s, "
                "next_due = w.next_due + w.every_s * "
                "(floor((%(now)s - w.next_due) / w.every_s) + 1) "
                f"FROM due WHERE w.id = due.id RETURNING {_prefixed('w')}",
                {"now": now, "limit": limit, "lease": now + lease_s},
            )
            claimed = [watch_row(r) for r in await cur.fetchall()]
        claimed.sort(key=lambda w: w.id)
        return claimed

    async def record_check(self, event: WatchEvent, token: int, keep: int) -> bool:
        async with self._tx() as cur:
            return await _record_check_in(cur, event, token, keep)

    async def record_check_and_history(
        self, event: WatchEvent, token: int, keep: int, write: HistoryWrite
    ) -> SnapshotRow | Conflict | None:
        async with self._tx() as cur:
            await cur.execute(
                "SELECT 1 FROM watch WHERE id = %s AND token = %s FOR UPDATE",
                (event.watch_id, token),
            )
            if await cur.fetchone() is None:
                return None
            written = await record_in(cur, write)
            if isinstance(written, Conflict):
                return written
            await _record_check_in(cur, event, token, keep)
        return written

    async def release_watch_leases(self) -> int:
        """Never on a shared store: other nodes' checks hold those leases."""
        return 0

    async def watch_count(self) -> int:
        async with self._tx() as cur:
            await cur.execute("SELECT count(*) FROM watch")
            row = await cur.fetchone()
        return int(row[0]) if row else 0


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in WATCH_COLS.split(","))


async def _record_check_in(cur: Cursor, event: WatchEvent, token: int, keep: int) -> bool:
    """``record_check`` inside the caller's transaction (``cur``)."""
    summary = event_summary(event)
    await cur.execute(
        "UPDATE watch SET lease_until = 0, checks = checks + 1, "
        "failures = failures + %s, changes = changes + %s, last_checked_at = %s, "
        "last_outcome = %s WHERE id = %s AND token = %s RETURNING id",
        (
            1 if event.outcome == "failed" else 0,
            1 if summary in CHANGE_SUMMARIES else 0,
            event.checked_at,
            summary,
            event.watch_id,
            token,
        ),
    )
    if await cur.fetchone() is None:
        return False
    await cur.execute(
        "SELECT coalesce(max(seq), 0) FROM watch_event WHERE watch_id = %s",
        (event.watch_id,),
    )
    row = await cur.fetchone()
    event.seq = (int(row[0]) if row else 0) + 1
    await cur.execute(
        f"INSERT INTO watch_event ({EVENT_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        event_values(event),
    )
    await cur.execute(
        "DELETE FROM watch_event WHERE watch_id = %s AND seq <= %s",
        (event.watch_id, event.seq - keep),
    )
    return True
