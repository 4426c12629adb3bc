"""``outbox_of(store)``: the webhook outbox (``sift.store.webhooks``) of a batch store's
database — the one place that picks its backend."""

from __future__ import annotations

from sift.store.base import BatchStore
from sift.store.webhooks import Outbox


def outbox_of(store: BatchStore) -> Outbox:
    """The webhook tables of ``store``'s database (the node's SQLite or the shared
    PostgreSQL). Cheap: build one wherever it is needed."""
    if store.backend == "sqlite":
        from sift.store.sqlite.store import SqliteBatchStore
        from sift.store.sqlite.webhooks import SqliteOutbox

        assert isinstance(store, SqliteBatchStore)
        return SqliteOutbox(store.adb)
    from sift.store.postgres.store import PgBatchStore
    from sift.store.postgres.webhooks import PgOutbox

    assert isinstance(store, PgBatchStore)
    return PgOutbox(store.conn)
