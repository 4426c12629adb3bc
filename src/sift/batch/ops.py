"""Operator commands over the batch store: ``sift batch reconcile`` and cluster counts for
``sift stats``.

``reconcile`` is rule 7's restart reconciliation run by hand: every queued or running job
becomes failed (its unfinished targets too). The embedded store does this itself at every
start; a PostgreSQL store shared by several nodes never does (a node starting must not fail
jobs the others are working on), so after restoring a backup, or to abandon everything in
flight, an operator runs it once — with every node stopped, or their work is fenced out.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

from sift.config import Settings

RECONCILE_REASON: Final = "interrupted: an operator reconciled the batch store; resubmit the job"


async def _with_pg(settings: Settings) -> Any:
    from sift.store.postgres.store import PgBatchStore

    return await PgBatchStore.open(settings.store)


def reconcile_store(settings: Settings) -> int:
    """Fail every live job of the configured store; how many."""

    async def run() -> int:
        if settings.store.url:
            store = await _with_pg(settings)
            try:
                n: int = await store.mark_in_flight_failed(
                    RECONCILE_REASON, int(time.time()), targets_status="failed"
                )
                return n
            finally:
                await store.close()
        from sift.dcache import DB

        db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
        try:
            return db.mark_in_flight_failed(
                RECONCILE_REASON, int(time.time()), targets_status="failed"
            )
        finally:
            db.close()

    return asyncio.run(run())


def cluster_stats(settings: Settings) -> dict[str, int]:
    """``batch_jobs``, ``batch_bytes`` and the cluster counts of the PostgreSQL store."""

    async def run() -> dict[str, int]:
        store = await _with_pg(settings)
        try:
            stats: dict[str, int] = await store.batch_stats()
            counts: dict[str, int] = await store.work.cluster_counts()
            return {
                "batch_jobs": stats["batch_jobs"],
                "batch_bytes": stats["batch_bytes"],
                **counts,
            }
        finally:
            await store.close()

    return asyncio.run(run())
