"""The deliverer: sends the outbox's due events, signed, through the egress guard with each
event's owner's policy; one per running ``sift serve`` (built by ``sift.assembly``).

Each turn (every ``webhooks.poll_s``, or at once when woken):

1. **Job webhooks** whose job has ended become ``job.finished`` events (``jobs``).
2. **Claim** due events up to the free slots: ``webhooks.concurrency`` attempts in flight on
   this node, at most ``webhooks.per_owner`` of them for one owner (an owner at its limit is
   skipped by the claim itself, so a dead receiver holds that owner's slots and no one
   else's). On PostgreSQL the claim locks with ``SKIP LOCKED``: one node per attempt.
3. **Send** each in a task of its own: ``POST`` the event's bytes with the Standard Webhooks
   headers (``signing``), through ``sift.fetch.post`` — the owner's egress policy, vetted at
   connect time, redirects not followed, the answer read to ``webhooks.max_response_bytes``,
   the whole attempt under ``webhooks.timeout_s``.
4. **Record** the attempt in the delivery log: a 2xx delivers it; a 410 (the receiver wants
   no more) or the ``webhooks.max_attempts``-th failure fails it; any other status (a 3xx
   included) or error retries it after ``backoff_s * 2**(n-1)`` (at most ``max_backoff_s``).

Finished events older than ``webhooks.keep_s`` are pruned with their log about once an
hour. ``stop()`` cancels the attempts in flight and releases their claims (due again, no
attempt counted): a restart loses nothing. Time: ``clock`` (unix seconds) is injectable;
``run_once()`` does one turn and waits for its attempts (tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from sift.config import Caller, Settings
from sift.errors import SiftError
from sift.fetch import Fetcher, FetchPolicy
from sift.fetch.post import post
from sift.principal import Principal
from sift.store.webhooks import Attempt, Delivery, DeliveryState, Outbox, Source
from sift.webhooks import signing
from sift.webhooks.jobs import fire_ended_jobs
from sift.webhooks.outbox import enqueue_to, new_delivery

log = logging.getLogger("sift.webhooks")

PolicyFor = Callable[[Principal, float], FetchPolicy]
# Candidates read per free slot: owners at their limit are skipped by the query, but one
# owner may fill a page of candidates, so read a few per slot.
CANDIDATES_PER_SLOT: Final = 4
PRUNE_EVERY_S: Final = 3600.0
ENDED_JOBS_PER_TURN: Final = 100


def retry_delay_s(attempts: int, backoff_s: float, max_backoff_s: float) -> float:
    """The wait after the ``attempts``-th failed attempt: ``backoff_s * 2**(attempts-1)``,
    at most ``max_backoff_s``."""
    return float(min(backoff_s * 2 ** max(attempts - 1, 0), max_backoff_s))


def outcome(status: int | None, attempts: int, max_attempts: int) -> DeliveryState:
    """Where a delivery goes after its ``attempts``-th attempt answered ``status`` (None:
    no answer)."""
    if status is not None and 200 <= status < 300:
        return "delivered"
    if status == 410 or attempts >= max_attempts:
        return "failed"
    return "pending"


class Deliverer:
    """Sends the events of one outbox (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        outbox: Outbox,
        fetcher: Fetcher,
        policy_for: PolicyFor,
        *,
        principals: Mapping[str, Principal] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.cfg = settings.webhooks
        self.outbox = outbox
        self._fetcher = fetcher
        self._policy_for = policy_for
        self._principals = dict(principals or {})
        self._callers: Callable[[], Sequence[Caller]] = lambda: settings.callers
        self._classes_of: tuple[Sequence[Caller], dict[str, str]] = ((), {})
        self._clock = clock
        self._tasks: dict[asyncio.Task[None], Delivery] = {}
        self._by_owner: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self._main: asyncio.Task[None] | None = None
        self._pruned_at = float("-inf")

    # -- control ------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the loop in the background until ``stop``."""
        if self._main is None:
            self._main = asyncio.create_task(self._loop(), name="webhook-deliverer")

    def follow_callers(self, callers: Callable[[], Sequence[Caller]]) -> None:
        """Read the callers from ``callers`` at each attempt (``sift serve``: the key ring,
        which reloads on SIGHUP) instead of the settings: a caller's class change or
        removal applies to its next attempt."""
        self._callers = callers

    def notify(self) -> None:
        """An event was enqueued (or a job ended) here: look now, not at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop the loop, cancel the attempts in flight and release their claims.
        Idempotent."""
        main, self._main = self._main, None
        if main is not None:
            main.cancel()
            await asyncio.gather(main, return_exceptions=True)
        left = dict(self._tasks)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        if left:
            try:
                await self.outbox.release(list(left.values()), self._clock())
            except SiftError:
                log.exception("could not release webhook deliveries; their leases expire")

    async def enqueue(
        self,
        *,
        owner: str,
        source: Source,
        source_id: str,
        url: str,
        secret: str,
        event: Mapping[str, Any],
    ) -> str:
        """``outbox.enqueue`` into this deliverer's outbox, on its clock, sent at once."""
        delivery = new_delivery(
            owner=owner,
            source=source,
            source_id=source_id,
            url=url,
            secret=secret,
            event=event,
            now=int(self._clock()),
        )
        return await enqueue_to(self.outbox, delivery, self.notify)

    @property
    def in_flight(self) -> int:
        """Attempts being made now."""
        return len(self._tasks)

    async def run_once(self) -> int:
        """One turn, then wait for the attempts it started; how many it started."""
        started = await self._turn()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        return len(started)

    # -- the loop -----------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self._turn()
            except Exception:  # the store down, or a bug: logged; the loop must go on
                log.exception("webhook delivery turn failed; retrying at the next poll")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.cfg.poll_s)

    async def _turn(self) -> list[asyncio.Task[None]]:
        now = self._clock()
        if await fire_ended_jobs(self.outbox, int(now), ENDED_JOBS_PER_TURN):
            now = self._clock()
        if now - self._pruned_at >= PRUNE_EVERY_S:
            self._pruned_at = now
            pruned = await self.outbox.prune(int(now - self.cfg.keep_s))
            if pruned:
                log.info("pruned %d finished webhook deliveries", pruned)
        return await self._claim_and_start(now)

    async def _claim_and_start(self, now: float) -> list[asyncio.Task[None]]:
        free = self.cfg.concurrency - len(self._tasks)
        if free <= 0:
            return []
        per_owner = self.cfg.per_owner
        full = sorted(o for o, n in self._by_owner.items() if n >= per_owner)
        candidates = await self.outbox.due(now, free * CANDIDATES_PER_SLOT, full)
        budget = Counter(self._by_owner)
        picked: list[str] = []
        for id_, owner in candidates:
            if len(picked) >= free:
                break
            if budget[owner] < per_owner:
                budget[owner] += 1
                picked.append(id_)
        if not picked:
            return []
        claimed = await self.outbox.claim(picked, now, self.cfg.lease_s)
        return [self._start(d) for d in claimed]

    def _start(self, delivery: Delivery) -> asyncio.Task[None]:
        task = asyncio.create_task(self._attempt(delivery), name=f"webhook-{delivery.id}")
        self._tasks[task] = delivery
        self._by_owner[delivery.owner] += 1
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        delivery = self._tasks.pop(task, None)
        if delivery is not None:
            self._by_owner[delivery.owner] -= 1
            if self._by_owner[delivery.owner] <= 0:
                del self._by_owner[delivery.owner]
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("webhook delivery %s crashed", getattr(delivery, "id", "?"), exc_info=exc)
        self._wake.set()  # a slot is free

    # -- one attempt --------------------------------------------------------------------------

    def principal(self, owner: str) -> Principal:
        """Whom an event is sent for: the principal given for that name (the operator), the
        configured caller of that name, else a restricted caller (a caller since removed
        from the config keeps no more than the least policy)."""
        given = self._principals.get(owner)
        if given is not None:
            return given
        callers = self._callers()
        if self._classes_of[0] is not callers:  # rebuilt only when the list was replaced
            self._classes_of = (callers, {c.name: c.caller_class for c in callers})
        cls = self._classes_of[1].get(owner)
        return Principal(owner, "fleet" if cls == "fleet" else "restricted")

    async def _attempt(self, d: Delivery) -> None:
        cfg = self.cfg
        policy = self._policy_for(self.principal(d.owner), cfg.timeout_s)
        body = d.event.encode()
        at = self._clock()
        started = time.monotonic()
        status: int | None = None
        error: str | None = None
        try:
            headers = signing.headers(d.secret, d.id, int(at), body)
            answer = await post(
                self._fetcher,
                d.url,
                policy,
                body,
                headers,
                max_response_bytes=cfg.max_response_bytes,
            )
            status = answer.status
            if not 200 <= status < 300:
                error = f"http_{status}"
        except SiftError as exc:
            error = exc.code
        except ValueError:  # a secret that is not whsec_<base64>: nothing can sign it
            error = "bad_secret"
            status = None
        duration_ms = round((time.monotonic() - started) * 1000)
        n = d.attempts + 1
        state = "failed" if error == "bad_secret" else outcome(status, n, cfg.max_attempts)
        now = self._clock()
        next_at = now + retry_delay_s(n, cfg.backoff_s, cfg.max_backoff_s)
        attempt = Attempt(n, at, status, error, duration_ms)
        if not await self.outbox.record(d, attempt, state, next_at if state == "pending" else now):
            log.info("webhook delivery %s: the lease was lost; the outcome is not recorded", d.id)
        elif state == "failed":
            log.info("webhook delivery %s to %s failed after %d attempts", d.id, d.owner, n)
