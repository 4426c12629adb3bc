"""Fair admission to the render workers: callers take turns, a deadline per wait.

The render pool has a few workers and many callers. Admitting renders first come, first
served let one caller with many slow renders (each stopped only at its class's time limit)
hold every worker for many limits in a row while everyone else waited behind its backlog.
``FairQueue`` keeps one FIFO per caller and hands each free slot to the queued caller
served least recently: callers with backlogs take turns (round robin), and a caller that
comes back after a while goes first, so its render waits for the next free slot, not behind
another caller's backlog. (A caller never served, or not for a long time, counts as served
before everyone else; the memory of who was served when is bounded.)

**A turn kept for callers with nothing running** (``reserved``). Taking turns still let
one caller hold every slot: a caller with many slow renders fills each slot as it frees,
so another caller's render, first in line, waited for the next one to end — up to a whole
render time limit. So beyond the ``slots`` turns there are ``reserved`` more, which only a
caller with nothing running may take: such a caller starts at once unless ``reserved``
other callers are doing the same. The ordinary turns are handed out only while fewer than
``slots`` are in use, so the work running is at most ``slots`` (the cores) but for the
short time a caller with nothing running borrows a kept turn, and a lone caller uses
exactly what it used before (nothing is held back from it). Why this rule rather than
capping a caller at ``slots`` - 1 (half the workers idle for a lone caller on two cores) or
killing a flood's render to make room (its work lost, and retried): docs/service.md and
docs/benchmarks.md (``bench/fairness_render.py --reserved``).

A waiter whose deadline passes while it is still queued is dropped with
``RenderQueueTimeout``; a waiter that is cancelled (its client hung up, its flight was
abandoned) leaves the queue at once. Only the event loop touches it: no lock.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque

from sift.errors import RenderQueueTimeout, RenderUnavailable

RETRY_AFTER_S = 1
# Callers whose last turn is remembered; the oldest are forgotten first, which keeps their
# place: a forgotten caller counts as served before everyone remembered.
SERVED_MEMORY = 10_000


class FairQueue:
    """``slots`` places, handed out in turns across callers (``acquire``/``release``), and
    ``reserved`` more that only a caller with nothing running may take.

    Deadlines are event-loop times (``loop.time()``); ``None`` waits as long as it takes.
    """

    def __init__(self, slots: int, reserved: int = 0) -> None:
        if slots < 1:
            raise ValueError("a fair queue needs at least one slot")
        if reserved < 0:
            raise ValueError("reserved turns cannot be negative")
        self.slots = slots
        self.reserved = reserved
        self._in_use = 0
        # Slots each caller holds now (callers holding none are absent).
        self._running: dict[str, int] = {}
        # One FIFO per caller with renders queued, in the order they first queued.
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}
        # When each caller was last given a slot (a turn number), oldest first.
        self._served: dict[str, int] = {}
        self._turns = itertools.count()
        self._closed = False

    def queued(self, caller: str | None = None) -> int:
        """Waiters still queued (all callers', or one caller's)."""
        if caller is not None:
            return sum(not f.done() for f in self._queues.get(caller, ()))
        return sum(not f.done() for q in self._queues.values() for f in q)

    @property
    def in_use(self) -> int:
        return self._in_use

    def running(self, caller: str) -> int:
        """Slots ``caller`` holds now."""
        return self._running.get(caller, 0)

    def _may_take(self, caller: str) -> bool:
        if self._in_use < self.slots:
            return True
        return self._in_use < self.slots + self.reserved and caller not in self._running

    async def acquire(self, caller: str, deadline: float | None) -> None:
        """Take a slot, waiting for ``caller``'s turn; raises ``RenderQueueTimeout`` when
        ``deadline`` passes first, ``RenderUnavailable`` once closed."""
        if self._closed:
            raise RenderUnavailable("the render pool is shut down")
        if not self._queues.get(caller) and self._may_take(caller) and not self._pending():
            self._take(caller)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(caller, deque()).append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release(caller)  # granted in the very moment it gave up: pass it on
            else:
                waiter.cancel()
                self._forget(caller, waiter)
            if isinstance(exc, TimeoutError):
                err = RenderQueueTimeout(
                    "every render worker stayed busy until this request's deadline "
                    "(timeout_s); the render was dropped from the queue before it started"
                )
                err.headers["Retry-After"] = str(RETRY_AFTER_S)
                raise err from None
            raise

    def release(self, caller: str) -> None:
        """Give back a slot ``caller`` held: the queued caller served least recently that
        may take one gets it (a kept turn only goes to a caller with nothing running)."""
        held = self._running.get(caller, 0)
        if held <= 0:
            raise ValueError(f"{caller!r} holds no slot to release")
        if held == 1:
            del self._running[caller]
        else:
            self._running[caller] = held - 1
        self._in_use -= 1
        self._pump()

    def _pending(self) -> bool:
        """Whether a queued caller could take a slot now (then it goes first)."""
        return any(self._may_take(c) for c in self._queues)

    def _pump(self) -> None:
        """Hand slots to queued callers, least recently served first, while any may take
        one."""
        while self._queues:
            ready = [c for c in self._queues if self._may_take(c)]
            if not ready:
                return
            caller = min(ready, key=lambda c: self._served.get(c, -1))
            queue = self._queues[caller]
            waiter = queue.popleft()
            if not queue:
                del self._queues[caller]
            if not waiter.done():  # (a waiter cancelled but not yet forgotten is skipped)
                waiter.set_result(None)
                self._take(caller)

    def _take(self, caller: str) -> None:
        self._in_use += 1
        self._running[caller] = self._running.get(caller, 0) + 1
        self._mark_served(caller)

    def _mark_served(self, caller: str) -> None:
        self._served.pop(caller, None)
        self._served[caller] = next(self._turns)
        if len(self._served) > SERVED_MEMORY:
            del self._served[next(iter(self._served))]

    def close(self) -> None:
        """Fail every queued waiter with ``RenderUnavailable``; later acquires fail too."""
        self._closed = True
        queues, self._queues = self._queues, {}
        for queue in queues.values():
            for waiter in queue:
                if not waiter.done():
                    waiter.set_exception(RenderUnavailable("the render pool is shut down"))

    def _forget(self, caller: str, waiter: asyncio.Future[None]) -> None:
        queue = self._queues.get(caller)
        if queue is None:
            return
        try:
            queue.remove(waiter)
        except ValueError:
            return
        if not queue:
            del self._queues[caller]
