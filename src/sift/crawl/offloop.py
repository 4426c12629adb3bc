"""The crawl's CPU work, sent off the event loop: to the worker pool, in the caller's turn.

Parsing sitemaps and pages' links, admitting the URLs and checking them against robots.txt
froze every caller on the event loop (issue 24: a 16 MiB sitemap held it ~1.7 s); in a
thread of the server's process it still held the GIL the loop needs (a flood of maps made
another caller's cached fetch ~9x slower at p99). So ``OffLoop`` sends it to the worker
processes that render pages (``workers.pool.RenderPool``, built by the assembly and handed
down through the service): the jobs are ``crawl.cpujobs``, and they wait for a worker in
the same fair queue as renders, under the caller's name. A caller flooding maps queues
behind its own work; at most as many of its jobs run as there are workers, one per map or
crawl page it has in flight (``max_inflight`` bounds those), each holding at most one
document, one page or one chunk of URLs.

Only work too small to be worth the trip (a few dozen URLs, a page of a few KiB) runs on
the loop: well under a millisecond.

Each job has a deadline (``time.monotonic()``): ``job_s`` from its start, or the request's
deadline (a map's) if that comes first; it stops there by itself and answers what it has done, so
a job whose caller stops waiting is left to finish rather than killed (killing costs a
worker's restart). Its worker is killed only if it overruns that by ``kill_after_s``
(parsing in C code does not look at the clock). A job still queued at the request's
deadline is dropped (``TimeoutError``, as the rest of a map's deadline). A job that fails
(killed, out of memory) counts as finding nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from sift.crawl import cpujobs
from sift.crawl.cpujobs import Admission, Admitter
from sift.crawl.found import Found
from sift.crawl.links import page_links
from sift.errors import RenderFailed, RenderQueueTimeout
from sift.fetch.robots import Rules

if TYPE_CHECKING:
    from sift.workers import RenderPool

T = TypeVar("T")

# One job's own time limit when the request has no deadline (a crawl's page).
JOB_S: Final = 5.0
# How long past its deadline a job may run before its worker is killed.
KILL_AFTER_S: Final = 5.0
# Run on the event loop below these (each well under a millisecond): URLs to admit (~25 us
# each), a page's bytes to parse for links, URLs x (robots.txt bytes + 256) to check (a
# check costs ~2 us plus ~6 ns per byte of robots.txt).
INLINE_ADMIT_URLS: Final = 32
INLINE_PAGE_BYTES: Final = 4 << 10
INLINE_ROBOTS_WORK: Final = 128 << 10


class OffLoop:
    """One caller's crawl CPU work, for one map or one crawl page.

    ``deadline`` (``time.monotonic()``) and ``loop_deadline`` (the event loop's clock: when
    a queued job is dropped) are the same instant on two clocks, or both None.
    """

    def __init__(
        self,
        pool: RenderPool,
        caller: str,
        *,
        deadline: float | None = None,
        loop_deadline: float | None = None,
        job_s: float = JOB_S,
        kill_after_s: float = KILL_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._caller = caller
        self._deadline = deadline
        self._loop_deadline = loop_deadline
        self._job_s = job_s
        self._kill_after_s = kill_after_s
        self._clock = clock

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args, deadline)`` in a worker (see the module docstring)."""
        now = self._clock()
        stop = self._stop(now)
        try:
            return await self._pool.run(
                fn,
                *args,
                stop,
                timeout_s=max(0.0, stop - now) + self._kill_after_s,
                caller=self._caller,
                deadline=self._loop_deadline,
                on_cancel="finish",
            )
        except RenderQueueTimeout as exc:
            raise TimeoutError from exc

    def _stop(self, now: float) -> float:
        """When a job started ``now`` must end."""
        own = now + self._job_s
        return own if self._deadline is None else min(own, self._deadline)

    async def admit(self, urls: list[str], admission: Admission) -> Found:
        if len(urls) <= INLINE_ADMIT_URLS:
            return Admitter(admission).admit_all(urls, self._stop(self._clock()))
        try:
            return await self.run(cpujobs.admit_job, urls, admission)
        except RenderFailed:
            return {}

    async def links(
        self, body: bytes, page_url: str, max_links: int, admission: Admission
    ) -> Found:
        """The admitted links of an HTML page."""
        if len(body) <= INLINE_PAGE_BYTES:
            return await self.admit(page_links(body, page_url, max_links), admission)
        try:
            return await self.run(cpujobs.links_job, body, page_url, max_links, admission)
        except RenderFailed:
            return {}

    async def sitemap(
        self, body: bytes, max_bytes: int, max_entries: int, max_sitemaps: int, admission: Admission
    ) -> tuple[Found, int, list[str]]:
        """One sitemap document (``cpujobs.sitemap_job``); one that fails counts as empty."""
        try:
            return await self.run(
                cpujobs.sitemap_job, body, max_bytes, max_entries, max_sitemaps, admission
            )
        except RenderFailed:
            return {}, 0, []

    async def robots(self, chunk: str, rules: Rules, token: str) -> list[str]:
        """The URLs of ``chunk`` that ``rules`` allow, in order."""
        if rules.disallow_all:
            return []
        if rules.parser is None:
            return chunk.split("\n")
        if (chunk.count("\n") + 1) * (len(rules.text) + 256) <= INLINE_ROBOTS_WORK:
            urls = chunk.split("\n")
            return cpujobs.allowed_by(rules.parser, urls, token, self._stop(self._clock()))
        try:
            allowed = await self.run(cpujobs.robots_job, chunk, rules.text, token)
        except RenderFailed:
            return []
        return allowed.split("\n") if allowed else []
