"""The runner's work source over the embedded store: a queue in memory, this process's alone.

Scheduling. Queued jobs are admitted from the store (``queued_jobs``, oldest first) when a
submission calls ``notify()``. Each free slot of ``batch.concurrency`` goes to the next
caller in a round robin over the callers that have work, and within one caller to its
oldest job first (FIFO): one caller's 10,000-target job never starves another caller's
10-target job. A target starts only when its host is open (``HostGate``: ``batch.per_host``,
robots.txt ``Crawl-delay``, ``Retry-After``/backoff after a 429 or 503); targets of a closed
host wait while targets of other hosts go ahead.

Each outcome is written as soon as it is known (``store_outcome``: ``update_batch_target``
then ``evict_batch_oldest(batch.max_bytes, caller=…)``, that caller's own finished jobs
first). When every target of a job has an outcome the job becomes ``done`` (all
succeeded), ``partial`` or ``failed`` (all failed).

Cancel (``abandon``) drops a job from memory and cancels its running targets before the API
writes the cancellation, so nothing written here can land after it. At shutdown a job one
of whose targets was cancelled stays ``running`` in the store, for ``reconcile``
(``mark_in_flight_failed``) at the next start; the jobs that completed get their status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from sift.batch.politeness import HostGate
from sift.batch.source import Driver, Work
from sift.config import Settings
from sift.errors import NotFound, SiftError
from sift.principal import Principal
from sift.store import BatchStore
from sift.store.hosts import host_key

log = logging.getLogger("sift.batch")

# Targets read from the store per job at a time, and how far the scheduler looks down one
# job's queue for a target whose host is open.
LOAD_CHUNK: Final = 256
SCAN_LIMIT: Final = 128
# Hosts remembered before idle ones are forgotten (bounds memory over many one-off hosts).
MAX_REMEMBERED_HOSTS: Final = 10_000


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
    kind: str  # "batch" or "crawl"
    spec: str  # a crawl job's parameters (JSON): it grows as pages are fetched
    buffer: deque[_Target] = field(default_factory=deque)
    next_idx: int = 0  # the first idx not yet read from the store
    exhausted: bool = False  # every target has been read
    in_flight: int = 0
    started: bool = False  # the job's status has been written as running
    interrupted: bool = False  # shutdown cancelled one of its targets: it cannot finish here
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    grown: int = 0  # appends so far: a store read started before one may have missed it
    # Targets being fetched now. They stay "pending" in the store (one write per target
    # less); the status and results views show them as running from here.
    running: set[int] = field(default_factory=set)

    @property
    def finished(self) -> bool:
        return self.exhausted and not self.buffer and self.in_flight == 0 and not self.interrupted


@dataclass(slots=True, eq=False)
class Slot(Work):
    """One of the ``batch.concurrency`` fetch slots, held by one target until its fetch
    ends (the outcome is written after the slot is given back)."""

    job: _Job
    target: _Target
    released: bool = False


class LocalQueue:
    """``WorkSource`` over a store of this process's own (see the module docstring).

    ``principals`` maps a caller name to the principal its jobs run as (the in-process CLI
    runs as the operator); any other job runs as ``Principal(caller, caller_class)``.
    """

    task_names = ("batch-runner", "batch-sweeper")
    turn_name = "batch runner turn"
    upkeep_s: float | None = None

    def __init__(
        self,
        settings: Settings,
        store: BatchStore,
        *,
        principals: Mapping[str, Principal] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._store = store
        self._principals = dict(principals or {})
        self._clock = clock
        self._concurrency = settings.batch.concurrency
        self._gate = HostGate(settings.batch.per_host)
        self._jobs: dict[str, _Job] = {}
        self._by_caller: dict[str, deque[_Job]] = {}
        self._rotation: deque[str] = deque()  # callers with jobs; the next served at the left
        self._busy = 0  # slots held (targets fetching)
        self._abandoned: set[str] = set()
        self._admit_needed = True
        self._driver: Driver | None = None
        self.claim_seconds: list[float] = []  # no claims here: always empty
        self.leases_lost = 0  # no leases here

    @property
    def driver(self) -> Driver:
        assert self._driver is not None, "bind() the queue to its runner first"
        return self._driver

    def bind(self, driver: Driver) -> None:
        self._driver = driver

    # -- control ------------------------------------------------------------------------------

    def notify(self) -> None:
        self._admit_needed = True

    def running(self, job_id: str) -> frozenset[int]:
        job = self._jobs.get(job_id)
        return frozenset(job.running) if job is not None else frozenset()

    def abandon(self, job_id: str) -> None:
        self._abandoned.add(job_id)
        job = self._jobs.pop(job_id, None)
        if job is not None:
            self._unqueue(job)
            for task in list(job.tasks):
                task.cancel()
        self.driver.wake()

    # -- the drive loop -----------------------------------------------------------------------

    async def turn(self, until_idle: bool) -> bool:
        if self._admit_needed:
            self._admit_needed = False
            await self._admit()
        await self._refill()
        await self._finish_jobs()
        self._start_ready(self._clock())
        return False

    async def idle(self) -> bool:
        return not self._jobs and not self._admit_needed

    def wait_s(self, now: float) -> float | None:
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

    async def upkeep(self) -> None:
        """Nothing: the queue is in memory and this process's alone."""

    async def _admit(self) -> None:
        queued = await self._store.queued_jobs()
        for row in queued:
            if row.id in self._jobs or row.id in self._abandoned:
                continue
            principal = self._principals.get(row.caller) or Principal(
                row.caller,
                row.caller_class,  # type: ignore[arg-type]  # checked by the store
            )
            job = _Job(row.id, row.caller, principal, row.kind, row.spec)
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
            self._jobs.pop(job.id, None)
            self._unqueue(job)
            now = int(self._clock())
            status = await self._store.finish_job(
                job.id, now, self.settings.batch.max_bytes, job.caller
            )
            log.info("batch job %s finished: %s", job.id, status)

    def _unqueue(self, job: _Job) -> None:
        queue = self._by_caller.get(job.caller)
        if queue is not None and job in queue:
            queue.remove(job)
            if not queue:
                del self._by_caller[job.caller]
                self._rotation.remove(job.caller)

    def _drop(self, job_id: str) -> None:
        log.warning("batch job %s disappeared from the store; dropping it", job_id)
        self.abandon(job_id)

    # -- picking ------------------------------------------------------------------------------

    def _start_ready(self, now: float) -> None:
        driver = self.driver
        while self._busy < self._concurrency and not driver.stopping:
            picked = self._pick(now)
            if picked is None:
                break
            job, target = picked
            self._gate.started(target.host, now)
            self._busy += 1
            job.in_flight += 1
            job.running.add(target.idx)
            slot = Slot(
                job.id,
                target.idx,
                target.url,
                target.options,
                target.attempt,
                job.principal,
                now,
                job,
                target,
            )
            driver.start_work(slot)
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

    # -- one target ---------------------------------------------------------------------------

    def started(self, work: Slot, task: asyncio.Task[None]) -> None:
        work.job.tasks.add(task)

    def ended(self, work: Slot, task: asyncio.Task[None]) -> None:
        job = work.job
        job.tasks.discard(task)
        job.in_flight -= 1
        job.running.discard(work.idx)
        self.release(work)

    async def begin(self, work: Slot) -> bool:
        job = work.job
        if not job.started:
            job.started = True
            try:
                await self._store.begin_job(job.id, int(self._clock()))
            except NotFound:
                self._drop(job.id)
                return False
        return True

    def release(self, work: Slot) -> None:
        """Give the slot and the host back (once): the next target may start."""
        if not work.released:
            work.released = True
            self._busy -= 1
            self._gate.finished(work.target.host)
            self.driver.wake()

    def probed(self, work: Slot) -> bool:
        return self._gate.probed(work.target.host)

    async def learn_crawl_delay(self, work: Slot, delay_s: float | None) -> None:
        self._gate.learn_crawl_delay(work.target.host, delay_s, work.started_at)

    async def retry_later(self, work: Slot, wait_s: float, now: float) -> None:
        job, target = work.job, work.target
        self._gate.back_off(target.host, now + wait_s)
        if job.id in self._jobs:
            job.buffer.appendleft(replace(target, attempt=target.attempt + 1))

    async def job_of(self, work: Slot) -> tuple[str, str] | None:
        return work.job.kind, work.job.spec

    async def depth(self, work: Slot) -> int | None:
        return work.target.depth

    def grew(self, work: Slot) -> None:
        work.job.grown += 1
        work.job.exhausted = False
        self.driver.wake()

    async def record(
        self, work: Slot, status: str, result: str | None, error: str | None, hint: str | None
    ) -> None:
        job = work.job
        if job.id not in self._jobs:
            return  # abandoned: the cancel or the restart reason stands
        # Before the write is queued, so "running" never overlaps an outcome in the store.
        job.running.discard(work.idx)
        try:
            await self._store.store_outcome(
                job.id,
                work.idx,
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

    # -- shutdown -----------------------------------------------------------------------------

    def interrupted(self, tasks: set[asyncio.Task[None]]) -> None:
        """Those jobs cannot finish here: they stay running for ``reconcile``."""
        for job in self._jobs.values():
            if job.tasks & tasks:
                job.interrupted = True

    async def stopped(self) -> None:
        """Record the jobs that completed during the grace period."""
        try:
            await self._finish_jobs()
        except SiftError:
            log.exception("could not record finished batch jobs at shutdown")
