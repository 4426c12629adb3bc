"""robots.txt (RFC 9309) through the guarded fetcher, with a fixed clock and a memory cache."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from sift.errors import Blocked, ConnectFailed, DnsFailure, RobotsDisallowed
from sift.fetch import (
    Fetcher,
    FetchPolicy,
    MemoryRobotsCache,
    RobotsChecker,
    StaticResolver,
    restricted_policy,
)
from sift.fetch.robots import rules_for
from upstream import Upstream

ROBOTS = b"""\
User-agent: *
Disallow: /

User-agent: sift
Disallow: /private
Allow: /private/ok
Crawl-delay: 2.5
"""
NOW = 1_764_468_000


@pytest.fixture
async def up() -> AsyncIterator[Upstream]:
    async with Upstream("127.0.1.1") as server:
        server.page("/robots.txt", ROBOTS, content_type="text/plain")
        for path in ("/public", "/private/x", "/private/ok"):
            server.page(path, f"page {path}")
        yield server


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent="sift/0.1.0 (+https://github.com/sift-fetch/sift)",
        resolver=StaticResolver({"pub.test": ["127.0.1.1"], "other.test": ["127.0.1.1"]}),
        extra_public_cidrs=["127.0.1.0/24"],
    ) as f:
        yield f


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def checker(
    fetcher: Fetcher,
    up: Upstream,
    cache: MemoryRobotsCache | None = None,
    clock: Clock | None = None,
) -> RobotsChecker:
    policy = restricted_policy(frozenset({up.port}), timeout_s=5.0)
    return RobotsChecker(fetcher, policy, cache or MemoryRobotsCache(), "sift", clock or Clock())


def url(up: Upstream, path: str, host: str = "pub.test") -> str:
    return f"http://{host}:{up.port}{path}"


async def test_rules_for_our_token(up: Upstream, fetcher: Fetcher) -> None:
    robots = checker(fetcher, up)
    assert await robots.allowed(url(up, "/public")) is True
    assert await robots.allowed(url(up, "/private/x")) is False
    assert await robots.allowed(url(up, "/private/ok")) is True
    assert await robots.crawl_delay(url(up, "/public")) == 2.5
    assert up.hits["/robots.txt"] == 1
    assert up.requests[0].headers["user-agent"].startswith("sift/0.1.0")


async def test_fetch_refuses_disallowed_urls(up: Upstream, fetcher: Fetcher) -> None:
    robots = checker(fetcher, up)
    policy = restricted_policy(frozenset({up.port}))
    with pytest.raises(RobotsDisallowed) as info:
        await fetcher.fetch(url(up, "/private/x"), policy, robots=robots)
    assert (info.value.code, info.value.status) == ("robots_disallowed", 403)
    assert up.hits["/private/x"] == 0
    ok = await fetcher.fetch(url(up, "/public"), policy, robots=robots)
    assert ok.body == b"page /public"


async def test_every_redirect_hop_is_checked(up: Upstream, fetcher: Fetcher) -> None:
    up.redirect("/go", url(up, "/private/x", host="other.test"))
    policy = restricted_policy(frozenset({up.port}))
    with pytest.raises(RobotsDisallowed):
        await fetcher.fetch(url(up, "/go"), policy, robots=checker(fetcher, up))
    assert (up.hits["/go"], up.hits["/private/x"], up.hits["/robots.txt"]) == (1, 0, 2)


@pytest.mark.parametrize(("status", "allowed"), [
    (404, True), (403, True), (410, True), (401, True), (429, False), (500, False), (503, False),
])  # fmt: skip
async def test_status_rules(up: Upstream, fetcher: Fetcher, status: int, allowed: bool) -> None:
    up.page("/robots.txt", ROBOTS, status=status)
    assert await checker(fetcher, up).allowed(url(up, "/private/x")) is allowed


async def test_unreachable_origin_raises_its_own_error(fetcher: Fetcher) -> None:
    async with Upstream("127.0.1.1") as up:
        port = up.port
    cache = MemoryRobotsCache()
    robots = RobotsChecker(fetcher, FetchPolicy(allow_private=True), cache, "sift", Clock())
    for _ in range(2):  # the second answer comes from the cache
        with pytest.raises(ConnectFailed):
            await robots.allowed(f"http://pub.test:{port}/")
        with pytest.raises(DnsFailure):
            await robots.allowed("http://unknown.test/")
        with pytest.raises(ConnectFailed):
            await fetcher.fetch(f"http://pub.test:{port}/", FetchPolicy(allow_private=True),
                                robots=robots)  # fmt: skip
    assert cache.entries[f"http://pub.test:{port}"] == (0, b"connect_failed", NOW)
    assert await robots.crawl_delay("http://unknown.test/") is None


async def test_unreachable_origin_errors_name_the_requested_url(fetcher: Fetcher) -> None:
    async with Upstream("127.0.1.1") as up:
        port = up.port
    robots = RobotsChecker(
        fetcher, FetchPolicy(allow_private=True), MemoryRobotsCache(), "sift", Clock()
    )
    page = f"http://pub.test:{port}/a/page?q=1"
    with pytest.raises(ConnectFailed) as refused:
        await fetcher.fetch(page, FetchPolicy(allow_private=True), robots=robots)
    assert refused.value.message == (
        f"{page} could not be fetched: sift could not connect to its host."
    )
    with pytest.raises(DnsFailure) as unknown:
        await robots.allowed("http://unknown.test/b")
    assert unknown.value.message == (
        "http://unknown.test/b could not be fetched: its host name did not resolve."
    )


async def test_robots_redirected_to_a_blocked_address_disallows(
    up: Upstream, fetcher: Fetcher
) -> None:
    up.redirect("/robots.txt", "http://127.0.0.1/robots.txt")
    assert await checker(fetcher, up).allowed(url(up, "/public")) is False


async def test_guard_refusals_are_never_cached(up: Upstream, fetcher: Fetcher) -> None:
    # The origin itself refused (a port the policy does not allow): blocked_address, raised.
    cache = MemoryRobotsCache()
    robots = RobotsChecker(fetcher, restricted_policy(timeout_s=5.0), cache, "sift", Clock())
    for _ in range(2):
        with pytest.raises(Blocked) as info:
            await robots.allowed(url(up, "/public"))
        assert type(info.value) is Blocked
    # robots.txt redirected where the policy may not go: disallowed, for this check only.
    up.redirect("/robots.txt", "http://127.0.0.1/robots.txt")
    robots = checker(fetcher, up, cache)
    assert await robots.allowed(url(up, "/private/ok")) is False
    assert cache.entries == {}
    assert up.hits["/robots.txt"] == 1
    assert await robots.allowed(url(up, "/private/ok")) is False
    assert up.hits["/robots.txt"] == 2  # asked again: nothing was remembered


async def test_redirected_robots_is_followed(up: Upstream, fetcher: Fetcher) -> None:
    up.redirect("/robots.txt", "/real-robots.txt", status=301)
    up.page("/real-robots.txt", b"User-agent: sift\nDisallow: /public\n")
    robots = checker(fetcher, up)
    assert await robots.allowed(url(up, "/public")) is False
    assert await robots.allowed(url(up, "/private/x")) is True


async def test_endless_robots_redirects_count_as_unavailable(
    up: Upstream, fetcher: Fetcher
) -> None:
    up.redirect("/robots.txt", "/r2")
    up.redirect("/r2", "/r3")
    up.redirect("/r3", "/robots.txt")
    assert await checker(fetcher, up).allowed(url(up, "/private/x")) is True


async def test_cache_entry_and_ttl(up: Upstream, fetcher: Fetcher) -> None:
    cache = MemoryRobotsCache()
    clock = Clock()
    robots = checker(fetcher, up, cache, clock)
    await robots.allowed(url(up, "/public"))
    origin = f"http://pub.test:{up.port}"
    assert cache.entries == {origin: (200, ROBOTS, NOW)}
    clock.now = NOW + 86399
    await robots.allowed(url(up, "/public"))
    assert up.hits["/robots.txt"] == 1
    clock.now = NOW + 86400
    up.page("/robots.txt", b"User-agent: *\nAllow: /\n")
    assert await robots.allowed(url(up, "/private/x")) is True
    assert up.hits["/robots.txt"] == 2
    assert cache.entries[origin][2] == NOW + 86400


async def test_cache_is_shared_between_checkers(up: Upstream, fetcher: Fetcher) -> None:
    cache = MemoryRobotsCache()
    await checker(fetcher, up, cache).allowed(url(up, "/public"))
    second = checker(fetcher, up, cache)
    assert await second.allowed(url(up, "/private/x")) is False
    assert up.hits["/robots.txt"] == 1


async def test_server_errors_are_retried_sooner(up: Upstream, fetcher: Fetcher) -> None:
    up.page("/robots.txt", b"oops", status=503)
    clock = Clock()
    robots = checker(fetcher, up, MemoryRobotsCache(), clock)
    assert await robots.allowed(url(up, "/public")) is False
    clock.now = NOW + 599
    assert await robots.allowed(url(up, "/public")) is False
    assert up.hits["/robots.txt"] == 1
    clock.now = NOW + 600
    up.page("/robots.txt", b"")
    assert await robots.allowed(url(up, "/public")) is True
    assert up.hits["/robots.txt"] == 2


async def test_concurrent_checks_share_one_fetch(up: Upstream, fetcher: Fetcher) -> None:
    async def slow_robots(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.Response(body=ROBOTS)

    up.route("/robots.txt", slow_robots)
    robots = checker(fetcher, up)
    answers = await asyncio.gather(*(robots.allowed(url(up, "/public")) for _ in range(10)))
    assert answers == [True] * 10
    assert up.hits["/robots.txt"] == 1


async def test_large_robots_is_cut_and_still_parsed(up: Upstream, fetcher: Fetcher) -> None:
    big = b"User-agent: sift\nDisallow: /private\n" + b"# filler\n" * 200_000  # 1.8 MB
    up.page("/robots.txt", big)
    robots = checker(fetcher, up)
    assert await robots.allowed(url(up, "/private/x")) is False
    assert await robots.allowed(url(up, "/public")) is True


class CountingCache(MemoryRobotsCache):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, origin: str) -> tuple[int, bytes, int] | None:
        self.gets += 1
        return await super().get(origin)


async def test_fresh_rules_are_answered_from_memory(up: Upstream, fetcher: Fetcher) -> None:
    cache, clock = CountingCache(), Clock()
    robots = checker(fetcher, up, cache, clock)
    for _ in range(5):
        assert await robots.allowed(url(up, "/private/ok")) is True
    assert (cache.gets, up.hits["/robots.txt"]) == (1, 1)
    clock.now += 86_400  # the day-long TTL runs out: the cache is asked, then the origin
    assert await robots.allowed(url(up, "/private/x")) is False
    assert (cache.gets, up.hits["/robots.txt"]) == (2, 2)


class LagProbe:
    """How late the event loop runs a 10 ms sleep, at worst, while it is running."""

    def __init__(self) -> None:
        self.worst_s = 0.0
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None
        self._slept_at = 0.0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._slept_at = loop.time()
            await asyncio.sleep(0.01)
            self.worst_s = max(self.worst_s, loop.time() - self._slept_at - 0.01)
            self.ticks += 1

    async def __aenter__(self) -> LagProbe:
        self._task = asyncio.ensure_future(self._run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        # The sleep still pending counts too: a loop blocked to the end never woke it.
        late = asyncio.get_running_loop().time() - self._slept_at - 0.01
        self.worst_s = max(self.worst_s, late)
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_a_large_robots_txt_is_parsed_and_checked_off_the_event_loop(
    up: Upstream, fetcher: Fetcher
) -> None:
    """A new origin's 512 KiB robots.txt of 11,000 rules took 0.26-0.65 s to parse on the
    event loop (every caller's requests waited that long) and 10-70 ms a check. Now both
    run on the checker's thread, and the loop is late by the thread's GIL slices (5 ms) and
    the garbage collections the parser's objects set off (0.02-0.2 s), not by the parse.
    The bound is relative, so the machine's load scales both sides: the loop is never late
    by half the time the same parse takes here (measured first); on the loop it was late
    by the whole parse at least."""
    rules = [b"User-agent: *\nDisallow: /private\n"]
    size = len(rules[0])
    for i in range(100_000):
        line = b"Disallow: /section-%d/page-*.html$\n" % i
        if size + len(line) > 512 << 10:
            break
        rules.append(line)
        size += len(line)
    body = b"".join(rules)
    started = time.perf_counter()
    rules_for(200, body)
    parse_s = time.perf_counter() - started
    up.page("/robots.txt", body, content_type="text/plain")
    robots = checker(fetcher, up)
    # As `sift serve` does at start (server/app.py): without it, a full collection over
    # pytest's own heap, set off by the parser's allocations, held the GIL for 0.2 s.
    gc.freeze()
    try:
        async with LagProbe() as probe:
            assert await robots.allowed(url(up, "/section-7/page-1.html")) is False
            assert await robots.allowed(url(up, "/public")) is True
            assert await robots.allowed(url(up, "/private/x")) is False
    finally:
        gc.unfreeze()
    assert up.hits["/robots.txt"] == 1
    assert probe.worst_s < parse_s / 2, (
        f"the event loop stalled {probe.worst_s:.3f} s (the parse takes {parse_s:.3f} s)"
    )
    assert probe.ticks > 0
