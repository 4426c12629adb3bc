"""``DB``: sift's one SQLite database — the content cache, robots.txt, and the batch store.

Content cache. Raw bodies are stored once per SHA-256 of their uncompressed bytes (zstd when it
pays, see codec.py); page entries map a request key (normalised URL + fetch options) to the
response metadata and a body digest; renders map (body digest, render key) to an opaque payload.
``size()`` is the stored bytes of bodies + renders, kept in a counter. ``evict()`` removes the
least recently used bodies and renders until ``size() <= max_bytes``; dropping a body drops its
page entries and renders with it, so a page entry never outlives its body (the foreign keys
enforce the same). Recency is a global sequence number bumped on every hit, not the clock, so
the order is exact even within one second.

Thread model: see aio.py. Every method runs on the caller's thread and blocks; async code goes
through ``AsyncDB.run``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass
from typing import Final

from sift.dcache.batch import BatchStoreMixin
from sift.dcache.codec import DEFAULT_LEVEL, Codecs
from sift.dcache.schema import connect
from sift.errors import ConfigError

# How many LRU candidates evict() reads per round trip.
_EVICT_CHUNK: Final = 64

# Counters stats() always reports, zero until something happens.
_COUNTERS: Final = (
    "hits",
    "misses",
    *(f"{kind}_{o}" for kind in ("body", "page", "render") for o in ("hits", "misses")),
    "evictions",
    "orphan_puts",
    "batch_misses",
    "batch_idem_misses",
    "batch_evictions",
)

_PAGE_COLS: Final = (
    "url, final_url, status, content_type, etag, last_modified, fetched_at, digest, headers_json"
)


@dataclass(frozen=True, slots=True)
class PageEntry:
    """What a fetch of one request key produced. ``digest`` names the stored body."""

    url: str
    final_url: str
    status: int
    content_type: str
    etag: str | None
    last_modified: str | None
    fetched_at: int
    digest: str
    headers_json: str = "{}"


def body_digest(data: bytes) -> str:
    """``"sha256:<hex>"`` of ``data``: the key ``put_body`` stores it under."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class DB(BatchStoreMixin):
    """One open database. Build it with ``DB.open``; ``close()`` when done."""

    def __init__(
        self, conn: sqlite3.Connection, path: str, *, max_bytes: int, compress_level: int
    ) -> None:
        super().__init__(conn, path)
        self.max_bytes = max_bytes
        self._codecs = Codecs(compress_level)
        with self._read() as c:
            self._bytes = int(
                c.execute(
                    "SELECT (SELECT coalesce(sum(nbytes), 0) FROM body)"
                    " + (SELECT coalesce(sum(nbytes), 0) FROM render)"
                ).fetchone()[0]
            )
            self._seq = int(
                c.execute(
                    "SELECT max((SELECT coalesce(max(lru), 0) FROM body),"
                    " (SELECT coalesce(max(lru), 0) FROM render))"
                ).fetchone()[0]
            )

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = 1 << 30,
        compress_level: int = DEFAULT_LEVEL,
    ) -> DB:
        """Create or open the database at ``path`` (``":memory:"`` works) and migrate it.

        ``max_bytes`` is the content cache budget evict() enforces; ``compress_level`` the zstd
        level for bodies and renders (0: store as-is). Raises StoreError naming the file when
        it cannot be opened, is corrupt or not writable.
        """
        if max_bytes < 0:
            raise ConfigError(f"cache max_bytes must be >= 0, got {max_bytes}")
        fs_path = os.fspath(path)
        return cls(connect(fs_path), fs_path, max_bytes=max_bytes, compress_level=compress_level)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -- bodies ----------------------------------------------------------------------------

    def put_body(self, data: bytes, now: int) -> str:
        """Store ``data`` unless an identical body is stored (then just mark it used); return
        its digest ``"sha256:<hex>"`` of the uncompressed bytes."""
        digest = body_digest(data)
        added = 0
        with self._write() as conn:
            seq = self._next_seq()
            cur = conn.execute(
                "UPDATE body SET lru = ?, accessed_at = ? WHERE digest = ?", (seq, now, digest)
            )
            if cur.rowcount == 0:
                codec, stored = self._codecs.encode(data)
                blob_id = conn.execute("INSERT INTO blob (data) VALUES (?)", (stored,)).lastrowid
                conn.execute(
                    "INSERT INTO body (digest, blob_id, codec, raw_bytes, nbytes, created_at, "
                    "accessed_at, lru) VALUES (?,?,?,?,?,?,?,?)",
                    (digest, blob_id, codec, len(data), len(stored), now, now, seq),
                )
                added = len(stored)
        self._bytes += added
        return digest

    def get_body(self, digest: str, now: int) -> bytes | None:
        """The body's original bytes, or None; a hit marks it most recently used."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT b.codec, d.data FROM body b JOIN blob d ON d.id = b.blob_id "
                "WHERE b.digest = ?",
                (digest,),
            ).fetchone()
            if row is not None:
                conn.execute(
                    "UPDATE body SET lru = ?, accessed_at = ? WHERE digest = ?",
                    (self._next_seq(), now, digest),
                )
        self._hit_or_miss("body", row is not None)
        return None if row is None else self._codecs.decode(row[0], row[1])

    # -- pages -----------------------------------------------------------------------------

    def put_page(self, key: str, page: PageEntry, now: int) -> None:
        """Store (or replace) the page entry for ``key``. If its body is not stored — evicted
        since put_body, say — nothing is stored (counted as ``orphan_puts``): a page entry
        never points at a missing body."""
        with self._write() as conn:
            cur = conn.execute(
                f"INSERT OR REPLACE INTO page (key, {_PAGE_COLS}) "
                "SELECT ?,?,?,?,?,?,?,?,?,? WHERE EXISTS (SELECT 1 FROM body WHERE digest = ?)",
                (
                    key,
                    page.url,
                    page.final_url,
                    page.status,
                    page.content_type,
                    page.etag,
                    page.last_modified,
                    page.fetched_at,
                    page.digest,
                    page.headers_json,
                    page.digest,
                ),
            )
            stored = cur.rowcount > 0
        if not stored:
            self._count("orphan_puts")

    def get_page(self, key: str, now: int) -> PageEntry | None:
        """The page entry for ``key``, or None. A hit marks its body most recently used (a
        page is served from its body or its renders, so it keeps the body alive)."""
        with self._write() as conn:
            row = conn.execute(f"SELECT {_PAGE_COLS} FROM page WHERE key = ?", (key,)).fetchone()
            if row is not None:
                conn.execute(
                    "UPDATE body SET lru = ?, accessed_at = ? WHERE digest = ?",
                    (self._next_seq(), now, row[7]),
                )
        self._hit_or_miss("page", row is not None)
        return None if row is None else PageEntry(*row)

    # -- renders ---------------------------------------------------------------------------

    def put_render(self, digest: str, render_key: str, payload: bytes, now: int) -> None:
        """Store (or replace) the rendered ``payload`` of body ``digest`` under ``render_key``.
        Not stored if the body is gone (counted as ``orphan_puts``): renders die with bodies."""
        codec, stored = self._codecs.encode(payload)
        delta = 0
        with self._write() as conn:
            seq = self._next_seq()
            if conn.execute(
                "UPDATE body SET lru = ?, accessed_at = ? WHERE digest = ?", (seq, now, digest)
            ).rowcount:
                old = conn.execute(
                    "DELETE FROM render WHERE digest = ? AND render_key = ? "
                    "RETURNING nbytes, blob_id",
                    (digest, render_key),
                ).fetchone()
                if old is not None:
                    conn.execute("DELETE FROM blob WHERE id = ?", (old[1],))
                blob_id = conn.execute("INSERT INTO blob (data) VALUES (?)", (stored,)).lastrowid
                conn.execute(
                    "INSERT INTO render (digest, render_key, blob_id, codec, raw_bytes, nbytes, "
                    "created_at, accessed_at, lru) VALUES (?,?,?,?,?,?,?,?,?)",
                    (digest, render_key, blob_id, codec, len(payload), len(stored), now, now, seq),
                )
                delta = len(stored) - (0 if old is None else int(old[0]))
            else:
                self._count("orphan_puts")
        self._bytes += delta

    def get_render(self, digest: str, render_key: str, now: int) -> bytes | None:
        """The payload, or None. A hit marks the render and its body most recently used."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT r.codec, d.data FROM render r JOIN blob d ON d.id = r.blob_id "
                "WHERE r.digest = ? AND r.render_key = ?",
                (digest, render_key),
            ).fetchone()
            if row is not None:
                seq = self._next_seq()
                conn.execute(
                    "UPDATE render SET lru = ?, accessed_at = ? "
                    "WHERE digest = ? AND render_key = ?",
                    (seq, now, digest, render_key),
                )
                conn.execute(
                    "UPDATE body SET lru = ?, accessed_at = ? WHERE digest = ?", (seq, now, digest)
                )
        self._hit_or_miss("render", row is not None)
        return None if row is None else self._codecs.decode(row[0], row[1])

    # -- budget ----------------------------------------------------------------------------

    def size(self) -> int:
        """Stored (compressed) bytes of bodies + renders. Batch bytes are not included."""
        self._live()
        return self._bytes

    def evict(self, now: int | None = None) -> int:
        """Remove least-recently-used bodies and renders until ``size() <= max_bytes``; return
        how many bodies and renders were removed (a body's renders included; its page entries
        go too but are not counted). ``now`` is unused: recency is a sequence, not a time."""
        del now
        removed = 0
        while self._bytes > self.max_bytes:
            freed = n = 0
            with self._write() as conn:
                candidates = conn.execute(
                    "SELECT * FROM (SELECT 'body', digest, '', lru FROM body ORDER BY lru LIMIT ?)"
                    " UNION ALL SELECT * FROM (SELECT 'render', digest, render_key, lru "
                    "FROM render ORDER BY lru LIMIT ?) ORDER BY 4, 1 DESC",
                    (_EVICT_CHUNK, _EVICT_CHUNK),
                ).fetchall()
                dropped: set[str] = set()
                for kind, digest, render_key, _lru in candidates:
                    if self._bytes - freed <= self.max_bytes:
                        break
                    if digest in dropped:
                        continue  # its renders went with the body
                    if kind == "body":
                        dropped.add(digest)
                        f, k = self._drop_body(conn, digest)
                    else:
                        f, k = self._drop_render(conn, digest, render_key)
                    freed += f
                    n += k
            self._bytes -= freed
            removed += n
            if not candidates:
                self._bytes = 0  # nothing left to drop: the counter cannot be above zero
                break
        self._count("evictions", removed)
        return removed

    @staticmethod
    def _drop_body(conn: sqlite3.Connection, digest: str) -> tuple[int, int]:
        """Delete a body with its renders, page entries and blobs: (bytes freed, entries)."""
        rows = conn.execute(
            "DELETE FROM render WHERE digest = ? RETURNING nbytes, blob_id", (digest,)
        ).fetchall()
        n_renders = len(rows)
        conn.execute("DELETE FROM page WHERE digest = ?", (digest,))
        rows += conn.execute(
            "DELETE FROM body WHERE digest = ? RETURNING nbytes, blob_id", (digest,)
        ).fetchall()
        conn.executemany("DELETE FROM blob WHERE id = ?", [(r[1],) for r in rows])
        return sum(int(r[0]) for r in rows), n_renders + 1

    @staticmethod
    def _drop_render(conn: sqlite3.Connection, digest: str, render_key: str) -> tuple[int, int]:
        row = conn.execute(
            "DELETE FROM render WHERE digest = ? AND render_key = ? RETURNING nbytes, blob_id",
            (digest, render_key),
        ).fetchone()
        if row is None:
            return 0, 0
        conn.execute("DELETE FROM blob WHERE id = ?", (row[1],))
        return int(row[0]), 1

    # -- robots.txt ------------------------------------------------------------------------

    def get_robots(self, origin: str) -> tuple[int, bytes, int] | None:
        """``(status, body, fetched_at)`` cached for ``origin``, or None. The fetcher decides
        freshness from fetched_at."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT status, body, fetched_at FROM robots WHERE origin = ?", (origin,)
            ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]), int(row[2]))

    def put_robots(self, origin: str, status: int, body: bytes, fetched_at: int) -> None:
        """Store (or replace) the robots.txt answer for ``origin``."""
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO robots (origin, status, body, fetched_at) VALUES (?,?,?,?)",
                (origin, status, body, fetched_at),
            )

    # -- stats -----------------------------------------------------------------------------

    def _hit_or_miss(self, kind: str, hit: bool) -> None:
        outcome = "hits" if hit else "misses"
        self._count(f"{kind}_{outcome}")
        self._count(outcome)

    def stats(self) -> dict[str, int]:
        """Counters since open (hits, misses — totals and per body/page/render —, evictions,
        orphan_puts, batch_misses, …) and gauges (bodies, pages, renders, robots, bytes,
        raw_bytes, max_bytes, batch_jobs, batch_bytes)."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM body), (SELECT count(*) FROM page),"
                " (SELECT count(*) FROM render), (SELECT count(*) FROM robots),"
                " (SELECT count(*) FROM batch_job),"
                " (SELECT coalesce(sum(raw_bytes), 0) FROM body)"
                " + (SELECT coalesce(sum(raw_bytes), 0) FROM render)"
            ).fetchone()
            batch_bytes = self._nbytes(conn)
        out = dict.fromkeys(_COUNTERS, 0)
        out.update(self._counters)
        out.update(
            bodies=int(row[0]),
            pages=int(row[1]),
            renders=int(row[2]),
            robots=int(row[3]),
            batch_jobs=int(row[4]),
            raw_bytes=int(row[5]),
            bytes=self._bytes,
            max_bytes=self.max_bytes,
            batch_bytes=batch_bytes,
        )
        return out
