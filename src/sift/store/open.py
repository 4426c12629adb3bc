"""Choose and open the batch store from the settings: ``[store] url`` or the embedded one."""

from __future__ import annotations

from sift.config import Settings
from sift.store.base import BatchStore
from sift.store.sqlite.store import DBWorker, SqliteBatchStore


async def open_store(settings: Settings, adb: DBWorker) -> BatchStore:
    """The PostgreSQL store when ``store.url`` is set (migrated, pool open), else the embedded
    SQLite store over ``adb`` (the node's ``AsyncDB``). Raises ``ConfigError`` when the
    database cannot be used."""
    if not settings.store.url:
        return SqliteBatchStore(adb)
    # Lazily: psycopg is loaded only by a node that is configured to use PostgreSQL.
    from sift.store.postgres.store import PgBatchStore

    return await PgBatchStore.open(settings.store)
