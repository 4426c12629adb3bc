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

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Final

from sift.crawl.globs import PathGlobs
from sift.crawl.links import looks_like_page
from sift.crawl.scope import Scope, ScopeRule
from sift.crawl.trap import is_trap
from sift.errors import SiftError
from sift.fetch import Fetcher, FetchPolicy, RobotsChecker, Target

# Hosts whose addresses were judged, remembered per frontier (one crawl, one caller).
MAX_JUDGED_HOSTS: Final = 4096


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

    async def permitted(
        self,
        targets: Iterable[Target],
        fetcher: Fetcher,
        policy: FetchPolicy,
        robots: RobotsChecker | None,
    ) -> list[str]:
        """The URLs of ``targets`` whose host the policy lets sift reach and, with
        ``robots``, whose robots.txt allows them; in order."""
        out: list[str] = []
        for t in targets:
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
            if not ok:
                continue
            if robots is not None:
                try:
                    if not await robots.allowed(t.url):
                        continue
                except SiftError:
                    continue  # robots.txt unreachable: the origin is, too
            out.append(t.url)
        return out
