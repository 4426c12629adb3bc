"""Where the runner's work comes from: the ``WorkSource`` part it is built with.

The runner (``batch.runner.Runner``) owns the lifecycle of fetching a target — its task,
the robots.txt probe, the fetch through ``Service.fetch``, retries after a 429/503, the
outcome, the hooks, start and stop. A work source owns what differs between one process
and a cluster:

- ``LocalQueue`` (``batch.local``): the embedded store is this process's alone, so the queue
  lives in memory — admission from the store, round robin over callers, FIFO within a job,
  per-host politeness (``HostGate``) — and outcomes are plain writes;
- ``Claims`` (``batch.claims``): the PostgreSQL store is shared by several nodes, so the
  queue lives in the database — claims with leases and fencing tokens, a host gate row per
  host, upkeep (renew, reap) — and every write carries the claim's token.

The runner hands the source a ``Driver`` (itself) to start targets through and to wake it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sift.principal import Principal


@dataclass(slots=True, eq=False)
class Work:
    """One target to fetch now, as the source handed it to the runner."""

    job_id: str
    idx: int
    url: str
    options: str  # the target's options, JSON
    attempt: int  # 0 the first time; one more for each 429/503 retried
    principal: Principal  # whom the fetch runs as
    started_at: float  # ``clock()`` when the source picked it (unix seconds)


W = TypeVar("W", bound=Work, contravariant=True)  # the source's own kind of Work


class Driver(Protocol):
    """What a source may ask of the runner that drives it."""

    @property
    def stopping(self) -> bool:
        """True once ``stop`` began: start nothing more."""
        ...

    def wake(self) -> None:
        """Something changed (a slot freed, a host opened, a job grew): look again now."""
        ...

    def start_work(self, work: Work) -> asyncio.Task[None]:
        """Begin fetching ``work``: its task, created (not yet run) and registered."""
        ...


class WorkSource(Protocol[W]):
    """The runner's source of work. Every method is called on the runner's event loop."""

    # The names of the runner's two background tasks: its drive loop, its upkeep loop.
    task_names: tuple[str, str]
    # What the drive loop does, for its log line when a turn fails ("batch runner turn").
    turn_name: str
    # Seconds between upkeep passes (``upkeep``), or None: the source needs no upkeep.
    upkeep_s: float | None

    def bind(self, driver: Driver) -> None:
        """Called once by the runner that drives this source."""
        ...

    # -- the runner's control surface ----------------------------------------------------------

    def notify(self) -> None:
        """A job was submitted here: look for it at the next turn."""
        ...

    def running(self, job_id: str) -> frozenset[int]:
        """The idx of ``job_id``'s targets fetched now that the store still shows pending."""
        ...

    def abandon(self, job_id: str) -> None:
        """Stop ``job_id``'s fetches here; nothing more is written for them."""
        ...

    # -- the drive loop ------------------------------------------------------------------------

    async def turn(self, until_idle: bool) -> bool:
        """Start what may start now (``Driver.start_work``). True: look again at once."""
        ...

    async def idle(self) -> bool:
        """No job left to work on (the runner has no target running)."""
        ...

    def wait_s(self, now: float) -> float | None:
        """How long the drive loop may wait before the next turn (None: until woken)."""
        ...

    async def upkeep(self) -> None:
        """Periodic work of the source itself (only when ``upkeep_s`` is set)."""
        ...

    # -- one target ----------------------------------------------------------------------------

    def started(self, work: W, task: asyncio.Task[None]) -> None:
        """``work``'s task was created."""
        ...

    def ended(self, work: W, task: asyncio.Task[None]) -> None:
        """``work``'s task ended, however (its bookkeeping; it may have been cancelled
        before its first step)."""
        ...

    async def begin(self, work: W) -> bool:
        """Before the fetch; False: the job is gone, drop the target."""
        ...

    def release(self, work: W) -> None:
        """The fetch is over: its slot and host may be given to the next target. Idempotent."""
        ...

    def probed(self, work: W) -> bool:
        """The Crawl-delay of ``work``'s host is known already."""
        ...

    async def learn_crawl_delay(self, work: W, delay_s: float | None) -> None:
        """robots.txt of ``work``'s host answered ``delay_s`` (None: no Crawl-delay)."""
        ...

    async def retry_later(self, work: W, wait_s: float, now: float) -> None:
        """Queue ``work`` again with one more attempt; its host closes for ``wait_s``."""
        ...

    async def job_of(self, work: W) -> tuple[str, str] | None:
        """``(kind, spec)`` of ``work``'s job, None if it is gone."""
        ...

    async def depth(self, work: W) -> int | None:
        """``work``'s depth in its job, None if it is gone."""
        ...

    def grew(self, work: W) -> None:
        """A hook appended targets to ``work``'s job."""
        ...

    async def record(
        self, work: W, status: str, result: str | None, error: str | None, hint: str | None
    ) -> None:
        """Write ``work``'s outcome (``done`` with the envelope, or ``failed``), and finish
        its job when that was the last one."""
        ...

    # -- shutdown ------------------------------------------------------------------------------

    def interrupted(self, tasks: set[asyncio.Task[None]]) -> None:
        """Shutdown is about to cancel ``tasks``, which outlived the grace period."""
        ...

    async def stopped(self) -> None:
        """After shutdown cancelled what was left: record what can be recorded."""
        ...

    # -- metrics -------------------------------------------------------------------------------

    @property
    def claim_seconds(self) -> list[float]:
        """Latencies of claims since the metrics last read them (cleared by the reader)."""
        ...

    @property
    def leases_lost(self) -> int:
        """Fetches stopped because their lease was gone (a running total)."""
        ...
