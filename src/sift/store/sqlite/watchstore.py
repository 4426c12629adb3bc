"""``SqliteWatchStore``: the watch tables of the node's SQLite database behind
``WatchStore``, each method one call on the database's worker thread."""

from __future__ import annotations

from sift.store.history import Conflict, HistoryWrite, SnapshotRow
from sift.store.sqlite.tables import BatchTables as DB
from sift.store.sqlite.worker import DBWorker
from sift.store.watches import Watch, WatchEvent


class _HistoryMoved(Exception):
    """Raised out of ``record_check_and_history`` to roll back the event it wrote."""

    def __init__(self, conflict: Conflict) -> None:
        super().__init__("the history's latest snapshot moved on")
        self.conflict = conflict


def record_check_and_history(
    db: DB, event: WatchEvent, token: int, keep: int, write: HistoryWrite
) -> SnapshotRow | Conflict | None:
    """``WatchStore.record_check_and_history``: one transaction on the worker thread. The
    event first (its claim is checked there); a conflicting snapshot then undoes it by
    raising out of the call (a rollback: rare, only when another writer moved the key on)."""
    with db.transaction():
        if not db.record_check(event, token, keep):
            return None
        written = db.record_history(
            write.owner, write.tag, write.url, write.snap, write.limits, write.expect
        )
        if isinstance(written, Conflict):
            raise _HistoryMoved(written)
    return written


class SqliteWatchStore:
    """``WatchStore`` over the node's ``AsyncDB`` (any ``DBWorker``)."""

    def __init__(self, adb: DBWorker) -> None:
        self.adb = adb

    async def create_watch(self, watch: Watch, max_watches: int) -> None:
        await self.adb.run(DB.create_watch, watch, max_watches)

    async def watches_of(self, caller: str) -> list[Watch]:
        return await self.adb.run(DB.watches_of, caller)

    async def owned_watch(self, watch_id: str, caller: str) -> Watch:
        return await self.adb.run(DB.owned_watch, watch_id, caller)

    async def delete_watch(self, watch_id: str, caller: str) -> None:
        await self.adb.run(DB.delete_watch, watch_id, caller)

    async def watch_events(self, watch_id: str, limit: int) -> list[WatchEvent]:
        return await self.adb.run(DB.watch_events, watch_id, limit)

    async def claim_due_watches(self, now: float, limit: int, lease_s: float) -> list[Watch]:
        return await self.adb.run(DB.claim_due_watches, now, limit, lease_s)

    async def record_check(self, event: WatchEvent, token: int, keep: int) -> bool:
        return await self.adb.run(DB.record_check, event, token, keep)

    async def record_check_and_history(
        self, event: WatchEvent, token: int, keep: int, write: HistoryWrite
    ) -> SnapshotRow | Conflict | None:
        try:
            return await self.adb.run(record_check_and_history, event, token, keep, write)
        except _HistoryMoved as moved:
            return moved.conflict

    async def release_watch_leases(self) -> int:
        return await self.adb.run(DB.release_watch_leases)

    async def watch_count(self) -> int:
        return await self.adb.run(DB.watch_count)
