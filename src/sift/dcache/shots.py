"""Screenshots in the content cache: stored once per SHA-256 of the image, evicted with the
bodies and renders (content.py: one byte budget, one LRU order), and served only to the
callers they were served to.

A grant row (digest, caller) is written each time a fetch result carrying the screenshot
is given to a caller (``grant_shot``), whether the page was loaded for it or came from the
cache; ``get_shot`` answers only a caller holding one. Grants go with their screenshot.
"""

from __future__ import annotations

from typing import NamedTuple

from sift.dcache.content import ContentCacheMixin, body_digest


class StoredShot(NamedTuple):
    """A screenshot as the route serves it."""

    data: bytes
    type: str
    width: int
    height: int


class ShotsMixin(ContentCacheMixin):
    """The screenshot methods of ``DB``."""

    def put_shot(self, data: bytes, type_: str, width: int, height: int, now: int) -> str:
        """Store an image unless it is stored (then mark it used); return its digest
        ``"sha256:<hex>"``. Stored as encoded: PNG, JPEG and WebP are compressed already.
        The caller keeps the cache in budget (``evict``)."""
        digest = body_digest(data)
        added = 0
        with self._write() as conn:
            seq = self._next_seq()
            cur = conn.execute(
                "UPDATE shot SET lru = ?, accessed_at = ? WHERE digest = ?", (seq, now, digest)
            )
            if cur.rowcount == 0:
                blob_id = conn.execute("INSERT INTO blob (data) VALUES (?)", (data,)).lastrowid
                conn.execute(
                    "INSERT INTO shot (digest, blob_id, type, width, height, nbytes, created_at,"
                    " accessed_at, lru) VALUES (?,?,?,?,?,?,?,?,?)",
                    (digest, blob_id, type_, width, height, len(data), now, now, seq),
                )
                added = len(data)
        self._bytes += added
        return digest

    def grant_shot(self, digest: str, caller: str, now: int) -> bool:
        """Let ``caller`` read screenshot ``digest`` (and mark it used). False, and nothing
        granted, when it is no longer stored."""
        with self._write() as conn:
            seq = self._next_seq()
            if not conn.execute(
                "UPDATE shot SET lru = ?, accessed_at = ? WHERE digest = ?", (seq, now, digest)
            ).rowcount:
                return False
            conn.execute(
                "INSERT OR IGNORE INTO shot_grant (digest, caller) VALUES (?, ?)", (digest, caller)
            )
        return True

    def get_shot(self, digest: str, caller: str, now: int) -> StoredShot | None:
        """The screenshot, if stored and granted to ``caller``; a hit marks it used. None
        either way otherwise: a caller cannot tell another's screenshot from no screenshot."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT d.data, s.type, s.width, s.height FROM shot s"
                " JOIN shot_grant g ON g.digest = s.digest AND g.caller = ?"
                " JOIN blob d ON d.id = s.blob_id WHERE s.digest = ?",
                (caller, digest),
            ).fetchone()
        self._hit_or_miss("shot", row is not None)
        if row is None:
            return None
        with self._write() as conn:
            conn.execute(
                "UPDATE shot SET lru = ?, accessed_at = ? WHERE digest = ?",
                (self._next_seq(), now, digest),
            )
        return StoredShot(bytes(row[0]), str(row[1]), int(row[2]), int(row[3]))
