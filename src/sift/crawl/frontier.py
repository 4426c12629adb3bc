"""The filter every URL a crawl (or a map) discovers passes before it is enqueued.

In order, each step cheap before the next: the URL rules and the caller's egress policy
checks that need no I/O (``Fetcher.check_url``: scheme, port, local names, literal
addresses — a refused URL is never enqueued), the scope (``scope``), a page-like path
(``links.looks_like_page``), no trap (``trap``), the include and exclude globs. Then
``permitted`` does the checks that need I/O, each remembered: the host's addresses under
the caller's policy (resolved once per host and vetted like a fetch would), and robots.txt
when the crawl obeys it. The fetch still runs every guard again when the page is fetched.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Final

from sift.crawl.globs import PathGlobs
from sift.crawl.links import looks_like_page
from sift.crawl.offloop import CPU_LANE
from sift.crawl.scope import Scope, ScopeRule
from sift.crawl.trap import is_trap
from sift.errors import SiftError
from sift.fetch import Fetcher, FetchPolicy, RobotsChecker, Target
from sift.fetch.robots import Rules

# Hosts whose addresses were judged, remembered per frontier (one crawl, one caller).
MAX_JUDGED_HOSTS: Final = 4096
# How many URLs admit_all checks between two looks at the clock.
_CLOCK_EVERY: Final = 256
# URLs checked against their origin's robots.txt per batch, and how small a batch stays on
# the event loop (a check is ~20 microseconds).
CHECK_BATCH: Final = 4096
INLINE_CHECKS: Final = 256
# An origin's judgment: unreachable or refused (False), no robots.txt to obey (True), or
# the rules its robots.txt gives.
Verdict = bool | Rules


class Frontier:
    """``admit(url)`` → the normalised ``Target`` to enqueue, or None (see the module doc)."""

    def __init__(
        self,
        start: Target,
        scope: Scope,
        include: Iterable[str],
        exclude: Iterable[str],
        check: Callable[[str], Target],
    ) -> None:
        self.scope = ScopeRule(start, scope)
        self._include = PathGlobs(tuple(include))
        self._exclude = PathGlobs(tuple(exclude))
        self._check = check
        self._hosts: OrderedDict[tuple[str, int], bool] = OrderedDict()

    def normal(self, url: str) -> Target | None:
        """The URL checked and normalised, or None when it is invalid or refused by name."""
        try:
            return self._check(url)
        except SiftError:
            return None

    def admit(self, url: str) -> Target | None:
        t = self.normal(url)
        if t is None or not self.scope.allows(t):
            return None
        path = t.target.split("?", 1)[0]
        if not looks_like_page(path) or is_trap(path):
            return None
        if self._include and not self._include.matches(path):
            return None
        if self._exclude.matches(path):
            return None
        return t

    def admit_all(self, urls: Iterable[str], deadline: float | None = None) -> dict[str, Target]:
        """``admit`` for each of ``urls``: the admitted targets by URL, each once, in order.
        Pure CPU (tens of microseconds a URL), so callers run it in a thread for a large
        list; it stops early once ``time.monotonic()`` passes ``deadline``."""
        out: dict[str, Target] = {}
        for n, u in enumerate(urls):
            if deadline is not None and n % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
                break
            t = self.admit(u)
            if t is not None and t.url not in out:
                out[t.url] = t
        return out

    async def _host_ok(self, t: Target, fetcher: Fetcher, policy: FetchPolicy) -> bool:
        key = (t.host, t.port)
        ok = self._hosts.get(key)
        if ok is None:
            try:
                await fetcher.vetted_addresses(t, policy)
                ok = True
            except SiftError:
                ok = False  # refused, or no such name: never enqueued
            self._hosts[key] = ok
            if len(self._hosts) > MAX_JUDGED_HOSTS:
                self._hosts.popitem(last=False)
        return ok

    async def _judge_origin(
        self, t: Target, fetcher: Fetcher, policy: FetchPolicy, robots: RobotsChecker | None
    ) -> Verdict:
        if not await self._host_ok(t, fetcher, policy):
            return False
        if robots is None:
            return True
        try:
            return await robots.rules(t.origin)
        except SiftError:
            return False  # robots.txt unreachable: the origin is, too

    async def permitted(
        self,
        targets: Iterable[Target],
        fetcher: Fetcher,
        policy: FetchPolicy,
        robots: RobotsChecker | None,
        out: list[str] | None = None,
    ) -> list[str]:
        """The URLs of ``targets`` whose host the policy lets sift reach and, with
        ``robots``, whose robots.txt allows them; in order. Appended to ``out`` as they are
        judged when given: a caller cut short by its deadline keeps what was judged.

        Each origin is judged once (its addresses, its robots.txt: I/O); the URLs are then
        checked against its rules in batches, in a thread when a batch is large, so tens of
        thousands of sitemap URLs never hold the event loop."""
        out = [] if out is None else out
        token = robots.token if robots is not None else ""
        verdicts: dict[str, Verdict] = {}
        batch: list[Target] = []
        for t in targets:
            if t.origin not in verdicts:
                out += await _check(batch, verdicts, token)  # what was judged, first
                batch = []
                verdicts[t.origin] = await self._judge_origin(t, fetcher, policy, robots)
            batch.append(t)
            if len(batch) >= CHECK_BATCH:
                out += await _check(batch, verdicts, token)
                batch = []
        out += await _check(batch, verdicts, token)
        return out


async def _check(batch: list[Target], verdicts: dict[str, Verdict], token: str) -> list[str]:
    if len(batch) <= INLINE_CHECKS:
        return _allowed(batch, verdicts, token)
    return await CPU_LANE.run(_allowed, batch, verdicts, token)


def _allowed(batch: list[Target], verdicts: dict[str, Verdict], token: str) -> list[str]:
    out: list[str] = []
    for t in batch:
        verdict = verdicts[t.origin]
        if verdict is True or (verdict is not False and verdict.allowed(t.url, token)):
            out.append(t.url)
    return out
