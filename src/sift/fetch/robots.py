"""robots.txt per RFC 9309, parsed by protego, cached per origin.

Outcome of fetching ``<origin>/robots.txt`` (through the same guarded fetcher, same policy):

- 2xx: the rules apply (the first 512 KiB are parsed; RFC 9309 asks for at least 500 KiB).
- redirects are followed within the policy's limit; a longer chain counts as unavailable.
- 4xx (except 429): unavailable → everything is allowed.
- 429, 5xx, or unreachable (DNS, connect, TLS, timeout): everything is disallowed. sift
  treats 429 like a server error, as major crawlers do.
  When the origin itself is unreachable (DNS, connect, TLS, timeout), ``allowed`` raises
  that error rather than answering ``False``, so callers see ``connect_failed`` and not a
  misleading ``robots_disallowed``.
- refused by the egress guard: never cached — a refusal says what this caller may reach,
  not what the origin answers, and must never deny a caller who may reach it. When the
  origin itself is refused (its name, port or address), ``allowed`` raises ``Blocked``
  (``blocked_address``: the page would be refused the same way); when robots.txt redirects
  somewhere this policy may not go, that check answers "disallowed" (unreachable rules).

The cache given to a checker is keyed by the checker's egress scope (see
``fetch.policy.egress_scope``), so outcomes seen under one policy never answer another.

**Off the event loop.** Parsing is pure Python at ~0.4-1 us a byte (a 512 KiB file: 0.26-0.54 s
on the 2-core machine) and a check walks every rule of the group (10-25 ms for 11,000
rules), so a file over ``INLINE_PARSE_BYTES`` is parsed, and checked when over
``INLINE_CHECK_BYTES``, on one thread of the checker's own (``ThreadPoolExecutor(1)``), not
on the loop. Not in the render workers as the crawl's URL checks are: the parser must come
back to answer every later check, and pickling it costs more than parsing (a 512 KiB
file's parser: 0.5 s to pickle, 0.8 s to load). The thread still takes the GIL, but only
for the switch interval at a time (5 ms): the loop waits milliseconds, not the parse
(``tests/test_robots.py`` probes the loop's lag) — save for the garbage collector's full
collections over the parser's objects, which hold the GIL from any thread (0.1-0.15 s each
for 27,000 rules). One thread per checker bounds it: parses
of several origins queue, each once a TTL (parsed rules are kept in memory).

Results are cached per origin for ``ttl_s`` (24 h by default); failures (429, 5xx,
unreachable) only for ``error_ttl_s``, so a site that comes back is not shut out for a day.
``Crawl-delay`` is exposed for the batch runner. The ``user_agent_token`` (``sift``) is the
name matched against ``User-agent`` lines; the request itself carries the fetcher's honest
User-Agent.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from protego import Protego

from sift.errors import (
    Blocked,
    ConnectFailed,
    DnsFailure,
    SiftError,
    TlsFailure,
    TooManyRedirects,
    UpstreamTimeout,
)
from sift.fetch.policy import FetchPolicy
from sift.fetch.url import validate_url

T = TypeVar("T")
ROBOTS_MAX_BYTES = 512 << 10
# Parsed on the event loop up to this size (~0.4-1 ms), on the checker's thread beyond.
INLINE_PARSE_BYTES = 1 << 10
# Checked on the event loop against rules parsed from up to this much (~6 ns a byte: under
# a millisecond), on the checker's thread beyond.
INLINE_CHECK_BYTES = 128 << 10
UNREACHABLE = 0  # the status stored when robots.txt could not be fetched at all
UNAVAILABLE = 404  # the status stored for a redirect chain longer than the policy allows
_PARSED_CACHE_SIZE = 1024
# robots.txt failures that mean the origin itself is unreachable: re-raised to the caller.
_ORIGIN_FAILURES: dict[str, type[SiftError]] = {
    cls.code: cls for cls in (DnsFailure, ConnectFailed, TlsFailure, UpstreamTimeout)
}

_ORIGIN_REASONS: dict[str, str] = {
    "dns_failure": "its host name did not resolve",
    "connect_failed": "sift could not connect to its host",
    "tls_failure": "TLS with its host failed",
    "upstream_timeout": "its host did not answer in time",
}


class _RedirectRefused(Exception):
    """robots.txt redirected to a URL this policy may not reach."""


class RobotsResponse(Protocol):
    """The parts of a fetch result a checker reads."""

    @property
    def status(self) -> int: ...

    @property
    def body(self) -> bytes: ...


class RobotsFetcher(Protocol):
    """What a checker needs of the fetcher (``fetch.client.Fetcher`` in production): one
    guarded GET under a policy. The checker is handed one; it does not import the fetcher's
    module, which itself takes a checker."""

    async def fetch(
        self, url: str, policy: FetchPolicy, *, allow_truncation: bool = False
    ) -> RobotsResponse: ...


class RobotsCache(Protocol):
    """Where fetched robots.txt files live between checks (the dcache in production)."""

    async def get(self, origin: str) -> tuple[int, bytes, int] | None:
        """``(status, body, fetched_at)`` for ``origin``, or ``None``."""
        ...

    async def put(self, origin: str, status: int, body: bytes, fetched_at: int) -> None: ...


class MemoryRobotsCache:
    """A dict-backed ``RobotsCache`` for tests and single-process use."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[int, bytes, int]] = {}

    async def get(self, origin: str) -> tuple[int, bytes, int] | None:
        return self.entries.get(origin)

    async def put(self, origin: str, status: int, body: bytes, fetched_at: int) -> None:
        self.entries[origin] = (status, body, fetched_at)


@dataclass(frozen=True)
class Rules:
    """The decision for one origin: allow all, disallow all, or what the parser says.

    ``failure`` names the error code when robots.txt was unreachable (``status`` 0).
    ``text`` is what the parser read: a worker process checking many URLs against these
    rules parses it again (shipping the text is a copy; pickling the parser is not cheap).
    """

    status: int
    parser: Protego | None
    failure: str = ""
    text: str = field(default="", repr=False, compare=False)

    @property
    def disallow_all(self) -> bool:
        return self.status == UNREACHABLE or self.status == 429 or self.status >= 500

    def allowed(self, url: str, token: str) -> bool:
        if self.disallow_all:
            return False
        if self.parser is None:
            return True
        return bool(self.parser.can_fetch(url, token))

    def crawl_delay(self, token: str) -> float | None:
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(token)
        return float(delay) if delay is not None else None


def rules_for(status: int, body: bytes) -> Rules:
    """Rules from a cached ``(status, body)``; for ``UNREACHABLE`` the body is the error code."""
    if 200 <= status < 300:
        text = body[:ROBOTS_MAX_BYTES].decode("utf-8", "replace")
        return Rules(status, Protego.parse(text), text=text)
    if status == UNREACHABLE:
        return Rules(status, None, body.decode("ascii", "replace"))
    return Rules(status, None)


class RobotsChecker:
    """Answers "may sift fetch this URL?" for one policy, fetching robots.txt as needed.

    ``now`` returns unix seconds (defaults to ``time.time``); tests pass a fixed clock.
    Concurrent checks for one origin share a single robots.txt fetch. Large files are
    parsed and checked on ``cpu`` (default: one thread of this checker's own, started on
    the first large file), never on the event loop.
    """

    def __init__(
        self,
        fetcher: RobotsFetcher,
        policy: FetchPolicy,
        cache: RobotsCache,
        user_agent_token: str,
        now: Callable[[], float] | None = None,
        ttl_s: int = 86400,
        error_ttl_s: int = 600,
        cpu: Executor | None = None,
    ) -> None:
        self._fetcher = fetcher
        self._cpu = cpu
        # One checker serves every caller of its egress scope: its fetches name no caller,
        # so their DNS lookups count against the caller whose fetch needs them (the fetcher's
        # ``lookup_caller``), never against whoever made the checker.
        self._policy = replace(
            policy,
            max_download_bytes=min(policy.max_download_bytes, ROBOTS_MAX_BYTES),
            caller="",
        )
        self._cache = cache
        self.token = user_agent_token
        self._now = now or time.time
        self._ttl_s = ttl_s
        self._error_ttl_s = error_ttl_s
        # origin -> (status, fetched_at, rules): parsed robots.txt kept in memory, so a fresh
        # entry is answered without a trip to the cache.
        self._parsed: OrderedDict[str, tuple[int, int, Rules]] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[Rules]] = {}

    async def allowed(self, url: str) -> bool:
        """Whether robots.txt of ``url``'s origin lets ``user_agent_token`` fetch it.

        When robots.txt is unreachable because the *origin* is (DNS, connect, TLS, timeout),
        the fetch is disallowed by raising that error instead of returning ``False``: the
        caller then learns why (``connect_failed``), not a misleading ``robots_disallowed``.
        """
        target = validate_url(url)
        rules = await self.rules(target.origin)
        failure = _ORIGIN_FAILURES.get(rules.failure)
        if failure is not None:
            # Name the URL the caller asked for: robots.txt is sift's detour, not theirs.
            raise failure(f"{url} could not be fetched: {_ORIGIN_REASONS[rules.failure]}.")
        if len(rules.text) > INLINE_CHECK_BYTES:
            return await self._off_loop(rules.allowed, target.url, self.token)
        return rules.allowed(target.url, self.token)

    async def _off_loop(self, fn: Callable[..., T], *args: object) -> T:
        if self._cpu is None:
            self._cpu = ThreadPoolExecutor(1, thread_name_prefix="sift-robots")
        return await asyncio.get_running_loop().run_in_executor(self._cpu, fn, *args)

    async def crawl_delay(self, url: str) -> float | None:
        """The origin's ``Crawl-delay`` for our token, in seconds, if it sets one."""
        rules = await self.rules(validate_url(url).origin)
        return rules.crawl_delay(self.token)

    async def rules(self, origin: str) -> Rules:
        """The rules for ``origin`` (``scheme://host[:port]``), from memory, cache or a fetch."""
        hit = self._parsed.get(origin)
        if hit is not None and self._fresh(hit[0], hit[1], int(self._now())):
            self._parsed.move_to_end(origin)
            return hit[2]
        while (pending := self._inflight.get(origin)) is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise
                # The task loading this origin was cancelled, not us: load it ourselves.
        future: asyncio.Future[Rules] = asyncio.get_running_loop().create_future()
        self._inflight[origin] = future
        try:
            rules = await self._load(origin)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark it retrieved: no waiter is not an error
            raise
        else:
            future.set_result(rules)
            return rules
        finally:
            del self._inflight[origin]

    async def _load(self, origin: str) -> Rules:
        now = int(self._now())
        cached = await self._cache.get(origin)
        if cached is not None and self._fresh(cached[0], cached[2], now):
            return await self._parse_cached(origin, cached)
        try:
            status, body = await self._fetch(origin)
        except _RedirectRefused:
            # Disallowed for this check only: a guard refusal is never stored (see above).
            return Rules(UNREACHABLE, None, Blocked.code)
        await self._cache.put(origin, status, body, now)
        return await self._parse_cached(origin, (status, body, now))

    def _fresh(self, status: int, fetched_at: int, now: int) -> bool:
        ttl = (
            self._ttl_s
            if not rules_for(status, b"").disallow_all
            else min(self._ttl_s, self._error_ttl_s)
        )
        return 0 <= now - fetched_at < ttl

    async def _parse_cached(self, origin: str, entry: tuple[int, bytes, int]) -> Rules:
        status, body, fetched_at = entry
        hit = self._parsed.get(origin)
        if hit is not None and hit[1] == fetched_at:
            self._parsed.move_to_end(origin)
            return hit[2]
        if len(body) > INLINE_PARSE_BYTES and 200 <= status < 300:
            rules = await self._off_loop(rules_for, status, body)
        else:
            rules = rules_for(status, body)
        self._parsed[origin] = (status, fetched_at, rules)
        if len(self._parsed) > _PARSED_CACHE_SIZE:
            self._parsed.popitem(last=False)
        return rules

    async def _fetch(self, origin: str) -> tuple[int, bytes]:
        try:
            result = await self._fetcher.fetch(
                f"{origin}/robots.txt", self._policy, allow_truncation=True
            )
        except TooManyRedirects:
            return UNAVAILABLE, b""
        except Blocked as exc:
            if exc.__cause__ is None:
                raise  # the origin itself is refused (the fetcher chains redirect refusals)
            raise _RedirectRefused from exc
        except SiftError as exc:
            return UNREACHABLE, exc.code.encode()
        if 300 <= result.status < 400:
            return UNAVAILABLE, b""
        return result.status, result.body
