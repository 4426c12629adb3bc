"""The watch scheduler: claims due watches from the store and runs their checks.

One per node (built and started by ``sift.assembly`` for ``sift serve``). Every
``watch.tick_s`` (sooner when a watch is created here, or a check ends) it claims due
watches — at most the free slots of ``watch.concurrency``, at most ``watch.claim_batch`` —
and runs each check as a task:

- **Claims** (``WatchStore.claim_due_watches``), ``watch.claim_batch`` at a time when the
  claimed ones waiting for a slot run short: on PostgreSQL ``FOR UPDATE SKIP LOCKED``
  with a lease and a fencing token, so on several nodes each due check runs on exactly one;
  the claim moves the watch's next due time on by its interval in the same step, so a
  failed check (or a node that died mid-check) is tried again at the next interval, never
  in a burst. A claim that found fewer due watches than it asked for drained the backlog:
  the checks ending after it claim nothing more for ``watch.tick_s`` (a store round trip
  each, for nothing), unless a watch is created here or ``run_due`` is called.
- **Politeness**: a ``batch.politeness.HostGate`` per node (``batch.per_host`` checks at
  once per host, one until robots.txt gave its Crawl-delay, which then spaces the starts;
  a 429/503's Retry-After closes the host for that long). A check waits for its host
  inside its slot, so a slow host never takes more than its share.
- **The check** (``watch.check``) is ``Service.fetch`` as the watch's caller: egress
  policy, class limits, robots.txt, the same pipeline as ``/v1/fetch``.
- **Record** the event under the claim's token (``watch.events_kept`` per watch), then, on
  a change, hand it to the webhook outbox (``watch.notify.hand_over``), which never makes
  a check wait on a receiver.

Time: ``clock`` (unix seconds) and ``sleep`` are parameters; ``run_due()`` runs every check
due now to the end, for tests driving a fake clock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sift.batch.politeness import HostGate
from sift.config import Settings
from sift.errors import SiftError
from sift.jsonio import loads
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchStore
from sift.store.history import Conflict
from sift.store.hosts import host_key
from sift.store.watches import CHANGE_SUMMARIES, Watch, WatchEvent
from sift.watch.check import Checked, check_options, event_from, run_check
from sift.watch.notify import change_event, hand_over

log = logging.getLogger("sift.watch")

# A watch's URL never changes: its politeness key is worked out once, not at every check
# (``host_key`` validates the URL: measured at about a tenth of a check's CPU here).
_host_of = functools.lru_cache(maxsize=4096)(host_key)


class Scheduler:
    """Runs due watch checks on this node; ``start()``/``stop()`` in a server."""

    def __init__(
        self,
        settings: Settings,
        store: BatchStore,
        service: Service,
        *,
        principals: Mapping[str, Principal] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self._store = store
        self._watches = store.watches
        self._service = service
        self._principals = dict(principals or {})
        self._clock = clock
        self._sleep = sleep
        self._gate = HostGate(settings.batch.per_host)
        self._host_changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()  # checks fetching or recording
        # Of them, those holding a slot of watch.concurrency: a slot is given back when the
        # fetch ends, before the event is written (as the batch runner does).
        self._slots: set[asyncio.Task[None]] = set()
        # Claimed, waiting for a slot (at most watch.claim_batch; their leases hold them).
        self._ready: collections.deque[Watch] = collections.deque()
        self._wake = asyncio.Event()
        self._main: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Future[None] | None = None
        self._hurry = asyncio.Event()
        # When a claim last found fewer due watches than it asked for (None: not since the
        # last one that filled up, or a watch was created here).
        self._drained_at: float | None = None
        self.checks_done = 0  # checks recorded by this node (metrics, benchmarks)

    # -- control ------------------------------------------------------------------------------

    def notify(self) -> None:
        """A watch was created: look for due checks now."""
        self._drained_at = None
        self._wake.set()

    def start(self) -> None:
        if self._main is None:
            self._main = asyncio.create_task(self._loop(), name="sift-watch-scheduler")

    @property
    def active(self) -> int:
        """Checks running on this node now."""
        return len(self._tasks)

    async def stop(self, grace_s: float) -> None:
        """Claim nothing more; running checks get ``grace_s`` (or until ``hurry()``), the
        rest are cancelled, and claimed checks not started are dropped (their watches are
        checked at their next due time). Idempotent: a call while a stop runs waits for it."""
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop(grace_s))
        await asyncio.shield(self._stop_task)

    def hurry(self) -> None:
        """End the grace of a stop now (a second Ctrl-C)."""
        self._hurry.set()

    async def _stop(self, grace_s: float) -> None:
        if self._main is not None:
            self._main.cancel()
            await asyncio.gather(self._main, return_exceptions=True)
            self._main = None
        self._ready.clear()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            while (left := [t for t in self._tasks if not t.done()]) and not hurry.done():
                wait_s = deadline - loop.time()
                if wait_s <= 0:
                    break
                await asyncio.wait(
                    {*left, hurry}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            hurry.cancel()
        pending = [t for t in self._tasks if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def run_due(self) -> int:
        """Claim and run every check due at ``clock()`` until none is left; how many ran.
        For tests and benchmarks (the loop does the same, one tick at a time)."""
        self._drained_at = None
        total = 0
        while True:
            self._wake.clear()
            started = await self.claim_and_start()
            total += started
            if self._tasks:
                await self._wake.wait()  # a check ended (``_on_done``)
            elif not started and not self._ready:
                return total

    async def claim_and_start(self) -> int:
        """Start checks for the free slots of ``watch.concurrency``, claiming due watches
        ``watch.claim_batch`` at a time when the claimed ones run short (one store step per
        batch, not per check); how many started."""
        free = self.settings.watch.concurrency - len(self._slots)
        if free <= 0:
            return 0
        if not self._tasks and not self._ready:
            # Idle: drop what the gate knows of hosts with nothing pending (bounded memory;
            # a host checked again later reads its robots.txt rules, cached, once more).
            self._gate.forget_idle(self._clock())
        if len(self._ready) < free and not self._drained(now := self._clock()):
            batch = self.settings.watch.claim_batch
            claimed = await self._watches.claim_due_watches(now, batch, self.settings.watch.lease_s)
            self._drained_at = now if len(claimed) < batch else None
            self._ready.extend(claimed)
        started = 0
        while self._ready and started < free:
            watch = self._ready.popleft()
            task = asyncio.create_task(self._run(watch), name=f"watch-{watch.id}")
            self._tasks.add(task)
            self._slots.add(task)
            task.add_done_callback(self._on_done)
            started += 1
        return started

    def _drained(self, now: float) -> bool:
        """The last claim, less than ``watch.tick_s`` ago, left no due watch behind."""
        drained_at = self._drained_at
        return drained_at is not None and now < drained_at + self.settings.watch.tick_s

    def _on_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("watch check crashed", exc_info=exc)
        self._wake.set()

    # -- the loop -----------------------------------------------------------------------------

    async def _loop(self) -> None:
        if not self._store.shared:
            # A node of its own: nothing it leased before a restart is still running.
            with contextlib.suppress(SiftError):
                await self._watches.release_watch_leases()
        while True:
            self._wake.clear()
            try:
                started = await self.claim_and_start()
            except SiftError:
                log.exception("claiming due watches failed; retrying at the next tick")
                started = 0
            if started and len(self._slots) < self.settings.watch.concurrency:
                continue  # more may be due at once
            await self._wait(self.settings.watch.tick_s)

    async def _wait(self, delay_s: float) -> None:
        sleeper = asyncio.ensure_future(self._sleep(delay_s))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (sleeper, waker):
                fut.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    # -- one check ----------------------------------------------------------------------------

    def principal_of(self, watch: Watch) -> Principal:
        found = self._principals.get(watch.caller)
        if found is not None:
            return found
        return Principal(watch.caller, "fleet" if watch.caller_class == "fleet" else "restricted")

    async def _run(self, watch: Watch) -> None:
        host = _host_of(watch.url)
        principal = self.principal_of(watch)
        await self._enter(host)
        try:
            await self._probe(host, principal, watch)
            now = self._clock()
            checked = await run_check(self._service, principal, watch, now)
        finally:
            await self._leave(host)
            if (me := asyncio.current_task()) is not None:
                self._slots.discard(me)
            self._wake.set()  # a slot is free
        if checked.envelope is not None:
            self._back_off(host, checked.envelope, now)
        try:
            event = await self._write(watch, checked, now)
        except SiftError:
            log.exception("watch %s: recording a check failed", watch.id)
            return
        if event is not None:
            await self._after(watch, event, checked.envelope)

    async def _write(self, watch: Watch, checked: Checked, now: float) -> WatchEvent | None:
        """Write the check's event and its history snapshot in one transaction; the event
        as written, or None when nothing was (the watch was deleted, or claimed again
        after its lease ran out). When another writer moved the watch's history on (another
        node), the check is compared again with the latest it left."""
        keep, tracker = self.settings.watch.events_kept, self._service.changes
        event, pending = checked.event, checked.pending
        while pending is not None:
            written = await self._watches.record_check_and_history(
                event, watch.token, keep, pending.write
            )
            if written is None:
                return None
            if not isinstance(written, Conflict):
                tracker.written(pending, written)
                return event
            change, pending = await tracker.again(pending, written)
            assert checked.envelope is not None  # a fetch that raised writes no history
            event = event_from(watch, now, {**checked.envelope, "change": change})
        kept = await self._watches.record_check(event, watch.token, keep)
        return event if kept else None

    async def _after(
        self, watch: Watch, event: WatchEvent, envelope: dict[str, Any] | None
    ) -> None:
        """A check is recorded: count it and, on a change, queue its webhook."""
        self.checks_done += 1
        if not watch.webhook or envelope is None or event.change is None:
            return  # no webhook to queue (``hand_over`` would queue nothing)
        change = loads(event.change)
        if change.get("status") in CHANGE_SUMMARIES:
            fetched_at = envelope.get("fetched_at", event.checked_at)
            try:
                await hand_over(self._store, watch, change_event(watch, change, fetched_at))
            except SiftError:
                log.exception("watch %s: queueing its webhook failed", watch.id)

    # -- politeness ---------------------------------------------------------------------------

    async def _enter(self, host: str) -> None:
        """Wait until ``host`` may take one more check, then count it started."""
        now = self._clock()
        if self._gate.is_open(host, now):  # the common case, with no await in between
            self._gate.started(host, now)
            return
        async with self._host_changed:
            while True:
                now = self._clock()
                if self._gate.is_open(host, now):
                    self._gate.started(host, now)
                    return
                opens_at = self._gate.next_open_at({host}, now)
                timeout = None if opens_at is None else max(opens_at - now, 0.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._host_changed.wait(), timeout)

    async def _leave(self, host: str) -> None:
        async with self._host_changed:
            self._gate.finished(host)
            self._host_changed.notify_all()

    async def _probe(self, host: str, principal: Principal, watch: Watch) -> None:
        """The first check of a host reads robots.txt for its Crawl-delay (as batch does)."""
        if self._gate.probed(host):
            return
        delay: float | None = None
        started_at = self._clock()
        if check_options(watch).robots:
            try:
                delay = await self._service.robots_checker(principal).crawl_delay(watch.url)
            except SiftError:
                delay = None  # the fetch reports what is wrong with this host
        async with self._host_changed:
            self._gate.learn_crawl_delay(host, delay, started_at)
            self._host_changed.notify_all()

    def _back_off(self, host: str, envelope: Mapping[str, Any], now: float) -> None:
        """A 429/503 with Retry-After closes the host for that long."""
        retry_after = envelope.get("retry_after")
        if envelope.get("status") in (429, 503) and isinstance(retry_after, int | float):
            self._gate.back_off(host, now + float(retry_after))
