"""The filter every URL a crawl (or a map) discovers passes before it is enqueued.

Admission first — the checks that need no I/O, each cheap before the next (``cpujobs.Admitter``:
the URL rules and the caller's policy by name — scheme, port, local names —, the scope
(``scope``), a page-like path (``links.looks_like_page``), no trap (``trap``), the include
and exclude globs) — run where the URLs were found, in a worker process for any sizeable
list (``offloop``). Then ``permitted`` does the checks that need I/O, once per origin and
remembered: the host's addresses under the caller's policy (resolved once per host and
vetted like a fetch would; an IP literal is vetted here too), and robots.txt when the
crawl obeys it; the origin's URLs are then checked against its rules, off the loop again.
The fetch still runs every guard again when the page is fetched.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from sift.crawl.cpujobs import Admission, Admitter
from sift.crawl.found import Found
from sift.crawl.offloop import OffLoop
from sift.crawl.scope import Scope
from sift.errors import SiftError
from sift.fetch import Fetcher, FetchPolicy, RobotsChecker, Target
from sift.fetch.robots import Rules
from sift.fetch.url import validate_url

# Hosts whose addresses were judged, remembered per frontier (one crawl, one caller).
MAX_JUDGED_HOSTS: Final = 4096


class Frontier:
    """A crawl's (or a map's) filter: ``admission`` (picklable, for ``OffLoop``) and the
    per-origin judgments of ``permitted`` (see the module doc)."""

    def __init__(
        self,
        start: Target,
        scope: Scope,
        include: tuple[str, ...],
        exclude: tuple[str, ...],
        policy: FetchPolicy,
        check: Callable[[str], Target],
    ) -> None:
        self.admission = Admission(start, scope, tuple(include), tuple(exclude), policy)
        self._admitter = Admitter(self.admission)
        self.scope = self._admitter.scope
        self._check = check
        self._hosts: OrderedDict[tuple[str, int], bool] = OrderedDict()

    def normal(self, url: str) -> Target | None:
        """The URL checked (``check``: the fetcher's checks without I/O) and normalised, or
        None when it is invalid or refused by name."""
        try:
            return self._check(url)
        except SiftError:
            return None

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
        self, origin: str, fetcher: Fetcher, policy: FetchPolicy, robots: RobotsChecker | None
    ) -> Rules | bool:
        """False: unreachable or refused; True: nothing to obey; else the origin's rules."""
        try:
            t = validate_url(origin, policy)
        except SiftError:
            return False
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
        found: Found,
        fetcher: Fetcher,
        policy: FetchPolicy,
        robots: RobotsChecker | None,
        offloop: OffLoop,
        *,
        out: list[str] | None = None,
        max_urls: int | None = None,
    ) -> list[str]:
        """The URLs of ``found`` (admitted) whose host the policy lets sift reach and, with
        ``robots``, whose robots.txt allows them: origin by origin, in order, each once and
        none already in ``out``, until ``out`` holds ``max_urls`` (None: all of them).
        Appended to ``out`` as they are judged when given: a caller cut short by its
        deadline keeps what was judged."""
        out = [] if out is None else out
        seen = set(out)
        max_urls = max_urls if max_urls is not None else 1 << 62
        token = robots.token if robots is not None else ""
        for origin, chunks in found.items():
            if len(out) >= max_urls:
                break
            verdict = await self._judge_origin(origin, fetcher, policy, robots)
            if verdict is False:
                continue
            for chunk in chunks:
                if len(out) >= max_urls:
                    break
                allowed = (
                    chunk.split("\n")
                    if isinstance(verdict, bool)
                    else await offloop.robots(chunk, verdict, token)
                )
                for u in allowed:
                    if u not in seen:
                        seen.add(u)
                        out.append(u)
                        if len(out) >= max_urls:
                            break
        return out
