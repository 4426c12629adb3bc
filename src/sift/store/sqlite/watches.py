"""The watch tables' SQL on the node's SQLite database (``sift.store.watches``).

Mixed into ``sift.dcache.DB`` through ``tables.BatchTables``; every method runs whole on the
database's one worker thread, so a claim (select the due watches, move them on, lease them)
cannot interleave with another.
"""

from __future__ import annotations

import sqlite3

from sift.store.sqlite.host import SqliteHost
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


def _owned(conn: sqlite3.Connection, watch_id: str, caller: str) -> Watch:
    row = conn.execute(f"SELECT {WATCH_COLS} FROM watch WHERE id = ?", (watch_id,)).fetchone()
    if row is None or row[1] != caller:
        raise watch_not_found(watch_id)
    return watch_row(row)


class WatchTablesMixin(SqliteHost):
    """The watch methods of ``sift.dcache.DB`` (see ``sift.store.watches.WatchStore``)."""

    def create_watch(self, watch: Watch, max_watches: int) -> None:
        with self._write() as conn:
            (have,) = conn.execute(
                "SELECT count(*) FROM watch WHERE caller = ?", (watch.caller,)
            ).fetchone()
            if int(have) >= max_watches:
                raise too_many_watches(max_watches)
            marks = ", ".join("?" * len(WATCH_COLS.split(",")))
            conn.execute(f"INSERT INTO watch ({WATCH_COLS}) VALUES ({marks})", watch_values(watch))

    def watches_of(self, caller: str) -> list[Watch]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {WATCH_COLS} FROM watch WHERE caller = ? ORDER BY created_at, id",
                (caller,),
            ).fetchall()
        return [watch_row(r) for r in rows]

    def owned_watch(self, watch_id: str, caller: str) -> Watch:
        with self._read() as conn:
            return _owned(conn, watch_id, caller)

    def delete_watch(self, watch_id: str, caller: str) -> None:
        with self._write() as conn:
            _owned(conn, watch_id, caller)
            conn.execute("DELETE FROM watch_event WHERE watch_id = ?", (watch_id,))
            conn.execute("DELETE FROM watch WHERE id = ?", (watch_id,))

    def watch_events(self, watch_id: str, limit: int) -> list[WatchEvent]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {EVENT_COLS} FROM watch_event WHERE watch_id = ? "
                "ORDER BY seq DESC LIMIT ?",
                (watch_id, limit),
            ).fetchall()
        return [event_row(r) for r in rows]

    def claim_due_watches(self, now: float, limit: int, lease_s: float) -> list[Watch]:
        due = "SELECT id FROM watch WHERE next_due <= ? AND lease_until <= ? "
        with self._read() as conn:
            # Most ticks find nothing due: no write transaction (and no write lock) for them.
            if conn.execute(due + "LIMIT 1", (now, now)).fetchone() is None:
                return []
        with self._write() as conn:
            ids = [
                str(r[0])
                for r in conn.execute(
                    due + "ORDER BY next_due, id LIMIT ?",
                    (now, now, limit),
                ).fetchall()
            ]
            # One statement for the whole batch, on the same rows (nothing else writes in
            # between); RETURNING's order is SQLite's own: put them back in due order.
            rows = conn.execute(
                # next_due_after: the first due time past now on the watch's grid
                # (CAST truncates, a floor here: now >= next_due).
                "UPDATE watch SET token = token + 1, lease_until = ?, "
                "next_due = next_due + every_s * (CAST((? - next_due) / every_s AS INTEGER)"
                f" + 1) WHERE id IN ({due}ORDER BY next_due, id LIMIT ?) "
                f"RETURNING {WATCH_COLS}",
                (now + lease_s, now, now, now, limit),
            ).fetchall()
            by_id = {str(row[0]): watch_row(row) for row in rows}
            claimed = [by_id[watch_id] for watch_id in ids]
        return claimed

    def holds_claim(self, watch_id: str, token: int) -> bool:
        """The watch still exists and its last claim is ``token``."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT 1 FROM watch WHERE id = ? AND token = ?", (watch_id, token)
            ).fetchone()
        return row is not None

    def record_check(self, event: WatchEvent, token: int, keep: int) -> bool:
        failed = 1 if event.outcome == "failed" else 0
        summary = event_summary(event)
        changed = 1 if summary in CHANGE_SUMMARIES else 0
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE watch SET lease_until = 0, checks = checks + 1, "
                "failures = failures + ?, changes = changes + ?, last_checked_at = ?, "
                "last_outcome = ? WHERE id = ? AND token = ?",
                (failed, changed, event.checked_at, summary, event.watch_id, token),
            )
            if cur.rowcount == 0:
                return False
            (last,) = conn.execute(
                "SELECT coalesce(max(seq), 0) FROM watch_event WHERE watch_id = ?",
                (event.watch_id,),
            ).fetchone()
            event.seq = int(last) + 1
            conn.execute(
                f"INSERT INTO watch_event ({EVENT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                event_values(event),
            )
            conn.execute(
                "DELETE FROM watch_event WHERE watch_id = ? AND seq <= ?",
                (event.watch_id, event.seq - keep),
            )
        return True

    def release_watch_leases(self) -> int:
        with self._write() as conn:
            return conn.execute("UPDATE watch SET lease_until = 0 WHERE lease_until > 0").rowcount

    def watch_count(self) -> int:
        with self._read() as conn:
            (n,) = conn.execute("SELECT count(*) FROM watch").fetchone()
        return int(n)
