"""The robots.txt table: one row per (egress scope, origin), under its own byte budget.

Every distinct origin a fetch touches stores its robots.txt answer (up to 512 KiB), so
without a bound one caller naming many subdomains grows the file for good. An entry counts
``len(origin key in UTF-8) + len(body)`` bytes against ``robots_max_bytes``; after each put
the oldest entries (by write order: ``INSERT OR REPLACE`` gives a rewritten row a new rowid)
are evicted until the table fits. An entry larger than the whole budget is evicted at once:
the checker then fetches that robots.txt again when its in-memory copy is gone, which is
correct, only slower. Reads do not refresh an entry: robots.txt expires after a day anyway,
and a read that wrote would make every check a write.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from sift.dcache.store import StoreBase

# How many eviction candidates one round trip reads.
_EVICT_CHUNK: Final = 64
_ROW_BYTES: Final = "length(CAST(origin AS BLOB)) + length(body)"


def robots_entry_bytes(origin: str, body: bytes) -> int:
    """What one entry counts against the budget (see the module docstring)."""
    return len(origin.encode()) + len(body)


class RobotsTableMixin(StoreBase):
    """The robots.txt methods of ``DB``; ``robots_max_bytes`` is set by ``DB.open``."""

    robots_max_bytes: int = 16 << 20
    _robots_bytes: int | None = None  # summed on first use, reset by a rollback

    def _robots_total(self, conn: sqlite3.Connection) -> int:
        if self._robots_bytes is None:
            row = conn.execute(f"SELECT coalesce(sum({_ROW_BYTES}), 0) FROM robots").fetchone()
            self._robots_bytes = int(row[0])
        return self._robots_bytes

    def _on_rollback(self, conn: sqlite3.Connection) -> None:
        super()._on_rollback(conn)
        self._robots_bytes = None

    def get_robots(self, origin: str) -> tuple[int, bytes, int] | None:
        """``(status, body, fetched_at)`` cached for ``origin``, or None. The fetcher decides
        freshness from fetched_at."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT status, body, fetched_at FROM robots WHERE origin = ?", (origin,)
            ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]), int(row[2]))

    def put_robots(self, origin: str, status: int, body: bytes, fetched_at: int) -> None:
        """Store (or replace) the robots.txt answer for ``origin``, then evict the oldest
        entries until the table fits ``robots_max_bytes``."""
        with self._write() as conn:
            total = self._robots_total(conn)
            old = conn.execute(
                f"SELECT {_ROW_BYTES} FROM robots WHERE origin = ?", (origin,)
            ).fetchone()
            conn.execute(
                "INSERT OR REPLACE INTO robots (origin, status, body, fetched_at) VALUES (?,?,?,?)",
                (origin, status, body, fetched_at),
            )
            total += robots_entry_bytes(origin, body) - (int(old[0]) if old else 0)
            self._robots_bytes = self._evict_robots(conn, total)

    def _evict_robots(self, conn: sqlite3.Connection, total: int) -> int:
        """Delete the oldest rows while ``total`` exceeds the budget; the new total."""
        while total > self.robots_max_bytes:
            rows = conn.execute(
                f"SELECT rowid, {_ROW_BYTES} FROM robots ORDER BY rowid LIMIT ?", (_EVICT_CHUNK,)
            ).fetchall()
            if not rows:
                return 0
            gone: list[tuple[int]] = []
            for rowid, nbytes in rows:
                if total <= self.robots_max_bytes:
                    break
                gone.append((int(rowid),))
                total -= int(nbytes)
            conn.executemany("DELETE FROM robots WHERE rowid = ?", gone)
            self._count("robots_evictions", len(gone))
        return total

    def robots_bytes(self) -> int:
        """The bytes the robots table counts against ``robots_max_bytes``."""
        with self._read() as conn:
            return self._robots_total(conn)
