"""The batch runner of a node sharing a PostgreSQL store with other nodes.

The embedded runner (``runner.BatchRunner``) schedules from memory: it is the only process
on its store. Here every node works the same shared queue, so scheduling lives in the
database (``pgclaims``): a node claims targets with a lease and a fencing token, renews the
leases while it fetches, and writes each outcome only under its token.

The loop, per node:

- **Claim.** While a slot of ``batch.concurrency`` is free, go round the callers that have
  live jobs (a rotation that moves on every pass, so each caller gets its turn on every
  node) and claim for each up to ``batch.per_host`` targets of one open host. The host gate
  (``batch.per_host``, 1 until robots.txt is read, Crawl-delay spacing, Retry-After and
  backoff) is one row per host in the database, moved in the claim's own transaction: it
  holds for the whole cluster, however many nodes there are.
- **Fetch** through ``Service.fetch`` as the embedded runner does (the first target of an
  unprobed host reads robots.txt and publishes its Crawl-delay to the gate). A 429/503 is
  put back (``retry_later``) with the host closed for its Retry-After or backoff.
- **Upkeep**, every ``store.renew_s``: renew this node's leases (a lease it lost — reaped
  after a stall, its job cancelled or swept — cancels that fetch: this is how a cancel made
  on another node reaches this one, within ``renew_s``); reap expired leases of any node;
  finish jobs a reap completed. Every ``batch.sweep_interval_s``: sweep expired jobs.
- **Stop**: no new claims, ``grace_s`` for running fetches, then the rest are cancelled and
  their claims released (pending again, not counted as a loss): a rolling restart loses
  nothing and fails nothing. A node that dies instead loses its leases, and after
  ``store.lease_s`` another node's reaper requeues its targets.

Clock: leases and gates use PostgreSQL's clock; ``clock`` (unix seconds) only stamps the job
leases (API time), as in the embedded store.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from sift.config import Settings
from sift.crawl.crawler import Crawler
from sift.errors import SiftError
from sift.jsonio import dumps, loads
from sift.options import parse_options
from sift.principal import Principal
from sift.service import Service
from sift.store.postgres.claims import Claim
from sift.store.postgres.store import PgBatchStore
from sift.store.views import error_text

log = logging.getLogger("sift.batch")

RETRY_STATUSES: Final = frozenset({429, 503})
# How long an idle node waits before looking for claimable work again (a submission on this
# node wakes it at once; one on another node is seen at the next poll).
IDLE_POLL_S: Final = 0.2
# The callers with live jobs are re-read at most this often (a local submission re-reads at
# once); the batch byte budget is checked at most this often after results are written.
CALLERS_TTL_S: Final = 0.5
BUDGET_CHECK_S: Final = 1.0


@dataclass(slots=True, eq=False)
class _Running:
    claim: Claim
    task: asyncio.Task[None]
    writing: bool = False  # the outcome is being written: let the write run (or be fenced)


def default_node_id(settings: Settings) -> str:
    """``host:listen-port:pid``: a label for operators; correctness never depends on it."""
    return f"{socket.gethostname()}:{settings.listen_host_port[1]}:{os.getpid()}"


class ClusterRunner:
    """Same surface as ``BatchRunner`` (``notify``, ``running``, ``abandon``, ``start``,
    ``stop``, ``run_until_idle``, ``sweep``), over the shared store."""

    def __init__(
        self,
        settings: Settings,
        store: PgBatchStore,
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
        self._work = store.work
        self._service = service
        self._principals = dict(principals or {})
        self._clock = clock
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self.node_id = settings.store.node_id or default_node_id(settings)
        self._crawler = Crawler(store, service, clock)
        self._running: dict[int, _Running] = {}  # by fencing token
        self._turn = 0  # rotates the caller order between passes
        self._wake = asyncio.Event()
        self._stopping = False
        self._main: asyncio.Task[None] | None = None
        self._upkeep: asyncio.Task[None] | None = None
        self.claim_seconds: list[float] = []  # claim latencies since the last read (metrics)
        self.leases_lost = 0  # fetches stopped because their lease was gone (metrics)
        self._callers: list[str] = []
        self._callers_at = float("-inf")  # monotonic time of the last read
        self._budget_at = float("-inf")

    # -- control ------------------------------------------------------------------------------

    def notify(self) -> None:
        """A job was submitted on this node: look for work now."""
        self._callers_at = float("-inf")
        self._wake.set()

    def running(self, job_id: str) -> frozenset[int]:
        """Nothing to add: claimed targets are ``running`` in the shared store itself."""
        return frozenset()

    def abandon(self, job_id: str) -> None:
        """Stop this node's fetches of ``job_id`` (the cancellation itself is the store's;
        any write they would still make is fenced)."""
        for r in list(self._running.values()):
            if r.claim.job_id == job_id:
                r.task.cancel()

    def start(self) -> None:
        if self._main is None:
            self._main = asyncio.create_task(self._drive(until_idle=False), name="batch-claims")
            self._upkeep = asyncio.create_task(self._upkeep_loop(), name="batch-upkeep")

    async def stop(self, grace_s: float) -> None:
        """No new claims; ``grace_s`` for running fetches; cancel and release the rest."""
        self._stopping = True
        self._wake.set()
        for task in (self._main, self._upkeep):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        tasks = {r.task for r in self._running.values()}
        left: list[int] = []
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            # Noted before cancelling: a cancelled task drops out of _running on its way out.
            left = [tok for tok, r in self._running.items() if r.task in pending]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if left:
            try:
                n = await self._work.release(left)
                log.info("released %d claimed batch targets at shutdown", n)
            except SiftError:
                log.exception("could not release claimed batch targets; their leases expire")
            self._running.clear()

    async def run_until_idle(self) -> None:
        """Run until no live job is left in the store and nothing runs here."""
        self._stopping = False
        await self._drive(until_idle=True)

    async def sweep(self, now: int | None = None) -> int:
        when = int(self._clock()) if now is None else now
        return await self._store.sweep_batch(when, self.settings.batch.ttl_s)

    # -- the loops ----------------------------------------------------------------------------

    async def _drive(self, until_idle: bool) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                claimed = await self._claim_pass()
                if until_idle:
                    await self._upkeep_once()
            except SiftError:
                if until_idle:
                    raise
                log.exception("batch claim pass failed; retrying in 1 s")
                await self._sleep(1.0)
                continue
            if claimed:
                continue
            if until_idle and not self._running and await self._store.live_batch_jobs_total() == 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_POLL_S)

    async def _claim_pass(self) -> int:
        """Claim for every caller in turn until the slots are full or nothing is claimable."""
        batch = self.settings.batch
        free = batch.concurrency - len(self._running)
        if free <= 0:
            return 0
        if time.monotonic() - self._callers_at > CALLERS_TTL_S:
            self._callers = await self._work.live_callers()
            self._callers_at = time.monotonic()
        callers = self._callers
        if not callers:
            return 0
        start = self._turn % len(callers)
        self._turn += 1
        order = callers[start:] + callers[:start]
        total = 0
        progress = True
        while free > 0 and progress and not self._stopping:
            progress = False
            for caller in order:
                if free <= 0:
                    break
                t0 = time.perf_counter()
                claims = await self._work.claim(
                    caller,
                    self.node_id,
                    batch.per_host,
                    min(free, batch.per_host),
                    self.settings.store.lease_s,
                )
                self.claim_seconds.append(time.perf_counter() - t0)
                for claim in claims:
                    self._start(claim)
                free -= len(claims)
                total += len(claims)
                progress = progress or bool(claims)
        return total

    def _start(self, claim: Claim) -> None:
        task = asyncio.create_task(self._run(claim), name=f"batch-{claim.job_id}-{claim.idx}")
        self._running[claim.token] = _Running(claim, task)
        task.add_done_callback(functools.partial(self._on_done, claim.token))

    def _on_done(self, token: int, task: asyncio.Task[None]) -> None:
        self._running.pop(token, None)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("batch target task crashed", exc_info=exc)
        self._wake.set()

    async def _upkeep_loop(self) -> None:
        next_sweep = self._clock() + self.settings.batch.sweep_interval_s
        while True:
            await self._sleep(self.settings.store.renew_s)
            try:
                await self._upkeep_once()
                if self._clock() >= next_sweep:
                    next_sweep = self._clock() + self.settings.batch.sweep_interval_s
                    swept = await self.sweep()
                    if swept:
                        log.info("swept %d expired batch jobs", swept)
            except SiftError:
                log.exception("batch upkeep failed")

    async def _upkeep_once(self) -> None:
        """Renew this node's leases (cancel the fetches whose lease was lost), reap expired
        leases of any node, and finish the jobs that completed by reaping."""
        tokens = list(self._running)
        if tokens:
            held = await self._work.renew(tokens, self.settings.store.lease_s)
            for token in set(tokens) - held:
                r = self._running.get(token)
                if r is not None and not r.writing:
                    log.info("lost the lease of %s/%d; stopping it", r.claim.job_id, r.claim.idx)
                    self.leases_lost += 1
                    r.task.cancel()
        failed_jobs = await self._work.reap(int(self._clock()), self.settings.store.max_stalls)
        for job_id in await self._work.complete_jobs(failed_jobs):
            await self._store.finish_job(job_id, int(self._clock()), self.settings.batch.max_bytes)

    # -- one target ---------------------------------------------------------------------------

    async def _run(self, claim: Claim) -> None:
        principal = self._principals.get(claim.caller) or Principal(
            claim.caller,
            claim.caller_class,  # type: ignore[arg-type]  # checked by the store
        )
        try:
            envelope = await self._fetch(principal, claim)
        except SiftError as exc:
            await self._complete(claim, "failed", None, error_text(exc), exc.hint)
            return
        except Exception:
            log.exception("batch target %s/%d failed inside sift", claim.job_id, claim.idx)
            err = SiftError("sift failed while fetching this target")
            await self._complete(claim, "failed", None, error_text(err), err.hint)
            return
        if envelope.get("status") in RETRY_STATUSES and claim.attempt + 1 < self._max_attempts:
            running = self._running.get(claim.token)
            if running is not None:
                running.writing = True
            await self._work.retry_later(claim, self._retry_delay(envelope, claim))
            return
        await self._discover(principal, claim, envelope)
        await self._complete(claim, "done", dumps(envelope).decode(), None, None)

    async def _discover(self, principal: Principal, claim: Claim, envelope: dict[str, Any]) -> None:
        """A crawl's page: append its new links before the outcome is written (as the
        embedded runner does; the append is atomic across nodes, see ``PgBatchStore``)."""
        try:
            spec = await self._crawler.spec_of(claim.job_id)
            if spec is None:
                return
            rows = await self._store.batch_targets_page(claim.job_id, claim.idx, 1)
            if not rows or rows[0].idx != claim.idx:
                return
            await self._crawler.after_page(
                claim.job_id, spec, principal, claim.idx, rows[0].depth, claim.url, envelope
            )
        except SiftError:
            log.exception("crawl %s: discovery from target %d failed", claim.job_id, claim.idx)

    async def _fetch(self, principal: Principal, claim: Claim) -> dict[str, Any]:
        opts = parse_options({**loads(claim.options), "url": claim.url})
        if claim.attempt:
            opts = replace(opts, max_age_s=0)  # the cached copy is the 429/503 answer
        if opts.robots and not claim.probed:
            delay: float | None = None
            try:
                delay = await self._service.robots_checker(principal).crawl_delay(opts.url)
            except SiftError:
                delay = None  # the fetch below reports what is wrong with this host
            await self._work.learn_crawl_delay(claim.host, delay)
            self._wake.set()  # the host may take more targets now
        return await self._service.fetch(principal, opts)

    def _retry_delay(self, envelope: Mapping[str, Any], claim: Claim) -> float:
        """As ``BatchRunner._retry_delay``: Retry-After from when the answer was fetched,
        else ``backoff_s * 2**attempt``; at most ``max_backoff_s``."""
        now = self._clock()
        retry_after = envelope.get("retry_after")
        if isinstance(retry_after, int | float):
            wait = float(envelope.get("fetched_at", now)) + float(retry_after) - now
        else:
            wait = self._backoff_s * (2**claim.attempt)
        return min(max(wait, 0.0), self._max_backoff_s)

    async def _complete(
        self, claim: Claim, status: str, result: str | None, error: str | None, hint: str | None
    ) -> None:
        now = int(self._clock())
        running = self._running.get(claim.token)
        if running is not None:
            running.writing = True
        done = await self._work.complete(claim, now, status, result, error, hint)
        if done.fenced:
            log.info("late write for %s/%d fenced out", claim.job_id, claim.idx)
            return
        max_bytes = self.settings.batch.max_bytes
        if done.job_complete:
            status_ = await self._store.finish_job(claim.job_id, now, max_bytes, claim.caller)
            log.info("batch job %s finished: %s", claim.job_id, status_)
        elif result is not None and time.monotonic() - self._budget_at > BUDGET_CHECK_S:
            # Not after every result: a sum over the jobs each time costs a round trip per
            # target; the budget may be passed by one second's results at most.
            self._budget_at = time.monotonic()
            if await self._store.batch_nbytes() > max_bytes:
                await self._store.evict_batch_oldest(max_bytes, caller=claim.caller)
