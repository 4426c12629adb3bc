"""Which change history a node uses: the one beside its batch store."""

from __future__ import annotations

from sift.config import Settings
from sift.store.base import BatchStore
from sift.store.history import HistoryStore
from sift.store.sqlite.historystore import SqliteHistory
from sift.store.sqlite.store import DBWorker


def history_for(settings: Settings, adb: DBWorker, store: BatchStore | None) -> HistoryStore | None:
    """The node's SQLite history when no ``store.url`` is set; else the PostgreSQL store's
    (shared by every node), or None when that store was not opened (``changes`` fetches are
    then refused rather than kept apart from the other nodes')."""
    if not settings.store.url:
        return SqliteHistory(adb)
    if store is None or store.backend != "postgres":
        return None
    # Lazily: psycopg is loaded only by a node that is configured to use PostgreSQL.
    from sift.store.postgres.store import PgBatchStore

    return store.history if isinstance(store, PgBatchStore) else None
