"""``SqliteHistory``: the ``HistoryStore`` on the node's SQLite database (``sqlite.history``)."""

from __future__ import annotations

from sift.store.history import (
    ANY_LATEST,
    Conflict,
    Expect,
    HistoryLimits,
    NewSnapshot,
    SnapshotRow,
)
from sift.store.sqlite.store import DBWorker
from sift.store.sqlite.tables import BatchTables as DB


class SqliteHistory:
    """The change history in the node's own SQLite file, over its ``AsyncDB``."""

    def __init__(self, adb: DBWorker) -> None:
        self.adb = adb

    async def latest(self, owner: str, tag: str, url: str) -> SnapshotRow | None:
        return await self.adb.run(DB.history_latest, owner, tag, url)

    async def text(self, digest: str) -> str | None:
        return await self.adb.run(DB.history_text, digest)

    async def record(
        self,
        owner: str,
        tag: str,
        url: str,
        snap: NewSnapshot,
        limits: HistoryLimits,
        expect: Expect = ANY_LATEST,
    ) -> SnapshotRow | Conflict:
        return await self.adb.run(DB.record_history, owner, tag, url, snap, limits, expect)

    async def snapshots(self, owner: str, tag: str, url: str) -> list[SnapshotRow]:
        return await self.adb.run(DB.history_snapshots, owner, tag, url)

    async def nbytes(self) -> int:
        return await self.adb.run(DB.history_nbytes)

    async def forget(self, owner: str, tag: str) -> int:
        return await self.adb.run(DB.forget_history, owner, tag)
