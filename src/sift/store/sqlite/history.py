"""The change history's SQLite SQL (``store.history``), mixed into ``sift.dcache.DB``.

Each method is one call on the database's worker thread, so ``record_history`` (insert or
touch, then the count and byte bounds) is atomic: nothing else runs between its steps.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from sift.store.history import (
    ANY_LATEST,
    NOT_A_WATCH_SQL,
    REMOVED,
    Conflict,
    Expect,
    HistoryLimits,
    NewSnapshot,
    SnapshotRow,
)
from sift.store.sqlite.host import SqliteHost

# Schema version 4 of the node's SQLite file (``dcache.schema.MIGRATIONS``).
HISTORY_DDL: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS history_text (
        digest TEXT PRIMARY KEY,            -- 'sha256:<hex>' of the compared text
        text   TEXT NOT NULL,
        nbytes INTEGER NOT NULL             -- UTF-8 bytes of text: what history.max_bytes counts
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS history_snap (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- insertion order: oldest go first
        owner       TEXT NOT NULL,          -- the caller's identity
        tag         TEXT NOT NULL,          -- '' for no tag
        url         TEXT NOT NULL,          -- normalised
        digest      TEXT NOT NULL,          -- history_text.digest, or 'removed' (404/410)
        body_digest TEXT NOT NULL,          -- the page body's digest when last seen
        http_status INTEGER NOT NULL,
        fetched_at  INTEGER NOT NULL,       -- first seen with this digest
        seen_at     INTEGER NOT NULL,       -- last seen
        latest      INTEGER NOT NULL        -- 1 for the key's newest snapshot
    )""",
    "CREATE INDEX IF NOT EXISTS history_snap_key ON history_snap(owner, tag, url, id)",
    "CREATE INDEX IF NOT EXISTS history_snap_old ON history_snap(id) WHERE latest = 0",
    "CREATE INDEX IF NOT EXISTS history_snap_digest ON history_snap(digest)",
    "CREATE INDEX IF NOT EXISTS history_snap_seen ON history_snap(seen_at) WHERE latest = 1",
)

_COLS = "id, digest, body_digest, http_status, fetched_at, seen_at, latest"


def _row(row: tuple[object, ...]) -> SnapshotRow:
    id_, digest, body_digest, status, fetched_at, seen_at, latest = row
    return SnapshotRow(
        int(str(id_)),
        str(digest),
        str(body_digest),
        int(str(status)),
        int(str(fetched_at)),
        int(str(seen_at)),
        bool(latest),
    )


class HistoryMixin(SqliteHost):
    """The history methods of ``sift.dcache.DB``."""

    # The bytes of history_text, kept here so that a record does not sum every text (a sum
    # reads the whole table, texts and their overflow pages included). None: count again.
    # Counted again as well when another connection wrote the file (PRAGMA data_version
    # moved: another process, the CLI) and after a rollback (``_on_rollback``).
    _history_bytes: int | None = None
    _history_version: int = -1

    def _on_rollback(self, conn: sqlite3.Connection) -> None:
        super()._on_rollback(conn)
        self._history_bytes = None

    def _history_total(self, conn: sqlite3.Connection) -> int:
        """The bytes of history_text (inside a write transaction)."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if self._history_bytes is None or version != self._history_version:
            self._history_bytes = _sum_bytes(conn)
            self._history_version = version
        return self._history_bytes

    def history_latest(self, owner: str, tag: str, url: str) -> SnapshotRow | None:
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {_COLS} FROM history_snap WHERE owner = ? AND tag = ? AND url = ? "
                "ORDER BY id DESC LIMIT 1",
                (owner, tag, url),
            ).fetchone()
        return _row(row) if row is not None else None

    def history_text(self, digest: str) -> str | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT text FROM history_text WHERE digest = ?", (digest,)
            ).fetchone()
        return str(row[0]) if row is not None else None

    def history_snapshots(self, owner: str, tag: str, url: str) -> list[SnapshotRow]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_COLS} FROM history_snap WHERE owner = ? AND tag = ? AND url = ? "
                "ORDER BY id",
                (owner, tag, url),
            ).fetchall()
        return [_row(r) for r in rows]

    def history_nbytes(self) -> int:
        with self._read() as conn:
            return _sum_bytes(conn)

    def forget_history(self, owner: str, tag: str) -> int:
        """``HistoryStore.forget``."""
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id, digest FROM history_snap WHERE owner = ? AND tag = ?", (owner, tag)
            ).fetchall()
            for id_, digest in rows:
                _drop(conn, int(id_), str(digest))
            self._history_bytes = None  # rare: counted again at the next record
        return len(rows)

    def record_history(
        self,
        owner: str,
        tag: str,
        url: str,
        snap: NewSnapshot,
        limits: HistoryLimits,
        expect: Expect = ANY_LATEST,
    ) -> SnapshotRow | Conflict:
        """``HistoryStore.record``: touch the latest, or add a snapshot and keep the bounds."""
        key = (owner, tag, url)
        with self._write() as conn:
            if isinstance(expect, SnapshotRow) and expect.digest == snap.digest:
                # The common case of a watch (same text as the latest it expects): the check
                # and the touch in one statement; anything else takes the general way.
                touched = _touched(expect, snap)
                if conn.execute(
                    "UPDATE history_snap SET seen_at = ?, body_digest = ?, http_status = ? "
                    "WHERE id = ? AND owner = ? AND tag = ? AND url = ? AND latest = 1 "
                    "AND digest = ? AND body_digest = ? AND http_status = ? AND fetched_at = ? "
                    "AND seen_at = ?",
                    (
                        *(touched.seen_at, touched.body_digest, touched.http_status),
                        *(expect.id, *key, expect.digest, expect.body_digest),
                        *(expect.http_status, expect.fetched_at, expect.seen_at),
                    ),
                ).rowcount:
                    return touched
            row = conn.execute(
                f"SELECT {_COLS} FROM history_snap WHERE owner = ? AND tag = ? AND url = ? "
                "ORDER BY id DESC LIMIT 1",
                key,
            ).fetchone()
            current = _row(row) if row is not None else None
            if expect is not ANY_LATEST and current != expect:
                return Conflict(current)
            if current is not None and current.digest == snap.digest:
                touched = _touched(current, snap)
                conn.execute(
                    "UPDATE history_snap SET seen_at = ?, body_digest = ?, http_status = ? "
                    "WHERE id = ?",
                    (touched.seen_at, touched.body_digest, touched.http_status, touched.id),
                )
                return touched
            total = self._history_total(conn)
            if snap.text is not None and snap.digest != REMOVED:
                nbytes = len(snap.text.encode())
                added = conn.execute(
                    "INSERT OR IGNORE INTO history_text (digest, text, nbytes) VALUES (?, ?, ?)",
                    (snap.digest, snap.text, nbytes),
                ).rowcount
                total += nbytes * added
            if current is not None:
                conn.execute(
                    "UPDATE history_snap SET latest = 0 WHERE owner = ? AND tag = ? AND url = ? "
                    "AND latest = 1",
                    key,
                )
            (new_id,) = conn.execute(
                "INSERT INTO history_snap (owner, tag, url, digest, body_digest, http_status, "
                "fetched_at, seen_at, latest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) RETURNING id",
                (*key, snap.digest, snap.body_digest, snap.http_status) + (snap.fetched_at,) * 2,
            ).fetchone()
            total -= _keep_count(conn, owner, tag, url, limits.max_snapshots)
            self._history_bytes = _keep_bytes(conn, limits.max_bytes, int(new_id), total)
        return SnapshotRow(
            int(new_id),
            snap.digest,
            snap.body_digest,
            snap.http_status,
            snap.fetched_at,
            snap.fetched_at,
            True,
        )


def _touched(latest: SnapshotRow, snap: NewSnapshot) -> SnapshotRow:
    """``latest`` seen again by ``snap`` (the same text)."""
    return SnapshotRow(
        latest.id,
        latest.digest,
        snap.body_digest,
        snap.http_status,
        latest.fetched_at,
        max(latest.seen_at, snap.fetched_at),
        True,
    )


def _sum_bytes(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(SUM(nbytes), 0) FROM history_text").fetchone()[0])


def _keep_count(conn: sqlite3.Connection, owner: str, tag: str, url: str, keep: int) -> int:
    """Drop the key's oldest snapshots beyond ``keep`` (the latest is always kept); the
    bytes freed."""
    rows = conn.execute(
        "SELECT id, digest FROM history_snap WHERE owner = ? AND tag = ? AND url = ? "
        "ORDER BY id DESC LIMIT -1 OFFSET ?",
        (owner, tag, url, max(1, keep)),
    ).fetchall()
    return sum(_drop(conn, int(id_), str(digest)) for id_, digest in rows)


def _keep_bytes(conn: sqlite3.Connection, max_bytes: int, new_id: int, total: int) -> int:
    """Past ``max_bytes`` (``total``: the bytes stored now): drop the oldest snapshots that
    are not a key's latest, then the least recently seen latest ones that are not a watch's
    (nor ``new_id``), until the texts fit or nothing may go; the bytes then stored."""
    for query in (
        "SELECT id, digest FROM history_snap WHERE latest = 0 ORDER BY id LIMIT 64",
        f"SELECT id, digest FROM history_snap WHERE latest = 1 AND id <> {new_id} "
        f"AND {NOT_A_WATCH_SQL} ORDER BY seen_at, id LIMIT 64",
    ):
        while total > max_bytes:
            rows = conn.execute(query).fetchall()
            if not rows:
                break
            for id_, digest in rows:
                total -= _drop(conn, int(id_), str(digest))
                if total <= max_bytes:
                    return total
    return total


def _drop(conn: sqlite3.Connection, id_: int, digest: str) -> int:
    """Delete one snapshot, and its text if no other snapshot has it: the bytes freed."""
    conn.execute("DELETE FROM history_snap WHERE id = ?", (id_,))
    if conn.execute("SELECT 1 FROM history_snap WHERE digest = ? LIMIT 1", (digest,)).fetchone():
        return 0
    row = conn.execute("SELECT nbytes FROM history_text WHERE digest = ?", (digest,)).fetchone()
    if row is None:
        return 0
    conn.execute("DELETE FROM history_text WHERE digest = ?", (digest,))
    return int(row[0])
