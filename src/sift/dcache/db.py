"""``DB``: sift's one SQLite database — the content cache, robots.txt, and the batch store.

``DB`` puts together the content cache (content.py), the embedded batch store's tables
(``sift.store.sqlite.tables``: the store room owns that SQL) and the robots.txt cache
(robots.py, under its own byte budget), over one connection (store.py) opened and migrated
by schema.py.

Thread model: see aio.py. Every method runs on the caller's thread and blocks; async code goes
through ``AsyncDB.run``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from sift.dcache.codec import DEFAULT_LEVEL
from sift.dcache.content import PageEntry, body_digest
from sift.dcache.robots import RobotsTableMixin
from sift.dcache.schema import connect
from sift.dcache.shots import ShotsMixin, StoredShot
from sift.errors import ConfigError
from sift.store.sqlite.tables import BatchTables

__all__ = ["DB", "PageEntry", "StoredShot", "body_digest"]

# Counters stats() always reports, zero until something happens.
_COUNTERS: Final = (
    "hits",
    "misses",
    *(f"{kind}_{o}" for kind in ("body", "page", "render", "shot") for o in ("hits", "misses")),
    "evictions",
    "orphan_puts",
    "batch_misses",
    "batch_idem_misses",
    "batch_evictions",
    "robots_evictions",
)


class DB(ShotsMixin, RobotsTableMixin, BatchTables):
    """One open database. Build it with ``DB.open``; ``close()`` when done."""

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = 1 << 30,
        compress_level: int = DEFAULT_LEVEL,
        robots_max_bytes: int = 16 << 20,
    ) -> DB:
        """Create or open the database at ``path`` (``":memory:"`` works) and migrate it.

        ``max_bytes`` is the content cache budget evict() enforces; ``compress_level`` the zstd
        level for bodies and renders (0: store as-is); ``robots_max_bytes`` the robots.txt
        table's budget (robots.py). Raises StoreError naming the file when
        it cannot be opened, is corrupt or not writable.
        """
        if max_bytes < 0:
            raise ConfigError(f"cache max_bytes must be >= 0, got {max_bytes}")
        if robots_max_bytes < 0:
            raise ConfigError(f"cache robots_max_bytes must be >= 0, got {robots_max_bytes}")
        fs_path = os.fspath(path)
        db = cls(connect(fs_path), fs_path, max_bytes=max_bytes, compress_level=compress_level)
        db.robots_max_bytes = robots_max_bytes
        return db

    # -- stats -----------------------------------------------------------------------------

    def add_counters(self, deltas: Mapping[str, int]) -> None:
        """Add ``deltas`` to the persistent counters (created at 0). One transaction."""
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO counter (name, value) VALUES (?, ?)"
                " ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                list(deltas.items()),
            )

    def counters(self) -> dict[str, int]:
        """The persistent counters, as ``add_counters`` left them."""
        with self._read() as conn:
            return {str(n): int(v) for n, v in conn.execute("SELECT name, value FROM counter")}

    def stats(self) -> dict[str, int]:
        """Counters since open (hits, misses — totals and per body/page/render —, evictions,
        orphan_puts, batch_misses, robots_evictions, …) and gauges (bodies, pages, renders,
        shots, robots, robots_bytes, bytes, raw_bytes, max_bytes, batch_jobs, batch_bytes)."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM body), (SELECT count(*) FROM page),"
                " (SELECT count(*) FROM render), (SELECT count(*) FROM robots),"
                " (SELECT count(*) FROM batch_job),"
                " (SELECT coalesce(sum(raw_bytes), 0) FROM body)"
                " + (SELECT coalesce(sum(raw_bytes), 0) FROM render)"
                " + (SELECT coalesce(sum(nbytes), 0) FROM shot),"
                " (SELECT count(*) FROM shot)"
            ).fetchone()
            batch_bytes = self._nbytes(conn)
            robots_bytes = self._robots_total(conn)
        out = dict.fromkeys(_COUNTERS, 0)
        out.update(self._counters)
        out.update(
            bodies=int(row[0]),
            pages=int(row[1]),
            renders=int(row[2]),
            shots=int(row[6]),
            robots=int(row[3]),
            robots_bytes=robots_bytes,
            batch_jobs=int(row[4]),
            raw_bytes=int(row[5]),
            bytes=self._bytes,
            max_bytes=self.max_bytes,
            batch_bytes=batch_bytes,
        )
        return out
