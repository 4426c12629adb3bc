"""Build the batch runner for a store: its work source by the store's backend, and the hooks
of the job kinds that grow (the crawl's).

This sits above both ``sift.batch`` and ``sift.crawl``, so it may import both: the runner
never imports the crawl, the crawl plugs into it here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sift.batch.local import LocalQueue
from sift.batch.runner import Runner
from sift.batch.source import WorkSource
from sift.config import Settings
from sift.crawl.crawler import Crawler
from sift.crawl.hook import KIND, CrawlHook
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchStore


def make_runner(
    settings: Settings,
    store: BatchStore,
    service: Service,
    *,
    principals: Mapping[str, Principal] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Runner:
    """The local queue for a store of its own, claims for a shared one; crawls plug in.

    ``principals``: the principal a caller's jobs run as (else ``Principal(caller,
    caller_class)``). ``clock`` and ``sleep``: injectable for tests (fake time)."""
    source: WorkSource[Any]
    if store.shared:
        from sift.batch.claims import Claims
        from sift.store.postgres.store import PgBatchStore

        assert isinstance(store, PgBatchStore)
        source = Claims(settings, store, principals=principals, clock=clock)
    else:
        source = LocalQueue(settings, store, principals=principals, clock=clock)
    # The crawl's CPU work runs in the render workers the assembly built (``crawl.offloop``).
    hooks = {KIND: CrawlHook(Crawler(store, service, clock, pool=service.render_pool))}
    return Runner(settings, store, service, source, hooks=hooks, clock=clock, sleep=sleep)
