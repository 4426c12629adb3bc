"""``PgHistory``: the change history (``store.history``) on the shared PostgreSQL store.

The same rules as the SQLite history, across nodes: a ``record`` takes a transaction-level
advisory lock on its key, so two nodes recording one key serialise (one latest per key);
one that adds a text takes the history's own lock too (always after the key's, so no
deadlock), so a text is never deleted by one node while another points a new snapshot at it.
"""

from __future__ import annotations

from typing import Any, Final

from sift.store.history import (
    ANY_LATEST,
    NOT_A_WATCH_SQL,
    REMOVED,
    Conflict,
    Expect,
    HistoryLimits,
    HistoryWrite,
    NewSnapshot,
    SnapshotRow,
)
from sift.store.postgres.conn import Cursor, PgConn

# pg_advisory_xact_lock key of history writes that add or drop texts ("sift" + 0x23).
HISTORY_LOCK: Final = 0x73696674_00000023

# Migration step of ``postgres.schema.MIGRATIONS``.
HISTORY_DDL: Final = """
    CREATE TABLE history_text (
        digest text PRIMARY KEY,
        text   text NOT NULL,
        nbytes bigint NOT NULL
    );
    CREATE TABLE history_snap (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        owner       text NOT NULL,
        tag         text NOT NULL,
        url         text NOT NULL,
        digest      text NOT NULL,
        body_digest text NOT NULL,
        http_status integer NOT NULL,
        fetched_at  bigint NOT NULL,
        seen_at     bigint NOT NULL,
        latest      boolean NOT NULL
    );
    CREATE INDEX history_snap_key ON history_snap (owner, tag, url, id);
    CREATE INDEX history_snap_old ON history_snap (id) WHERE NOT latest;
    CREATE INDEX history_snap_digest ON history_snap (digest);
    CREATE INDEX history_snap_seen ON history_snap (seen_at) WHERE latest;
"""

_COLS = "id, digest, body_digest, http_status, fetched_at, seen_at, latest"
_KEY = "owner = %s AND tag = %s AND url = %s"


def _row(row: tuple[Any, ...]) -> SnapshotRow:
    id_, digest, body_digest, status, fetched_at, seen_at, latest = row
    return SnapshotRow(
        int(id_),
        str(digest),
        str(body_digest),
        int(status),
        int(fetched_at),
        int(seen_at),
        bool(latest),
    )


class PgHistory:
    """``HistoryStore`` over the PostgreSQL store's connection pool."""

    def __init__(self, conn: PgConn) -> None:
        self._conn = conn

    async def latest(self, owner: str, tag: str, url: str) -> SnapshotRow | None:
        async with self._conn.tx() as cur:
            await cur.execute(
                f"SELECT {_COLS} FROM history_snap WHERE {_KEY} ORDER BY id DESC LIMIT 1",
                (owner, tag, url),
            )
            row = await cur.fetchone()
        return _row(row) if row is not None else None

    async def text(self, digest: str) -> str | None:
        async with self._conn.tx() as cur:
            await cur.execute("SELECT text FROM history_text WHERE digest = %s", (digest,))
            row = await cur.fetchone()
        return str(row[0]) if row is not None else None

    async def snapshots(self, owner: str, tag: str, url: str) -> list[SnapshotRow]:
        async with self._conn.tx() as cur:
            await cur.execute(
                f"SELECT {_COLS} FROM history_snap WHERE {_KEY} ORDER BY id", (owner, tag, url)
            )
            return [_row(r) for r in await cur.fetchall()]

    async def nbytes(self) -> int:
        async with self._conn.tx() as cur:
            await cur.execute("SELECT COALESCE(SUM(nbytes), 0) FROM history_text")
            row = await cur.fetchone()
        return int(row[0]) if row is not None else 0

    async def forget(self, owner: str, tag: str) -> int:
        async with self._conn.tx() as cur:
            await cur.execute("SELECT pg_advisory_xact_lock(%s)", (HISTORY_LOCK,))
            await cur.execute(
                "SELECT id, digest FROM history_snap WHERE owner = %s AND tag = %s", (owner, tag)
            )
            rows = await cur.fetchall()
            for id_, digest in rows:
                await _drop(cur, int(id_), str(digest))
        return len(rows)

    async def record(
        self,
        owner: str,
        tag: str,
        url: str,
        snap: NewSnapshot,
        limits: HistoryLimits,
        expect: Expect = ANY_LATEST,
    ) -> SnapshotRow | Conflict:
        async with self._conn.tx() as cur:
            return await record_in(cur, HistoryWrite(owner, tag, url, snap, limits, expect))


async def record_in(cur: Cursor, write: HistoryWrite) -> SnapshotRow | Conflict:
    """``HistoryStore.record`` inside the caller's transaction (``cur``)."""
    key, snap, limits = (write.owner, write.tag, write.url), write.snap, write.limits
    await cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("\x1f".join(key),))
    await cur.execute(
        f"SELECT {_COLS} FROM history_snap WHERE {_KEY} ORDER BY id DESC LIMIT 1", key
    )
    row = await cur.fetchone()
    current = _row(row) if row is not None else None
    if write.expect is not ANY_LATEST and current != write.expect:
        return Conflict(current)
    if current is not None and current.digest == snap.digest:
        touched = SnapshotRow(
            current.id,
            current.digest,
            snap.body_digest,
            snap.http_status,
            current.fetched_at,
            max(current.seen_at, snap.fetched_at),
            True,
        )
        await cur.execute(
            "UPDATE history_snap SET seen_at = %s, body_digest = %s, http_status = %s "
            "WHERE id = %s",
            (touched.seen_at, touched.body_digest, touched.http_status, touched.id),
        )
        return touched
    await cur.execute("SELECT pg_advisory_xact_lock(%s)", (HISTORY_LOCK,))
    if snap.text is not None and snap.digest != REMOVED:
        await cur.execute(
            "INSERT INTO history_text (digest, text, nbytes) VALUES (%s, %s, %s) "
            "ON CONFLICT (digest) DO NOTHING",
            (snap.digest, snap.text, len(snap.text.encode())),
        )
    if current is not None:
        await cur.execute(f"UPDATE history_snap SET latest = false WHERE {_KEY}", key)
    await cur.execute(
        "INSERT INTO history_snap (owner, tag, url, digest, body_digest, http_status, "
        "fetched_at, seen_at, latest) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, true) "
        "RETURNING id",
        (*key, snap.digest, snap.body_digest, snap.http_status) + (snap.fetched_at,) * 2,
    )
    inserted = await cur.fetchone()
    assert inserted is not None
    new_id = int(inserted[0])
    await _keep_count(cur, key, limits.max_snapshots)
    await _keep_bytes(cur, limits.max_bytes, new_id)
    return SnapshotRow(
        new_id,
        snap.digest,
        snap.body_digest,
        snap.http_status,
        snap.fetched_at,
        snap.fetched_at,
        True,
    )


async def _keep_count(cur: Cursor, key: tuple[str, str, str], keep: int) -> None:
    await cur.execute(
        f"SELECT id, digest FROM history_snap WHERE {_KEY} ORDER BY id DESC OFFSET %s",
        (*key, max(1, keep)),
    )
    for id_, digest in await cur.fetchall():
        await _drop(cur, int(id_), str(digest))


async def _keep_bytes(cur: Cursor, max_bytes: int, new_id: int) -> None:
    """As the SQLite history's: non-latest snapshots oldest first, then latest ones least
    recently seen, never a watch's nor ``new_id``."""
    await cur.execute("SELECT COALESCE(SUM(nbytes), 0) FROM history_text")
    row = await cur.fetchone()
    total = int(row[0]) if row is not None else 0
    for query in (
        "SELECT id, digest FROM history_snap WHERE NOT latest ORDER BY id LIMIT 64",
        f"SELECT id, digest FROM history_snap WHERE latest AND id <> {new_id} "
        f"AND {NOT_A_WATCH_SQL} ORDER BY seen_at, id LIMIT 64",
    ):
        while total > max_bytes:
            await cur.execute(query.encode())
            rows = await cur.fetchall()
            if not rows:
                break
            for id_, digest in rows:
                total -= await _drop(cur, int(id_), str(digest))
                if total <= max_bytes:
                    return


async def _drop(cur: Cursor, id_: int, digest: str) -> int:
    """Delete one snapshot, and its text if no other snapshot has it: the bytes freed."""
    await cur.execute("DELETE FROM history_snap WHERE id = %s", (id_,))
    await cur.execute("SELECT 1 FROM history_snap WHERE digest = %s LIMIT 1", (digest,))
    if await cur.fetchone() is not None:
        return 0
    await cur.execute("DELETE FROM history_text WHERE digest = %s RETURNING nbytes", (digest,))
    row = await cur.fetchone()
    return int(row[0]) if row is not None else 0
