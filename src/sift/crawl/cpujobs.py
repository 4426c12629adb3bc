"""The crawl's CPU work, as jobs for the worker processes (issue 24, finding 5).

Parsing a sitemap, admitting its URLs (``Admitter``: normal form, scope, a page-like path,
no trap, the include and exclude globs) and checking them against robots.txt is pure CPU:
for 50,000 URLs about 1.2 s of admission, 0.2 s of parsing and 0.1 s of robots checks (far
more under a robots.txt of thousands of rules). In a thread of the server's process it
still held the GIL the event loop needs; so each function here is a job the worker pool
(``workers.pool``) runs in another process, in the caller's turn.

Jobs are module-level functions (the pool pickles them by name) whose arguments and answers
are compact: URLs travel as chunks of newline-joined strings (``crawl.found``). Every job
is bounded in bytes (its input), entries and time: ``deadline`` is ``time.monotonic()``
seconds, one clock for every process of the machine; a job that passes it returns what it
has done.

Admission makes the checks that need no I/O. What needs I/O — the host's addresses under
the caller's policy (IP literals included), robots.txt — is judged per origin by the
``Frontier`` in the server's process.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from protego import Protego

from sift.crawl.found import Found, chunked
from sift.crawl.globs import PathGlobs
from sift.crawl.links import looks_like_page, page_links
from sift.crawl.scope import Scope, ScopeRule
from sift.crawl.sitemap import parse_sitemap
from sift.crawl.trap import is_trap
from sift.errors import SiftError
from sift.fetch.policy import FetchPolicy
from sift.fetch.url import Target, validate_url

# How many entries are handled between two looks at the clock: URLs admitted (~25 us each),
# URLs checked against robots.txt (from 2 us each to milliseconds under a huge robots.txt).
_CLOCK_EVERY: Final = 256
_ROBOTS_CLOCK_EVERY: Final = 8


@dataclass(frozen=True)
class Admission:
    """What admitting a URL needs, all of it picklable: the crawl's (or map's) start, scope,
    globs, and the caller's fetch policy (ports, refused local names)."""

    start: Target
    scope: Scope
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    policy: FetchPolicy


class Admitter:
    """``admit(url)``: the URL in normal form, or None when it is not to be enqueued."""

    def __init__(self, admission: Admission) -> None:
        self.scope = ScopeRule(admission.start, admission.scope)
        self._policy = admission.policy
        self._include = PathGlobs(admission.include)
        self._exclude = PathGlobs(admission.exclude)

    def normal(self, url: str) -> Target | None:
        try:
            return validate_url(url, self._policy)
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

    def admit_all(self, urls: Iterable[str], deadline: float | None) -> Found:
        """Each admitted URL once, grouped by origin (see ``Found``); stops once
        ``time.monotonic()`` passes ``deadline``."""
        by_origin: dict[str, dict[str, None]] = {}
        for n, u in enumerate(urls):
            if deadline is not None and n % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
                break
            t = self.admit(u)
            if t is not None:
                by_origin.setdefault(t.origin, {})[t.url] = None
        return {origin: chunked(list(urls)) for origin, urls in by_origin.items()}


def admit_job(urls: list[str], admission: Admission, deadline: float) -> Found:
    """Admit a list of URLs."""
    return Admitter(admission).admit_all(urls, deadline)


def links_job(
    body: bytes, page_url: str, max_links: int, admission: Admission, deadline: float
) -> Found:
    """The admitted links of an HTML page (``links.page_links``: at most ``max_links``)."""
    return Admitter(admission).admit_all(page_links(body, page_url, max_links), deadline)


def sitemap_job(
    body: bytes,
    max_bytes: int,
    max_entries: int,
    max_sitemaps: int,
    admission: Admission,
    deadline: float,
) -> tuple[Found, int, list[str]]:
    """One sitemap document: its admitted page URLs, how many page URLs it listed (at most
    ``max_entries``), and at most ``max_sitemaps`` of the sitemaps it names on hosts in
    scope, in normal form (those an index leads to)."""
    pages, sitemaps = parse_sitemap(body, max_bytes, max_entries, deadline)
    admitter = Admitter(admission)
    follow: dict[str, None] = {}
    for sm in sitemaps:
        t = admitter.normal(sm)
        if t is not None and admitter.scope.allows_host(t):
            follow[t.url] = None
            if len(follow) >= max_sitemaps:
                break
    return admitter.admit_all(pages, deadline), len(pages), list(follow)


def robots_job(chunk: str, robots_text: str, token: str, deadline: float) -> str:
    """The URLs of ``chunk`` that ``robots_text`` (a robots.txt that parsed to rules: a 2xx
    answer) lets ``token`` fetch, newline-joined, in order; those checked by ``deadline``."""
    parser = Protego.parse(robots_text)
    return "\n".join(allowed_by(parser, chunk.split("\n"), token, deadline))


def allowed_by(parser: Protego, urls: list[str], token: str, deadline: float) -> list[str]:
    out: list[str] = []
    for n, u in enumerate(urls):
        if n % _ROBOTS_CLOCK_EVERY == 0 and time.monotonic() > deadline:
            break
        if parser.can_fetch(u, token):
            out.append(u)
    return out
