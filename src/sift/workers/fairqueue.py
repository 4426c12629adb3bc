"""Fair admission to the render workers: callers take turns, a deadline per wait.

The render pool has a few workers and many callers. Admitting renders first come, first
served let one caller with many slow renders (each stopped only at its class's time limit)
hold every worker for many limits in a row while everyone else waited behind its backlog.
``FairQueue`` keeps one FIFO per caller and hands each free slot to the queued caller
served least recently: callers with backlogs take turns (round robin), and a caller that
comes back after a while goes first, so its render waits for the next free slot, not behind
another caller's backlog. (A caller never served, or not for a long time, counts as served
before everyone else; the memory of who was served when is bounded.)

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
    """``slots`` places, handed out in turns across callers (``acquire``/``release``).

    Deadlines are event-loop times (``loop.time()``); ``None`` waits as long as it takes.
    """

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("a fair queue needs at least one slot")
        self.slots = slots
        self._free = slots
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
        return self.slots - self._free

    async def acquire(self, caller: str, deadline: float | None) -> None:
        """Take a slot, waiting for ``caller``'s turn; raises ``RenderQueueTimeout`` when
        ``deadline`` passes first, ``RenderUnavailable`` once closed."""
        if self._closed:
            raise RenderUnavailable("the render pool is shut down")
        if self._free > 0 and not self._queues:
            self._free -= 1
            self._mark_served(caller)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(caller, deque()).append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # granted in the very moment it gave up: pass the slot on
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

    def release(self) -> None:
        """Give a slot back: the queued caller served least recently gets it."""
        self._free += 1
        while self._free > 0 and self._queues:
            caller = min(self._queues, key=lambda c: self._served.get(c, -1))
            queue = self._queues[caller]
            waiter = queue.popleft()
            if not queue:
                del self._queues[caller]
            if not waiter.done():  # (a waiter cancelled but not yet forgotten is skipped)
                waiter.set_result(None)
                self._free -= 1
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
