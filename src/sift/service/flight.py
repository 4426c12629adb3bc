"""Single flight: concurrent callers asking for the same work share one run of it.

The pipeline shares its fetches (per page key and policy) and its renders (per digest and
render options) this way, so a burst of identical requests costs one upstream fetch and one
render.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Flights:
    """The flights in progress, by key. Only the event loop touches it."""

    def __init__(self) -> None:
        self._flights: dict[tuple[object, ...], asyncio.Task[Any]] = {}
        self._waiters: dict[asyncio.Task[Any], int] = {}  # fetch flights: who still waits

    async def once(
        self,
        key: tuple[object, ...],
        make: Callable[[], Awaitable[T]],
        *,
        cancel_abandoned: bool = False,
    ) -> T:
        """Single flight: concurrent callers with the same key share one run of ``make``.

        The shared work runs in its own task, so one waiter being cancelled (a client
        hanging up, a waiter's own deadline) never cancels it for the others. With
        ``cancel_abandoned`` it is cancelled when the last waiter leaves before it is done.
        """
        task = self._flights.get(key)
        if task is None or task.cancelling():
            # (An abandoned flight being cancelled is not joined: a new one starts.)
            task = asyncio.ensure_future(make())
            self._flights[key] = task
            task.add_done_callback(lambda t: self._flight_done(key, t))
        if not cancel_abandoned:
            result: T = await asyncio.shield(task)
            return result
        self._waiters[task] = self._waiters.get(task, 0) + 1
        try:
            result = await asyncio.shield(task)
        finally:
            left = self._waiters.pop(task) - 1
            if left:
                self._waiters[task] = left
            elif not task.done():
                task.cancel()
        return result

    def _flight_done(self, key: tuple[object, ...], task: asyncio.Future[Any]) -> None:
        if self._flights.get(key) is task:  # not a newer flight that replaced a cancelled one
            del self._flights[key]
        # Retrieved even when every waiter has gone (a cancelled batch target, a client that
        # hung up), so an abandoned flight's error is not logged as "never retrieved".
        if not task.cancelled():
            task.exception()
