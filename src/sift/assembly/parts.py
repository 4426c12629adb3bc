"""``assemble``: every part of a running sift, started in order and closed in reverse.

Start: the database (its worker thread), the batch store, the render pool, the fetcher's
connection pools, the browser front, the service; the webhook deliverer, when asked
(``sift serve``); then, for a command that runs jobs, the runner and ``BatchJobs`` over the
store (jobs a previous run left in flight in a store of its own are reconciled first); then,
when asked, ``Watches`` and its scheduler, started. Close, however the block ends: the watch
scheduler and the runner (running checks and targets get ``batch.shutdown_grace_s``), the
deliverer (attempts in flight are released), the service (its pending counters are written),
the browser, the fetcher, the render pool, the store, and the database last (queued writes
finish first).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sift.assembly.builders import build_browser, build_fetcher, build_render_pool
from sift.config import Settings

if TYPE_CHECKING:
    from sift.batch.jobs import BatchJobs
    from sift.batch.runner import Runner
    from sift.browser import Browser
    from sift.dcache import DB, AsyncDB
    from sift.fetch import Fetcher
    from sift.metrics import Metrics
    from sift.principal import Principal
    from sift.service import Service
    from sift.store import BatchStore
    from sift.store.history import HistoryStore
    from sift.watch.watches import Watches
    from sift.webhooks.deliverer import Deliverer
    from sift.workers import RenderPool


@dataclass(frozen=True)
class Parts:
    """A running sift's parts. ``store`` is there when asked for (or jobs are); ``runner``
    and ``jobs`` only for a command that runs jobs (the runner is built, not started)."""

    settings: Settings
    adb: AsyncDB
    render_pool: RenderPool
    fetcher: Fetcher
    browser: Browser | None
    service: Service
    store: BatchStore | None = None
    runner: Runner | None = None
    jobs: BatchJobs | None = None
    deliverer: Deliverer | None = None
    watches: Watches | None = None


@asynccontextmanager
async def assemble(
    settings: Settings,
    *,
    db: DB | None = None,
    fetcher: Fetcher | None = None,
    render_pool: RenderPool | None = None,
    start_pool: bool = True,
    browser: Browser | None = None,
    with_browser: bool = True,
    metrics: Metrics | None = None,
    store: bool = False,
    principals: Mapping[str, Principal] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    reconcile: bool = True,
    webhooks: bool = False,
    watches: bool = False,
) -> AsyncIterator[Parts]:
    """Start a sift's parts from ``settings``; yields ``Parts``; closes them all on exit.

    Each part may be handed in instead of built (it is then owned and closed here too):
    ``db`` an opened database (default: open ``settings.db_path``), ``fetcher`` (default
    ``build_fetcher``), ``render_pool`` (default ``build_render_pool``; ``start_pool=False``
    leaves it to start on first use), ``browser`` (default ``build_browser``; none with
    ``with_browser=False``). ``store=True`` opens the batch store; ``principals`` (who
    may own jobs the runner runs) also builds the runner and ``BatchJobs``, after the
    restart reconciliation — unless ``reconcile=False``: the live jobs were handed over by
    the previous owner of the data directory, to be run, not failed (``sift mcp``).
    ``webhooks=True`` (with the store) also starts the webhook deliverer.
    ``watches=True`` (implies the store) builds ``Watches`` and starts its scheduler
    (``[watch] enabled``), stopped on exit before the service closes. ``clock`` (unix
    seconds) and ``sleep`` reach the service, the runner and the scheduler: tests pass a
    fake pair.
    """
    from sift.service import Service

    async with AsyncExitStack() as stack:
        adb = await _open_db(settings, db)
        stack.push_async_callback(adb.close)
        batch_store = (
            await _open_store(settings, adb, stack)
            if store or watches or principals is not None
            else None
        )
        pool = render_pool if render_pool is not None else build_render_pool(settings)
        stack.callback(pool.close)
        if start_pool:
            pool.start()
        fetcher = fetcher if fetcher is not None else build_fetcher(settings)
        await fetcher.start()
        stack.push_async_callback(fetcher.close)
        if browser is None and with_browser:
            browser = build_browser(settings, fetcher)
        if browser is not None:
            stack.push_async_callback(browser.close)
        service = Service(
            settings,
            adb,
            fetcher,
            render_pool=pool,
            metrics=metrics,
            browser=browser,
            clock=clock,
            history=_history(settings, adb, batch_store),
        )
        stack.push_async_callback(service.close)
        parts = Parts(settings, adb, pool, fetcher, browser, service, batch_store)
        if webhooks and batch_store is not None:
            parts = _with_deliverer(parts, batch_store, principals, stack, clock)
        if principals is not None:
            assert batch_store is not None
            parts = await _with_jobs(parts, batch_store, principals, stack, clock, sleep, reconcile)
        if watches:
            assert batch_store is not None
            parts = _with_watches(parts, batch_store, principals, stack, clock, sleep)
        yield parts


async def _open_db(settings: Settings, db: DB | None) -> AsyncDB:
    """The node's database: ``db`` as given, else ``settings.db_path`` opened."""
    from sift.dcache import AsyncDB

    if db is not None:
        return AsyncDB(db)
    return await AsyncDB.open(
        settings.db_path,
        max_bytes=settings.cache.max_bytes,
        robots_max_bytes=settings.cache.robots_max_bytes,
    )


def _with_deliverer(
    parts: Parts,
    store: BatchStore,
    principals: Mapping[str, Principal] | None,
    stack: AsyncExitStack,
    clock: Callable[[], float],
) -> Parts:
    """``parts`` with the webhook deliverer over ``store``'s outbox, started (stopped on
    exit, before the service and the fetcher it sends through)."""
    from dataclasses import replace

    from sift.principal import OPERATOR
    from sift.store.outbox import outbox_of
    from sift.webhooks.deliverer import Deliverer

    deliverer = Deliverer(
        parts.settings,
        outbox_of(store),
        parts.fetcher,
        parts.service.policy_for,
        principals={OPERATOR.name: OPERATOR, **(principals or {})},
        clock=clock,
    )
    deliverer.start()
    stack.push_async_callback(deliverer.stop)
    return replace(parts, deliverer=deliverer)


def _history(settings: Settings, adb: AsyncDB, store: BatchStore | None) -> HistoryStore | None:
    """The change history beside the batch store (store/historyopen.py)."""
    from sift.store.historyopen import history_for

    return history_for(settings, adb, store)


async def _open_store(settings: Settings, adb: AsyncDB, stack: AsyncExitStack) -> BatchStore:
    from sift.store.open import open_store

    store = await open_store(settings, adb)
    stack.push_async_callback(store.close)
    return store


def _with_watches(
    parts: Parts,
    store: BatchStore,
    principals: Mapping[str, Principal] | None,
    stack: AsyncExitStack,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
) -> Parts:
    """``parts`` with ``Watches``; its scheduler started (stopped on exit, its running
    checks given ``batch.shutdown_grace_s``)."""
    from dataclasses import replace

    from sift.assembly.watching import make_watches
    from sift.principal import OPERATOR

    # Watches the local operator creates through the server run as the operator (as batch).
    who = principals if principals is not None else {OPERATOR.name: OPERATOR}
    watches = make_watches(
        parts.settings, store, parts.service, principals=who, clock=clock, sleep=sleep
    )
    if watches.scheduler is not None:
        watches.scheduler.start()
        stack.push_async_callback(watches.scheduler.stop, parts.settings.batch.shutdown_grace_s)
    return replace(parts, watches=watches)


async def _with_jobs(
    parts: Parts,
    store: BatchStore,
    principals: Mapping[str, Principal],
    stack: AsyncExitStack,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
    reconcile_first: bool,
) -> Parts:
    """``parts`` with the runner (not started; stopped on exit) and ``BatchJobs``, after
    failing the jobs a previous run left in flight in a store no other node shares."""
    from dataclasses import replace

    from sift.assembly.runner import make_runner
    from sift.batch.jobs import BatchJobs
    from sift.batch.runner import reconcile

    settings = parts.settings
    if reconcile_first and not store.shared:
        await reconcile(store, int(clock()))
    runner = make_runner(
        settings, store, parts.service, principals=principals, clock=clock, sleep=sleep
    )
    stack.push_async_callback(runner.stop, settings.batch.shutdown_grace_s)
    return replace(parts, runner=runner, jobs=BatchJobs(settings, store, runner))
