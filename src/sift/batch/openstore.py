"""``make_runner``: the runner a store calls for (``open_store`` is ``sift.store.open``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sift.batch.runner import BatchRunner
from sift.config import Settings
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchStore

if TYPE_CHECKING:
    from sift.batch.cluster import ClusterRunner


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
        from sift.store.postgres.store import PgBatchStore

        assert isinstance(store, PgBatchStore)
        return ClusterRunner(settings, store, service, principals=principals)
    return BatchRunner(settings, store, service, principals=principals)
