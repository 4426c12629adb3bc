"""The batch runner: an asyncio worker pool calling ``Service.fetch`` for the targets a work
source hands it.

One runner, two sources of work (``batch.source``): the embedded store's queue in memory
(``batch.local.LocalQueue``: round robin over callers, FIFO within a job, per-host
politeness) or claims on a PostgreSQL store shared by several nodes (``batch.claims.Claims``:
leases, fencing tokens, a host gate in the database). ``sift.assembly.runner.make_runner``
picks the source by the store's backend. What a target goes through is the same either way
and lives here:

- **Fetch** through ``Service.fetch`` — the same cache and single flight as ``/v1/fetch``.
  The first target of a host whose robots.txt has not been read asks it for its
  ``Crawl-delay`` first and tells the source, which spaces the host's next starts by it.
- **Retry** a 429/503 answer (fresh, not from the cache) after the host's Retry-After, or an
  exponential backoff, up to ``max_attempts`` attempts; the last answer is the result.
- **Hooks**: for a job of a kind with a hook (``batch.hooks``; a crawl's, registered by the
  assembly), the hook sees every fetched page after the fetch slot is given back and before
  the outcome is written — a crawl appends the page's links there. The runner never imports
  what a hook does.
- **Outcome**: result = the envelope, or error = ``"<code>: <message>"`` and hint; the
  source writes it (and the job's final status when it was the last target).

Lifecycle: ``start()``/``stop(grace_s)`` in a server, ``run_until_idle()`` in tests and the
CLI; ``notify()`` after a submission, ``abandon(job_id)`` before a cancellation is written
(nothing the runner writes can land after it), ``running(job_id)`` for the status views,
``sweep()`` of expired jobs every ``batch.sweep_interval_s``. Shutdown stops starting
targets, gives running ones ``grace_s``, cancels the rest and lets the source record what it
can (the local queue finishes the jobs that completed; claims are released).

Time: ``clock`` (unix seconds) and ``sleep`` are injectable. ``run_until_idle()`` runs until
no job is left and, over the local queue, uses ``sleep`` only when every remaining target
waits for a host's backoff, so a test that passes a fake clock and sleep never waits.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from sift.batch.hooks import Fetched, Hooks
from sift.batch.source import Work, WorkSource
from sift.config import Settings
from sift.errors import SiftError
from sift.jsonio import dumps, loads
from sift.options import parse_options
from sift.service import Service
from sift.store import BatchStore
from sift.store.views import RESTART_REASON, error_text

log = logging.getLogger("sift.batch")

RETRY_STATUSES: Final = frozenset({429, 503})


async def reconcile(store: BatchStore, now: int) -> int:
    """Restart reconciliation, before the runner starts: every queued or running job becomes
    failed with ``RESTART_REASON``, and so do its unfinished targets. Returns the job count."""
    return await store.mark_in_flight_failed(RESTART_REASON, now, targets_status="failed")


class Runner:
    """One per process, over one store and one work source. ``start()``/``stop()`` in a
    server; ``run_until_idle()`` in tests and the CLI."""

    def __init__(
        self,
        settings: Settings,
        store: BatchStore,
        service: Service,
        source: WorkSource[Any],
        *,
        hooks: Hooks | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_attempts: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 300.0,
    ) -> None:
        self.settings = settings
        self._store = store
        self._service = service
        self._source = source
        self._hooks = dict(hooks or {})
        self._clock = clock
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._tasks: set[asyncio.Task[None]] = set()  # targets fetching or writing
        self._wake = asyncio.Event()
        self._stopping = False
        self._main: asyncio.Task[None] | None = None
        self._upkeep: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Future[None] | None = None
        self._hurry = asyncio.Event()
        source.bind(self)

    # -- control ------------------------------------------------------------------------------

    def notify(self) -> None:
        """A job was submitted: look for it at the next turn."""
        self._source.notify()
        self._wake.set()

    def running(self, job_id: str) -> frozenset[int]:
        """The idx of ``job_id``'s targets being fetched here that the store still shows
        pending (the local queue writes no "running"; a claimed target is running there)."""
        return self._source.running(job_id)

    def abandon(self, job_id: str) -> None:
        """Forget ``job_id`` now: no target of it starts again, its running targets are
        cancelled and nothing more is written for it. The caller then records the reason."""
        self._source.abandon(job_id)

    def start(self) -> None:
        """Run the drive loop and the upkeep (sweep) timer in the background until ``stop``."""
        if self._main is None:
            main, upkeep = self._source.task_names
            self._main = asyncio.create_task(self._drive(until_idle=False), name=main)
            self._upkeep = asyncio.create_task(self._upkeep_loop(), name=upkeep)

    @property
    def active(self) -> int:
        """How many targets are being fetched (or written) right now."""
        return len(self._tasks)

    async def stop(self, grace_s: float) -> None:
        """Stop starting targets, let running ones finish for ``grace_s`` (or until
        ``hurry()``), cancel the rest, and let the source record what it can (see the module
        docstring). Idempotent; a call while a stop runs waits for that one instead."""
        if self._stop_task is not None and not self._stop_task.done():
            await asyncio.shield(self._stop_task)
            return
        self._stop_task = asyncio.ensure_future(self._stop(grace_s))
        await self._stop_task

    def hurry(self) -> None:
        """End the grace period of a stop now (a second Ctrl-C): what still runs is
        cancelled and recorded as at the end of the grace."""
        self._hurry.set()

    async def _stop(self, grace_s: float) -> None:
        # 1. No new targets, no more upkeep.
        self._stopping = True
        self._wake.set()
        for task in (self._main, self._upkeep):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        # 2. The grace period for what is running; then cancel what is left.
        if self._tasks:
            pending = await self._grace(grace_s)
            self._source.interrupted(pending)  # noted before: a cancelled task is forgotten
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        # 3. What can still be recorded.
        await self._source.stopped()

    async def _grace(self, grace_s: float) -> set[asyncio.Task[None]]:
        """Wait for the running targets until ``grace_s`` has passed or ``hurry()`` was
        called; returns the ones still running."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        pending: set[asyncio.Future[Any]] = set(self._tasks)
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            while pending and not hurry.done() and (left := deadline - loop.time()) > 0:
                _, pending = await asyncio.wait(
                    pending | {hurry}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(hurry)
        finally:
            hurry.cancel()
        return {t for t in self._tasks if not t.done()}

    async def run_until_idle(self) -> None:
        """Run until no live job and no target is left (for tests and the CLI)."""
        self._stopping = False
        await self._drive(until_idle=True)

    async def sweep(self, now: int | None = None) -> int:
        """``sweep_batch(now, batch.ttl_s)``: delete expired jobs; returns how many."""
        when = int(self._clock()) if now is None else now
        return await self._store.sweep_batch(when, self.settings.batch.ttl_s)

    @property
    def service(self) -> Service:
        """The service this runner fetches through (submissions check URLs against it)."""
        return self._service

    # -- metrics ------------------------------------------------------------------------------

    @property
    def claim_seconds(self) -> list[float]:
        """Claim latencies since the last read (PostgreSQL claims; the metrics clear it)."""
        return self._source.claim_seconds

    @property
    def leases_lost(self) -> int:
        """Fetches stopped because their lease was gone (PostgreSQL claims)."""
        return self._source.leases_lost

    # -- the source's driver ------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping

    def wake(self) -> None:
        self._wake.set()

    def start_work(self, work: Work) -> asyncio.Task[None]:
        task = asyncio.create_task(self._run(work), name=f"batch-{work.job_id}-{work.idx}")
        self._tasks.add(task)
        self._source.started(work, task)
        task.add_done_callback(functools.partial(self._on_done, work))
        return task

    def _on_done(self, work: Work, task: asyncio.Task[None]) -> None:
        # Bookkeeping lives here, not in the task: a task cancelled before its first step
        # never runs its own finally block.
        self._tasks.discard(task)
        self._source.ended(work, task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("batch target %s/%d crashed", work.job_id, work.idx, exc_info=exc)
        self._wake.set()

    # -- the loops ----------------------------------------------------------------------------

    async def _drive(self, until_idle: bool) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                again = await self._source.turn(until_idle)
            except SiftError:
                if until_idle:
                    raise
                log.exception("%s failed; retrying in 1 s", self._source.turn_name)
                await self._sleep(1.0)
                continue
            if again:
                continue
            if until_idle and not self._tasks and await self._source.idle():
                return
            await self._wait(self._source.wait_s(self._clock()))

    async def _wait(self, delay_s: float | None) -> None:
        if delay_s is None:
            await self._wake.wait()
            return
        sleeper = asyncio.ensure_future(self._sleep(delay_s))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (sleeper, waker):
                fut.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    async def _upkeep_loop(self) -> None:
        """The source's upkeep every ``upkeep_s`` (if it has any), and the sweep of expired
        jobs every ``batch.sweep_interval_s``."""
        every_s = self._source.upkeep_s
        if every_s is None:
            await self._sweep_loop()
            return
        next_sweep = self._clock() + self.settings.batch.sweep_interval_s
        while True:
            await self._sleep(every_s)
            try:
                await self._source.upkeep()
                if self._clock() >= next_sweep:
                    next_sweep = self._clock() + self.settings.batch.sweep_interval_s
                    await self._sweep_logged()
            except SiftError:
                log.exception("batch upkeep failed")

    async def _sweep_loop(self) -> None:
        while True:
            await self._sleep(self.settings.batch.sweep_interval_s)
            try:
                await self._sweep_logged()
            except SiftError:
                log.exception("batch sweep failed")

    async def _sweep_logged(self) -> None:
        swept = await self.sweep()
        if swept:
            log.info("swept %d expired batch jobs", swept)

    # -- one target ---------------------------------------------------------------------------

    async def _run(self, work: Work) -> None:
        source = self._source
        if not await source.begin(work):
            return
        try:
            envelope = await self._fetch(work)
        except SiftError as exc:
            _raise_if_cancelling()
            source.release(work)
            await source.record(work, "failed", None, error_text(exc), exc.hint)
            return
        except Exception:
            _raise_if_cancelling()
            # A bug in sift, not in the target: record it as such and keep the job going.
            log.exception("batch target %s/%d failed inside sift", work.job_id, work.idx)
            source.release(work)
            err = SiftError("sift failed while fetching this target")
            await source.record(work, "failed", None, error_text(err), err.hint)
            return
        source.release(work)
        if envelope.get("status") in RETRY_STATUSES and work.attempt + 1 < self._max_attempts:
            now = self._clock()
            await source.retry_later(work, self._retry_delay(envelope, work.attempt, now), now)
            return
        if self._hooks:
            await self._after_fetch(work, envelope)
        _raise_if_cancelling()
        await source.record(work, "done", dumps(envelope).decode(), None, None)

    async def _fetch(self, work: Work) -> dict[str, Any]:
        opts = parse_options({**loads(work.options), "url": work.url})
        if work.attempt:
            opts = replace(opts, max_age_s=0)  # the cached copy is the 429/503 answer
        if opts.robots and not self._source.probed(work):
            delay: float | None = None
            try:
                delay = await self._service.robots_checker(work.principal).crawl_delay(opts.url)
            except SiftError:
                delay = None  # the fetch below reports what is wrong with this host
            await self._source.learn_crawl_delay(work, delay)
            self._wake.set()  # the host may take more targets now
        return await self._service.fetch(work.principal, opts)

    def _retry_delay(self, envelope: Mapping[str, Any], attempt: int, now: float) -> float:
        """Seconds to wait before asking the host again: its Retry-After (counted from when
        the answer was fetched), else ``backoff_s * 2**attempt``; at most ``max_backoff_s``."""
        retry_after = envelope.get("retry_after")
        if isinstance(retry_after, int | float):
            wait = float(envelope.get("fetched_at", now)) + float(retry_after) - now
        else:
            wait = self._backoff_s * (2**attempt)
        return min(max(wait, 0.0), self._max_backoff_s)

    async def _after_fetch(self, work: Work, envelope: dict[str, Any]) -> None:
        """The hook of the job's kind, if it has one (a crawl appends the page's links).
        A failing hook is logged; the page is recorded all the same."""
        kind = "job"
        try:
            job = await self._source.job_of(work)
            if job is None or job[0] not in self._hooks:
                return
            kind, spec = job
            depth = await self._source.depth(work)
            if depth is None:
                return
            page = Fetched(work.job_id, spec, work.principal, work.idx, depth, work.url, envelope)
            added = await self._hooks[kind].after_fetch(page)
        except SiftError:
            log.exception("%s %s: discovery from target %d failed", kind, work.job_id, work.idx)
            return
        if added:
            self._source.grew(work)


def _raise_if_cancelling() -> None:
    """A cancel that lands inside a store call can come back as that call's error (the
    driver ends the query and reports it failed): it is still a cancel — the lease was lost,
    the job cancelled, or sift is stopping — so nothing is written for this target."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
