"""Choose and open the batch store from the settings: ``[store] url`` or the embedded one."""

from __future__ import annotations

from sift.batch.sqlitestore import SqliteBatchStore
from sift.batch.store import BatchStore
from sift.config import Settings
from sift.dcache import AsyncDB


async def open_store(settings: Settings, adb: AsyncDB) -> BatchStore:
    """The PostgreSQL store when ``store.url`` is set (migrated, pool open), else the embedded
    SQLite store over ``adb``. Raises ``ConfigError`` when the database cannot be used."""
    if not settings.store.url:
        return SqliteBatchStore(adb)
    from sift.batch.pgstore import PgBatchStore

    return await PgBatchStore.open(settings.store)
