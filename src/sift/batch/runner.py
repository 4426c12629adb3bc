"""The batch runner: an asyncio worker pool over the batch store, calling ``Service.fetch``.

Scheduling. Queued jobs are admitted from the store (``queued_jobs``, oldest first) when a
submission calls ``notify()``. Each free slot of ``batch.concurrency`` goes to the next
caller in a round robin over the callers that have work, and within one caller to its
oldest job first (FIFO): one caller's 10,000-target job never starves another caller's
10-target job. A target starts only when its host is open (``HostGate``: ``batch.per_host``,
robots.txt ``Crawl-delay``, ``Retry-After``/backoff after a 429 or 503); targets of a closed
host wait while targets of other hosts go ahead.

Each target runs through ``Service.fetch`` — the same cache and single flight as
``/v1/fetch`` — and its outcome is written as soon as it is known (``update_batch_target``:
result = the envelope, or error = ``"<code>: <message>"`` and hint), followed by
``evict_batch_oldest(batch.max_bytes, caller=…)`` (that caller's own finished jobs go
first). A 429/503 answer is retried (fresh, not from the cache) after the host's
Retry-After, or an exponential backoff, up to ``max_attempts`` attempts; the last answer
is the result. When every target of a job has an outcome the job becomes ``done`` (all
succeeded), ``partial`` or ``failed`` (all failed).

Cancel (``abandon``) drops a job from memory and cancels its running targets before the API
writes the cancellation, so nothing the runner writes can land after it. Shutdown (``stop``)
stops starting targets, gives running ones ``grace_s``, cancels the rest and leaves them
``running`` in the store, for ``reconcile`` (``mark_in_flight_failed``) at the next start.

Time: ``clock`` (unix seconds) and ``sleep`` are injectable. ``run_until_idle()`` runs until
no job is left and uses ``sleep`` only when every remaining target waits for a host's
backoff, so a test that passes a fake clock and sleep never waits.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from sift.batch.politeness import HostGate, host_key
from sift.config import Settings
from sift.crawl.crawler import Crawler
from sift.crawl.spec import CrawlSpec
from sift.errors import NotFound, SiftError
from sift.jsonio import dumps, loads
from sift.options import parse_options
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchStore
from sift.store.views import RESTART_REASON, error_text

log = logging.getLogger("sift.batch")

# Targets read from the store per job at a time, and how far the scheduler looks down one
# job's queue for a target whose host is open.
LOAD_CHUNK: Final = 256
SCAN_LIMIT: Final = 128
RETRY_STATUSES: Final = frozenset({429, 503})
# Hosts remembered before idle ones are forgotten (bounds memory over many one-off hosts).
MAX_REMEMBERED_HOSTS: Final = 10_000


async def reconcile(store: BatchStore, now: int) -> int:
    """Restart reconciliation, before the runner starts: every queued or running job becomes
    failed with ``RESTART_REASON``, and so do its unfinished targets. Returns the job count."""
    return await store.mark_in_flight_failed(RESTART_REASON, now, targets_status="failed")


@dataclass(slots=True)
class _Target:
    idx: int
    url: str
    options: str
    host: str
    attempt: int = 0
    depth: int = 0  # a crawl target's link depth


@dataclass(slots=True, eq=False)
class _Job:
    id: str
    caller: str
    principal: Principal
    buffer: deque[_Target] = field(default_factory=deque)
    next_idx: int = 0  # the first idx not yet read from the store
    exhausted: bool = False  # every target has been read
    in_flight: int = 0
    started: bool = False  # the job's status has been written as running
    interrupted: bool = False  # shutdown cancelled one of its targets: it cannot finish here
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    crawl: CrawlSpec | None = None  # a crawl job's parameters: it grows as pages are fetched
    grown: int = 0  # appends so far: a store read started before one may have missed it
    # Targets being fetched now. They stay "pending" in the store (one write per target
    # less); the status and results views show them as running from here.
    running: set[int] = field(default_factory=set)

    @property
    def finished(self) -> bool:
        return self.exhausted and not self.buffer and self.in_flight == 0 and not self.interrupted


@dataclass(slots=True, eq=False)
class _Slot:
    """One of the ``batch.concurrency`` fetch slots, held by one target until its fetch
    ends (the outcome is written after the slot is given back)."""

    job: _Job
    target: _Target
    released: bool = False


class BatchRunner:
    """One per process. ``start()``/``stop()`` in a server; ``run_until_idle()`` in tests.

    ``principals`` maps a caller name to the principal its jobs run as (the in-process CLI
    runs as the operator); any other job runs as ``Principal(caller, caller_class)``.
    """

    def __init__(
        self,
        settings: Settings,
        store: BatchStore,
        service: Service,
        *,
        principals: Mapping[str, Principal] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_attempts: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 300.0,
    ) -> None:
        self.settings = settings
        self._store = store
        self._service = service
        self._principals = dict(principals or {})
        self._clock = clock
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._concurrency = settings.batch.concurrency
        self._gate = HostGate(settings.batch.per_host)
        self._crawler = Crawler(store, service, clock)
        self._jobs: dict[str, _Job] = {}
        self._by_caller: dict[str, deque[_Job]] = {}
        self._rotation: deque[str] = deque()  # callers with jobs; the next served at the left
        self._tasks: set[asyncio.Task[None]] = set()  # targets fetching or writing
        self._busy = 0  # slots held (targets fetching)
        self._abandoned: set[str] = set()
        self._wake = asyncio.Event()
        self._admit_needed = True
        self._stopping = False
        self._main: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None

    # -- control ----------------------------------------------------------------------------

    def notify(self) -> None:
        """A job was submitted: look for queued jobs at the next turn."""
        self._admit_needed = True
        self._wake.set()

    def running(self, job_id: str) -> frozenset[int]:
        """The idx of ``job_id``'s targets being fetched right now (in the store they are
        still pending: every one of them is a pending target there)."""
        job = self._jobs.get(job_id)
        return frozenset(job.running) if job is not None else frozenset()

    def abandon(self, job_id: str) -> None:
        """Forget ``job_id`` now: no target of it starts again, its running targets are
        cancelled and nothing more is written for it. The caller then records the reason."""
        self._abandoned.add(job_id)
        job = self._jobs.pop(job_id, None)
        if job is not None:
            queue = self._by_caller.get(job.caller)
            if queue is not None and job in queue:
                queue.remove(job)
                if not queue:
                    del self._by_caller[job.caller]
                    self._rotation.remove(job.caller)
            for task in list(job.tasks):
                task.cancel()
        self._wake.set()

    def start(self) -> None:
        """Run the scheduler and the sweep timer in the background until ``stop``."""
        if self._main is None:
            self._main = asyncio.create_task(self._drive(until_idle=False), name="batch-runner")
            self._sweeper = asyncio.create_task(self._sweep_loop(), name="batch-sweeper")

    async def stop(self, grace_s: float) -> None:
        """Stop starting targets, let running ones finish for ``grace_s``, cancel the rest.

        Jobs whose every target finished in time get their final status; the others stay
        running in the store for ``reconcile`` at the next start. Idempotent.
        """
        # 1. No new targets, no more sweeps.
        self._stopping = True
        self._wake.set()
        for task in (self._main, self._sweeper):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        # 2. The grace period for what is running; then cancel what is left.
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
            for job in self._jobs.values():
                if job.tasks & pending:
                    job.interrupted = True
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        # 3. Record the jobs that completed during the grace period.
        try:
            await self._finish_jobs()
        except SiftError:
            log.exception("could not record finished batch jobs at shutdown")

    async def run_until_idle(self) -> None:
        """Run until no queued job and no target is left (for tests and the CLI)."""
        self._stopping = False
        await self._drive(until_idle=True)

    async def sweep(self, now: int | None = None) -> int:
        """``sweep_batch(now, batch.ttl_s)``: delete expired jobs; returns how many."""
        when = int(self._clock()) if now is None else now
        return await self._store.sweep_batch(when, self.settings.batch.ttl_s)

    # -- the loop ---------------------------------------------------------------------------

    async def _drive(self, until_idle: bool) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                await self._turn()
            except SiftError:
                if until_idle:
                    raise
                log.exception("batch runner turn failed; retrying in 1 s")
                await self._sleep(1.0)
                continue
            now = self._clock()
            if until_idle and not self._tasks and not self._jobs and not self._admit_needed:
                return
            await self._wait(self._next_open_delay(now))

    async def _turn(self) -> None:
        if self._admit_needed:
            self._admit_needed = False
            await self._admit()
        await self._refill()
        await self._finish_jobs()
        self._start_ready(self._clock())

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

    async def _sweep_loop(self) -> None:
        while True:
            await self._sleep(self.settings.batch.sweep_interval_s)
            try:
                swept = await self.sweep()
            except SiftError:
                log.exception("batch sweep failed")
                continue
            if swept:
                log.info("swept %d expired batch jobs", swept)

    async def _admit(self) -> None:
        queued = await self._store.queued_jobs()
        for row in queued:
            if row.id in self._jobs or row.id in self._abandoned:
                continue
            principal = self._principals.get(row.caller) or Principal(
                row.caller,
                row.caller_class,  # type: ignore[arg-type]  # checked by the store
            )
            job = _Job(row.id, row.caller, principal)
            if row.kind == "crawl":
                job.crawl = CrawlSpec.from_json(row.spec)
            self._jobs[row.id] = job
            if row.caller not in self._by_caller:
                self._by_caller[row.caller] = deque()
                self._rotation.append(row.caller)
            self._by_caller[row.caller].append(job)
        # Any cancel that raced the read above has been honoured: forget them.
        self._abandoned.clear()

    async def _refill(self) -> None:
        low = max(self._concurrency, SCAN_LIMIT)
        for job in list(self._jobs.values()):
            while not job.exhausted and len(job.buffer) < low:
                grown = job.grown
                rows = await self._store.batch_targets_page(job.id, job.next_idx, LOAD_CHUNK)
                if job.id not in self._jobs:
                    break  # abandoned while reading
                if rows is None:
                    self._drop(job.id)  # swept under us
                    break
                for r in rows:
                    if r.status == "pending":
                        job.buffer.append(
                            _Target(r.idx, r.url, r.options, host_key(r.url), depth=r.depth)
                        )
                if rows:
                    job.next_idx = rows[-1].idx + 1
                if len(rows) < LOAD_CHUNK and job.grown == grown:
                    job.exhausted = True

    async def _finish_jobs(self) -> None:
        for job in [j for j in self._jobs.values() if j.finished]:
            self._forget(job)
            now = int(self._clock())
            status = await self._store.finish_job(
                job.id, now, self.settings.batch.max_bytes, job.caller
            )
            log.info("batch job %s finished: %s", job.id, status)

    def _forget(self, job: _Job) -> None:
        self._jobs.pop(job.id, None)
        queue = self._by_caller.get(job.caller)
        if queue is not None and job in queue:
            queue.remove(job)
            if not queue:
                del self._by_caller[job.caller]
                self._rotation.remove(job.caller)

    def _drop(self, job_id: str) -> None:
        log.warning("batch job %s disappeared from the store; dropping it", job_id)
        self.abandon(job_id)

    # -- picking ----------------------------------------------------------------------------

    def _start_ready(self, now: float) -> None:
        while self._busy < self._concurrency and not self._stopping:
            picked = self._pick(now)
            if picked is None:
                break
            job, target = picked
            self._gate.started(target.host, now)
            self._busy += 1
            job.in_flight += 1
            job.running.add(target.idx)
            slot = _Slot(job, target)
            task = asyncio.create_task(self._run_target(slot, now))
            self._tasks.add(task)
            job.tasks.add(task)
            task.add_done_callback(functools.partial(self._on_done, slot))
        if len(self._gate) > MAX_REMEMBERED_HOSTS:
            self._gate.forget_idle(now)

    def _pick(self, now: float) -> tuple[_Job, _Target] | None:
        """Round robin over callers: the first caller (from the left) with a startable target
        gets it, and every caller tried moves to the back, so the order stays cyclic."""
        for _ in range(len(self._rotation)):
            caller = self._rotation[0]
            self._rotation.rotate(-1)
            for job in self._by_caller[caller]:
                for i, target in enumerate(job.buffer):
                    if i >= SCAN_LIMIT:
                        break
                    if self._gate.is_open(target.host, now):
                        del job.buffer[i]
                        return job, target
        return None

    def _next_open_delay(self, now: float) -> float | None:
        """Seconds until a host that buffered targets wait for opens (None: none waits)."""
        if self._busy >= self._concurrency:
            return None
        hosts: set[str] = set()
        for job in self._jobs.values():
            for i, target in enumerate(job.buffer):
                if i >= SCAN_LIMIT:
                    break
                hosts.add(target.host)
        at = self._gate.next_open_at(hosts, now)
        return None if at is None else max(0.0, at - now)

    def _release(self, slot: _Slot) -> None:
        """Give the slot and the host back (once): the next target may start."""
        if not slot.released:
            slot.released = True
            self._busy -= 1
            self._gate.finished(slot.target.host)
            self._wake.set()

    def _on_done(self, slot: _Slot, task: asyncio.Task[None]) -> None:
        # Bookkeeping lives here, not in the task: a task cancelled before its first step
        # never runs its own finally block.
        job, target = slot.job, slot.target
        self._tasks.discard(task)
        job.tasks.discard(task)
        job.in_flight -= 1
        job.running.discard(target.idx)
        self._release(slot)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("batch target %s/%d crashed", job.id, target.idx, exc_info=exc)
        self._wake.set()

    # -- one target -------------------------------------------------------------------------

    async def _run_target(self, slot: _Slot, started_at: float) -> None:
        job, target = slot.job, slot.target
        if not job.started:
            job.started = True
            try:
                await self._store.begin_job(job.id, int(self._clock()))
            except NotFound:
                self._drop(job.id)
                return
        try:
            envelope = await self._fetch(job, target, started_at)
        except SiftError as exc:
            self._release(slot)
            await self._write(job, target, "failed", None, error_text(exc), exc.hint)
            return
        except Exception:
            # A bug in sift, not in the target: record it as such and keep the job going.
            log.exception("batch target %s/%d failed inside sift", job.id, target.idx)
            self._release(slot)
            err = SiftError("sift failed while fetching this target")
            await self._write(job, target, "failed", None, error_text(err), err.hint)
            return
        self._release(slot)
        if envelope.get("status") in RETRY_STATUSES and target.attempt + 1 < self._max_attempts:
            now = self._clock()
            self._gate.back_off(target.host, now + self._retry_delay(envelope, target, now))
            if job.id in self._jobs:
                job.buffer.appendleft(replace(target, attempt=target.attempt + 1))
            return
        if job.crawl is not None:
            await self._discover(job, job.crawl, target, envelope)
        await self._write(job, target, "done", dumps(envelope).decode(), None, None)

    async def _discover(
        self, job: _Job, spec: CrawlSpec, target: _Target, envelope: dict[str, Any]
    ) -> None:
        """A crawl page was fetched: append its new links to the job (``crawl.crawler``).
        Runs after the slot is given back and before the outcome is written, so the job
        cannot finish while the page's links are still to be added."""
        try:
            added = await self._crawler.after_page(
                job.id, spec, job.principal, target.idx, target.depth, target.url, envelope
            )
        except SiftError:
            log.exception("crawl %s: discovery from target %d failed", job.id, target.idx)
            return
        if added:
            job.grown += 1
            job.exhausted = False
            self._wake.set()

    async def _fetch(self, job: _Job, target: _Target, started_at: float) -> dict[str, Any]:
        opts = parse_options({**loads(target.options), "url": target.url})
        if target.attempt:
            opts = replace(opts, max_age_s=0)  # the cached copy is the 429/503 answer
        if opts.robots and not self._gate.probed(target.host):
            delay: float | None = None
            try:
                delay = await self._service.robots_checker(job.principal).crawl_delay(opts.url)
            except SiftError:
                delay = None  # the fetch below reports what is wrong with this host
            self._gate.learn_crawl_delay(target.host, delay, started_at)
            self._wake.set()  # the host may take more targets now
        return await self._service.fetch(job.principal, opts)

    def _retry_delay(self, envelope: Mapping[str, Any], target: _Target, now: float) -> float:
        """Seconds to wait before asking the host again: its Retry-After (counted from when
        the answer was fetched), else ``backoff_s * 2**attempt``; at most ``max_backoff_s``."""
        retry_after = envelope.get("retry_after")
        if isinstance(retry_after, int | float):
            wait = float(envelope.get("fetched_at", now)) + float(retry_after) - now
        else:
            wait = self._backoff_s * (2**target.attempt)
        return min(max(wait, 0.0), self._max_backoff_s)

    async def _write(
        self,
        job: _Job,
        target: _Target,
        status: str,
        result: str | None,
        error: str | None,
        hint: str | None,
    ) -> None:
        if job.id not in self._jobs:
            return  # abandoned: the cancel or the restart reason stands
        # Before the write is queued, so "running" never overlaps an outcome in the store.
        job.running.discard(target.idx)
        try:
            await self._store.store_outcome(
                job.id,
                target.idx,
                int(self._clock()),
                status,  # type: ignore[arg-type]  # done or failed
                result,
                error,
                hint,
                self.settings.batch.max_bytes,
                job.caller,
            )
        except NotFound:
            self._drop(job.id)
