"""The content cache: raw bodies, page entries, rendered outputs and screenshots under one
byte budget (screenshots' own methods are in shots.py).

- Bodies are stored once per SHA-256 of their uncompressed bytes (zstd when it pays, see
  codec.py); the stored bytes live in ``blob``, apart from the small metadata rows.
- Page entries map a request key (normalised URL + fetch options) to response metadata and a
  body digest. Renders map (body digest, render key) to an opaque payload.
- ``size()`` is the stored bytes of bodies + renders + screenshots, kept in a counter (summed
  once at open). ``evict()`` drops the least recently used bodies, renders and screenshots
  until ``size() <= max_bytes``;
  a body goes with its page entries and renders, so a page entry never outlives its body (the
  foreign keys enforce the same).
- Recency is a global sequence number, not the clock, so the order is exact within a second.
  A hit only records its new sequence number in memory; the pending numbers are written at the
  start of the next write transaction (every put, every evict, close) or once 256 pile up. A
  hit is therefore a plain read, and evict always sees the true order.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Final

from sift.dcache.codec import Codecs
from sift.dcache.store import StoreBase

# How many LRU candidates evict() reads per round trip.
_EVICT_CHUNK: Final = 64
# How many hits' recency may wait in memory before they are written on their own.
_MAX_PENDING_BUMPS: Final = 256

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


class ContentCacheMixin(StoreBase):
    """The content cache methods of ``DB``."""

    def __init__(
        self, conn: sqlite3.Connection, path: str, *, max_bytes: int, compress_level: int
    ) -> None:
        super().__init__(conn, path)
        self.max_bytes = max_bytes
        self._codecs = Codecs(compress_level)
        # Recency of hits not yet written: digest -> (lru, now); (digest, render_key) -> same.
        self._body_bumps: dict[str, tuple[int, int]] = {}
        self._render_bumps: dict[tuple[str, str], tuple[int, int]] = {}
        with self._read() as c:
            self._bytes = self._stored_bytes(c)
            self._seq = int(
                c.execute(
                    "SELECT max((SELECT coalesce(max(lru), 0) FROM body),"
                    " (SELECT coalesce(max(lru), 0) FROM render),"
                    " (SELECT coalesce(max(lru), 0) FROM shot))"
                ).fetchone()[0]
            )

    @staticmethod
    def _stored_bytes(conn: sqlite3.Connection) -> int:
        return int(
            conn.execute(
                "SELECT (SELECT coalesce(sum(nbytes), 0) FROM body)"
                " + (SELECT coalesce(sum(nbytes), 0) FROM render)"
                " + (SELECT coalesce(sum(nbytes), 0) FROM shot)"
            ).fetchone()[0]
        )

    def _on_rollback(self, conn: sqlite3.Connection) -> None:
        """A rolled-back write may have counted bytes it never kept: count them again."""
        super()._on_rollback(conn)
        self._bytes = self._stored_bytes(conn)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _on_write(self, conn: sqlite3.Connection) -> None:
        """Write the pending recency first, so every write (and evict) sees the true order."""
        super()._on_write(conn)
        if self._body_bumps:
            conn.executemany(
                "UPDATE body SET lru = ?, accessed_at = ? WHERE digest = ?",
                [(seq, now, d) for d, (seq, now) in self._body_bumps.items()],
            )
            self._body_bumps.clear()
        if self._render_bumps:
            conn.executemany(
                "UPDATE render SET lru = ?, accessed_at = ? WHERE digest = ? AND render_key = ?",
                [(seq, now, d, k) for (d, k), (seq, now) in self._render_bumps.items()],
            )
            self._render_bumps.clear()

    def _bumped(self) -> None:
        if len(self._body_bumps) + len(self._render_bumps) >= _MAX_PENDING_BUMPS:
            with self._write():
                pass  # _on_write does the writing

    # -- bodies ----------------------------------------------------------------------------

    def put_body(self, data: bytes, now: int) -> str:
        """Store ``data`` unless an identical body is stored (then just mark it used); return
        its digest ``"sha256:<hex>"`` of the uncompressed bytes."""
        return self.put_body_new(data, now)[0]

    def put_body_new(self, data: bytes, now: int) -> tuple[str, bool]:
        """``put_body``, also saying whether the body is new (then nothing is derived from
        it yet: no render can exist for its digest)."""
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
        return digest, cur.rowcount == 0

    def get_body(self, digest: str, now: int) -> bytes | None:
        """The body's original bytes, or None; a hit marks it most recently used."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT b.codec, d.data FROM body b JOIN blob d ON d.id = b.blob_id "
                "WHERE b.digest = ?",
                (digest,),
            ).fetchone()
        self._hit_or_miss("body", row is not None)
        if row is None:
            return None
        self._body_bumps[digest] = (self._next_seq(), now)
        self._bumped()
        return self._codecs.decode(row[0], row[1])

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
        with self._read() as conn:
            row = conn.execute(f"SELECT {_PAGE_COLS} FROM page WHERE key = ?", (key,)).fetchone()
        self._hit_or_miss("page", row is not None)
        if row is None:
            return None
        entry = PageEntry(*row)
        self._body_bumps[entry.digest] = (self._next_seq(), now)
        self._bumped()
        return entry

    def get_page_render(
        self, key: str, render_key: str, now: int
    ) -> tuple[PageEntry, bytes | None] | None:
        """``get_page`` then ``get_render`` of its body, in one call (one AsyncDB hop for the
        common cache hit): None without a page entry, else the entry and the payload or None."""
        entry = self.get_page(key, now)
        if entry is None:
            return None
        return entry, self.get_render(entry.digest, render_key, now)

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
        with self._read() as conn:
            row = conn.execute(
                "SELECT r.codec, d.data FROM render r JOIN blob d ON d.id = r.blob_id "
                "WHERE r.digest = ? AND r.render_key = ?",
                (digest, render_key),
            ).fetchone()
        self._hit_or_miss("render", row is not None)
        if row is None:
            return None
        seq = self._next_seq()
        self._render_bumps[(digest, render_key)] = (seq, now)
        self._body_bumps[digest] = (seq, now)
        self._bumped()
        return self._codecs.decode(row[0], row[1])

    def _hit_or_miss(self, kind: str, hit: bool) -> None:
        outcome = "hits" if hit else "misses"
        self._count(f"{kind}_{outcome}")
        self._count(outcome)

    # -- budget ----------------------------------------------------------------------------

    def size(self) -> int:
        """Stored (compressed) bytes of bodies + renders + screenshots. Batch bytes are not
        included."""
        self._live()
        return self._bytes

    def evict(self, now: int | None = None) -> int:
        """Remove least-recently-used bodies, renders and screenshots until ``size() <=
        max_bytes``; return how many were removed (a body's renders included; its page entries
        go too but are not counted). On a tie a screenshot, then a render goes first.
        ``now`` is unused: recency is a sequence, not a time."""
        del now
        removed = 0
        while self._bytes > self.max_bytes:
            freed = n = 0
            with self._write() as conn:
                candidates = conn.execute(
                    "SELECT * FROM (SELECT 'body', digest, '', lru FROM body ORDER BY lru LIMIT ?)"
                    " UNION ALL SELECT * FROM (SELECT 'render', digest, render_key, lru "
                    "FROM render ORDER BY lru LIMIT ?) UNION ALL SELECT * FROM (SELECT 'shot', "
                    "digest, '', lru FROM shot ORDER BY lru LIMIT ?) ORDER BY 4, 1 DESC",
                    (_EVICT_CHUNK, _EVICT_CHUNK, _EVICT_CHUNK),
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
                    elif kind == "shot":
                        f, k = self._drop_shot(conn, digest)
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
    def _drop_shot(conn: sqlite3.Connection, digest: str) -> tuple[int, int]:
        """Delete a screenshot with its grants and blob: (bytes freed, 1)."""
        conn.execute("DELETE FROM shot_grant WHERE digest = ?", (digest,))
        row = conn.execute(
            "DELETE FROM shot WHERE digest = ? RETURNING nbytes, blob_id", (digest,)
        ).fetchone()
        conn.execute("DELETE FROM blob WHERE id = ?", (row[1],))
        return int(row[0]), 1

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
