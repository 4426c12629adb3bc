"""The runner's work source on a PostgreSQL store shared with other nodes: claims.

The local queue (``batch.local``) schedules from memory: it is the only process on its
store. Here every node works the same shared queue, so scheduling lives in the database
(``store.postgres.claims``): a node claims targets with a lease and a fencing token, renews
the leases while it fetches, and writes each outcome only under its token.

Per node:

- **Claim.** While a slot of ``batch.concurrency`` is free, go round the callers that have
  live jobs (a rotation that moves on every pass, so each caller gets its turn on every
  node) and claim for each up to ``batch.per_host`` targets of one open host. The host gate
  (``batch.per_host``, 1 until robots.txt is read, Crawl-delay spacing, Retry-After and
  backoff) is one row per host in the database, moved in the claim's own transaction: it
  holds for the whole cluster, however many nodes there are.
- **Fetch** in the runner as for the local queue (the first target of an unprobed host reads
  robots.txt and publishes its Crawl-delay to the gate). A 429/503 is put back
  (``retry_later``) with the host closed for its Retry-After or backoff.
- **Upkeep**, every ``store.renew_s``: renew this node's leases (a lease it lost — reaped
  after a stall, its job cancelled or swept — cancels that fetch: this is how a cancel made
  on another node reaches this one, within ``renew_s``); reap expired leases of any node;
  finish jobs a reap completed. (The runner sweeps expired jobs every
  ``batch.sweep_interval_s``.)
- **Stop**: no new claims, ``grace_s`` for running fetches, then the rest are cancelled and
  their claims released (pending again, not counted as a loss): a rolling restart loses
  nothing and fails nothing. A node that dies instead loses its leases, and after
  ``store.lease_s`` another node's reaper requeues its targets.

Clock: leases and gates use PostgreSQL's clock; ``clock`` (unix seconds) only stamps the job
leases (API time), as in the embedded store.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sift.batch.source import Driver, Work
from sift.config import Settings
from sift.errors import SiftError
from sift.principal import Principal
from sift.store.postgres.claims import Claim

if TYPE_CHECKING:
    from sift.store.postgres.store import PgBatchStore

log = logging.getLogger("sift.batch")

# How long an idle node waits before looking for claimable work again (a submission on this
# node wakes it at once; one on another node is seen at the next poll).
IDLE_POLL_S: Final = 0.2
# The callers with live jobs are re-read at most this often (a local submission re-reads at
# once); the batch byte budget is checked at most this often after results are written.
CALLERS_TTL_S: Final = 0.5
BUDGET_CHECK_S: Final = 1.0
# Jobs whose kind and spec are kept in memory (looked up once per job, after its first page).
MAX_REMEMBERED_JOBS: Final = 1024


@dataclass(slots=True, eq=False)
class Claimed(Work):
    """A claimed target, as the runner fetches it."""

    claim: Claim


@dataclass(slots=True, eq=False)
class _Running:
    work: Claimed
    task: asyncio.Task[None]
    writing: bool = False  # the outcome is being written: let the write run (or be fenced)


def default_node_id(settings: Settings) -> str:
    """``host:listen-port:pid``: a label for operators; correctness never depends on it."""
    return f"{socket.gethostname()}:{settings.listen_host_port[1]}:{os.getpid()}"


class Claims:
    """``WorkSource`` over a shared ``PgBatchStore`` (see the module docstring)."""

    task_names = ("batch-claims", "batch-upkeep")
    turn_name = "batch claim pass"

    def __init__(
        self,
        settings: Settings,
        store: PgBatchStore,
        *,
        principals: Mapping[str, Principal] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.upkeep_s: float | None = settings.store.renew_s
        self._store = store
        self._work = store.work
        self._principals = dict(principals or {})
        self._clock = clock
        self.node_id = settings.store.node_id or default_node_id(settings)
        self._running: dict[int, _Running] = {}  # by fencing token
        self._left: list[int] = []  # tokens cancelled at shutdown, to release
        self._turn = 0  # rotates the caller order between passes
        self._callers: list[str] = []
        self._callers_at = float("-inf")  # monotonic time of the last read
        self._budget_at = float("-inf")
        self._jobs: OrderedDict[str, tuple[str, str] | None] = OrderedDict()
        self._driver: Driver | None = None
        self.claim_seconds: list[float] = []  # claim latencies since the last read (metrics)
        self.leases_lost = 0  # fetches stopped because their lease was gone (metrics)

    @property
    def driver(self) -> Driver:
        assert self._driver is not None, "bind() the claims to their runner first"
        return self._driver

    def bind(self, driver: Driver) -> None:
        self._driver = driver

    # -- control ------------------------------------------------------------------------------

    def notify(self) -> None:
        self._callers_at = float("-inf")

    def running(self, job_id: str) -> frozenset[int]:
        """Nothing to add: claimed targets are ``running`` in the shared store itself."""
        return frozenset()

    def abandon(self, job_id: str) -> None:
        """Stop this node's fetches of ``job_id`` (the cancellation itself is the store's;
        any write they would still make is fenced)."""
        for r in list(self._running.values()):
            if r.work.job_id == job_id:
                r.task.cancel()

    # -- the drive loop -----------------------------------------------------------------------

    async def turn(self, until_idle: bool) -> bool:
        claimed = await self._claim_pass()
        if until_idle:
            await self.upkeep()
        return claimed > 0

    async def idle(self) -> bool:
        return not self._running and await self._store.live_batch_jobs_total() == 0

    def wait_s(self, now: float) -> float | None:
        return IDLE_POLL_S

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
        while free > 0 and progress and not self.driver.stopping:
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
                    self.driver.start_work(self._claimed(claim))
                free -= len(claims)
                total += len(claims)
                progress = progress or bool(claims)
        return total

    def _claimed(self, claim: Claim) -> Claimed:
        principal = self._principals.get(claim.caller) or Principal(
            claim.caller,
            claim.caller_class,  # type: ignore[arg-type]  # checked by the store
        )
        return Claimed(
            claim.job_id,
            claim.idx,
            claim.url,
            claim.options,
            claim.attempt,
            principal,
            claim.claimed_at,
            claim,
        )

    async def upkeep(self) -> None:
        """Renew this node's leases (cancel the fetches whose lease was lost), reap expired
        leases of any node, and finish the jobs that completed by reaping."""
        tokens = list(self._running)
        if tokens:
            held = await self._work.renew(tokens, self.settings.store.lease_s)
            for token in set(tokens) - held:
                r = self._running.get(token)
                if r is not None and not r.writing:
                    log.info("lost the lease of %s/%d; stopping it", r.work.job_id, r.work.idx)
                    self.leases_lost += 1
                    r.task.cancel()
        failed_jobs = await self._work.reap(int(self._clock()), self.settings.store.max_stalls)
        for job_id in await self._work.complete_jobs(failed_jobs):
            await self._store.finish_job(job_id, int(self._clock()), self.settings.batch.max_bytes)

    # -- one target ---------------------------------------------------------------------------

    def started(self, work: Claimed, task: asyncio.Task[None]) -> None:
        self._running[work.claim.token] = _Running(work, task)

    def ended(self, work: Claimed, task: asyncio.Task[None]) -> None:
        self._running.pop(work.claim.token, None)

    async def begin(self, work: Claimed) -> bool:
        return True  # the claim made the target (and its job) running

    def release(self, work: Claimed) -> None:
        """Nothing: the claim holds its host's gate until its outcome is written."""

    def probed(self, work: Claimed) -> bool:
        return work.claim.probed

    async def learn_crawl_delay(self, work: Claimed, delay_s: float | None) -> None:
        await self._work.learn_crawl_delay(work.claim.host, delay_s)

    async def retry_later(self, work: Claimed, wait_s: float, now: float) -> None:
        self._writing(work)
        await self._work.retry_later(work.claim, wait_s)

    async def job_of(self, work: Claimed) -> tuple[str, str] | None:
        job_id = work.job_id
        if job_id in self._jobs:
            self._jobs.move_to_end(job_id)
            return self._jobs[job_id]
        job = await self._store.batch_job(job_id)
        found = (job.kind, job.spec) if job is not None else None
        self._jobs[job_id] = found
        if len(self._jobs) > MAX_REMEMBERED_JOBS:
            self._jobs.popitem(last=False)
        return found

    async def depth(self, work: Claimed) -> int | None:
        rows = await self._store.batch_targets_page(work.job_id, work.idx, 1)
        if not rows or rows[0].idx != work.idx:
            return None
        return rows[0].depth

    def grew(self, work: Claimed) -> None:
        """Nothing: the next claim sees the new targets (the append is atomic across nodes,
        see ``PgBatchStore``)."""

    async def record(
        self, work: Claimed, status: str, result: str | None, error: str | None, hint: str | None
    ) -> None:
        claim = work.claim
        now = int(self._clock())
        self._writing(work)
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

    def _writing(self, work: Claimed) -> None:
        running = self._running.get(work.claim.token)
        if running is not None:
            running.writing = True

    # -- shutdown -----------------------------------------------------------------------------

    def interrupted(self, tasks: set[asyncio.Task[None]]) -> None:
        self._left = [tok for tok, r in self._running.items() if r.task in tasks]

    async def stopped(self) -> None:
        """Release the claims of the fetches shutdown cancelled: pending again, no loss."""
        left, self._left = self._left, []
        if left:
            try:
                n = await self._work.release(left)
                log.info("released %d claimed batch targets at shutdown", n)
            except SiftError:
                log.exception("could not release claimed batch targets; their leases expire")
            self._running.clear()
