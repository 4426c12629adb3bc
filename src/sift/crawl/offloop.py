"""The crawl's CPU work off the event loop, one piece at a time.

Parsing sitemaps, admitting their URLs and checking them against robots.txt is pure CPU:
tens of thousands of URLs take about a second. On the event loop it froze every caller
(issue 24); on many threads at once it still starves the loop, which must win the GIL back
from each of them in turn. So it runs on one thread of its own, a lane shared by every map
and crawl in the process: the loop competes with one thread at most, and a caller flooding
maps queues behind its own work (and everyone else's), never in front of a fetch.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Lane:
    """One worker thread, started on first use (no thread at import)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))


# The process's one lane for crawl CPU work: a lock-like shared resource, like the GIL it
# works around, not a service (it holds no state beyond its idle thread).
CPU_LANE = Lane("sift-crawl-cpu")
