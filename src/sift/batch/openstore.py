"""Choose and open the batch store from the settings: ``[store] url`` or the embedded one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sift.batch.runner import BatchRunner
from sift.batch.sqlitestore import SqliteBatchStore
from sift.batch.store import BatchStore
from sift.config import Settings
from sift.dcache import AsyncDB
from sift.principal import Principal
from sift.service import Service

if TYPE_CHECKING:
    from sift.batch.cluster import ClusterRunner


async def open_store(settings: Settings, adb: AsyncDB) -> BatchStore:
    """The PostgreSQL store when ``store.url`` is set (migrated, pool open), else the embedded
    SQLite store over ``adb``. Raises ``ConfigError`` when the database cannot be used."""
    if not settings.store.url:
        return SqliteBatchStore(adb)
    from sift.batch.pgstore import PgBatchStore

    return await PgBatchStore.open(settings.store)


def make_runner(
    settings: Settings,
    store: BatchStore,
    service: Service,
    *,
    principals: Mapping[str, Principal] | None = None,
) -> BatchRunner | ClusterRunner:
    """The embedded runner for a store of its own, the claiming runner for a shared one."""
    if store.shared:
        from sift.batch.cluster import ClusterRunner
        from sift.batch.pgstore import PgBatchStore

        assert isinstance(store, PgBatchStore)
        return ClusterRunner(settings, store, service, principals=principals)
    return BatchRunner(settings, store, service, principals=principals)
