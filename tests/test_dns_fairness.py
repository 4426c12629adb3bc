"""DNS cannot stop egress (issue 24, finding 2): c-ares lookups with a deadline, slots per
caller, negative answers cached briefly, mapped names and IP literals never waiting.

Every lookup here goes to ``tests/dnsserver.DnsServer`` on 127.0.0.1 (``dns_servers``), which
answers ``*.test`` names from its table, NXDOMAIN for the others, and never answers names
under ``stall.test``: no DNS packet leaves loopback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from apphelpers import FLEET_KEY, RESTRICTED_KEY, auth, make_settings
from dnsserver import DnsServer, wait_queries
from sift.assembly import build_fetcher
from sift.config import EgressSettings, Settings, load_settings
from sift.dcache import DB
from sift.errors import ConfigError, DnsFailure
from sift.fetch import AresResolver, DnsLimits, Fetcher, Lookups, restricted_policy
from sift.server.app import create_app
from upstream import Upstream

PUBLIC = "127.0.1.1"  # inside extra_public_cidrs: "public" for the guard
STALL = ".stall.test"


@pytest.fixture(scope="module")
def dns() -> Iterator[DnsServer]:
    with DnsServer(
        {"ok.test": [PUBLIC], "two.test": [PUBLIC, "127.0.1.2"]}, silent_suffixes=[STALL]
    ) as server:
        yield server


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lookups(dns: DnsServer, clock: Clock | None = None, **limits: object) -> Lookups:
    bounds = dataclasses.replace(DnsLimits(servers=(dns.address,)), **limits)  # type: ignore[arg-type]
    resolver = AresResolver(servers=bounds.servers, timeout_s=bounds.timeout_s)
    return Lookups({"mapped.test": [PUBLIC]}, resolver, bounds, clock or Clock())


async def wait_in_flight(front: Lookups, caller: str, count: int) -> None:
    while front.in_flight(caller) != count:
        await asyncio.sleep(0.01)


async def test_c_ares_answers_from_the_loopback_server(dns: DnsServer) -> None:
    front = lookups(dns)
    try:
        assert await front.resolve("OK.test", 80, "alice") == [PUBLIC]
        assert await front.resolve("two.test.", 443, "alice") == [PUBLIC, "127.0.1.2"]
        with pytest.raises(DnsFailure, match=r"'no-such\.test' did not resolve"):
            await front.resolve("no-such.test", 80, "alice")
    finally:
        await front.close()


async def test_a_failed_name_fails_again_without_a_lookup_until_its_ttl_passes(
    dns: DnsServer,
) -> None:
    clock = Clock()
    front = lookups(dns, clock, negative_ttl_s=10.0)
    try:
        with pytest.raises(DnsFailure):
            await front.resolve("gone.test", 80, "alice")
        assert dns.queries["gone.test"] == 2  # A and AAAA
        clock.now += 9.9
        with pytest.raises(DnsFailure):
            await front.resolve("gone.test", 80, "bob")  # a DNS answer holds for everyone
        assert dns.queries["gone.test"] == 2
        clock.now += 0.1
        with pytest.raises(DnsFailure):
            await front.resolve("gone.test", 80, "alice")
        assert dns.queries["gone.test"] == 4
    finally:
        await front.close()


async def test_the_negative_table_is_bounded(dns: DnsServer) -> None:
    front = lookups(dns, negative_max_entries=2)
    try:
        for name in ("n1.test", "n2.test", "n3.test"):
            with pytest.raises(DnsFailure):
                await front.resolve(name, 80, "alice")
        with pytest.raises(DnsFailure):
            await front.resolve("n1.test", 80, "alice")  # forgotten: asked again
        with pytest.raises(DnsFailure):
            await front.resolve("n3.test", 80, "alice")  # remembered
        assert (dns.queries["n1.test"], dns.queries["n3.test"]) == (4, 2)
    finally:
        await front.close()


async def test_a_lookup_that_never_answers_ends_at_its_deadline_and_frees_its_slot(
    dns: DnsServer,
) -> None:
    """c-ares gives up within ``timeout_s`` too: the slot comes back and the name is then
    remembered as failing (no further query)."""
    front = lookups(dns, timeout_s=0.6)
    try:
        with pytest.raises(DnsFailure, match=r"'a\.stall\.test' did not resolve within 0\.6 s"):
            await front.resolve("a" + STALL, 80, "alice")
        await wait_in_flight(front, "alice", 0)  # the query itself ended (c-ares timeout)
        asked = dns.queries["a" + STALL]
        with pytest.raises(DnsFailure, match=r"did not resolve\.$"):
            await front.resolve("a" + STALL, 80, "alice")
        assert dns.queries["a" + STALL] == asked
    finally:
        await front.close()


async def test_one_caller_has_at_most_its_slots_and_waits_only_for_its_own(
    dns: DnsServer,
) -> None:
    front = lookups(dns, timeout_s=30.0, lookups_per_caller=4)
    stalls = [asyncio.create_task(front.resolve(f"s{i}{STALL}", 80, "mallory")) for i in range(8)]
    try:
        await wait_in_flight(front, "mallory", 4)
        for i in range(4):
            await wait_queries(dns, f"s{i}{STALL}", 2)
        async with asyncio.timeout(10):  # far below the 30 s the stalled lookups hold
            assert await front.resolve("ok.test", 80, "victim") == [PUBLIC]
            assert await front.resolve("mapped.test", 80, "victim") == [PUBLIC]
            # mapped names and literals do not wait, not even for the caller whose slots
            # are all taken
            assert await front.resolve("mapped.test", 80, "mallory") == [PUBLIC]
            assert await front.resolve("127.0.1.9", 80, "mallory") == ["127.0.1.9"]
        assert not any(t.done() for t in stalls)
        assert front.in_flight("mallory") == 4
        # the other four never reached the DNS server: they wait for mallory's own slots
        assert sorted(n for n in dns.queries if n.startswith("s") and n.endswith(STALL)) == [
            f"s{i}{STALL}" for i in range(4)
        ]
    finally:
        for t in stalls:
            t.cancel()
        await asyncio.gather(*stalls, return_exceptions=True)
        await front.close()


async def test_a_caller_giving_up_keeps_its_slot_until_the_query_ends(dns: DnsServer) -> None:
    """Cancelling the waiter (its fetch's deadline) does not free the slot: the query still
    runs, so the caller could otherwise start a new one per retry without bound."""
    front = lookups(dns, timeout_s=30.0, lookups_per_caller=1)
    try:
        task = asyncio.create_task(front.resolve("g" + STALL, 80, "mallory"))
        await wait_in_flight(front, "mallory", 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert front.in_flight("mallory") == 1
        front.limits = dataclasses.replace(front.limits, timeout_s=0.3)
        with pytest.raises(DnsFailure, match=r"within 0\.3 s"):
            await front.resolve("ok.test", 80, "mallory")  # waits for its one slot
        assert front.in_flight("mallory") == 1
    finally:
        await front.close()
    assert front.in_flight("mallory") == 0


async def test_lookups_with_no_caller_count_against_the_fetching_caller(
    dns: DnsServer,
) -> None:
    """The fetcher names its caller for the lookups inside a fetch (robots.txt's checker
    shares one caller-less policy among all callers)."""
    async with Fetcher(
        user_agent="t",
        extra_public_cidrs=["127.0.1.0/24"],
        dns=DnsLimits(servers=(dns.address,), timeout_s=30.0),
    ) as fetcher:
        policy = dataclasses.replace(restricted_policy(timeout_s=30.0), caller="mallory")
        task = asyncio.create_task(fetcher.fetch("http://r" + STALL + "/", policy))
        await wait_in_flight(fetcher.lookups, "mallory", 1)
        assert fetcher.lookups.in_flight("") == 0
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_dns_settings_are_checked(tmp_path: Path) -> None:
    cfg = tmp_path / "sift.toml"
    cfg.write_text('[egress]\ndns_servers = ["127.0.0.1:5353", "[::1]:53", "10.0.0.1"]\n')
    assert load_settings(cfg, env={}).egress.dns_servers == (
        "127.0.0.1:5353",
        "[::1]:53",
        "10.0.0.1",
    )
    for bad in ('dns_servers = ["dns.test"]', "dns_timeout_s = 0", "dns_lookups_per_caller = 0"):
        cfg.write_text(f"[egress]\n{bad}\n")
        with pytest.raises(ConfigError, match=r"egress\.dns_"):
            load_settings(cfg, env={})


# -- the finding, end to end: one restricted caller stalls 8 lookups ----------------------


@pytest.fixture
async def up() -> AsyncIterator[Upstream]:
    async with Upstream(PUBLIC) as server:
        server.page("/page", "<html><body>hello</body></html>")
        yield server


def lab_settings(tmp_path: Path, dns: DnsServer, port: int) -> Settings:
    settings = make_settings(tmp_path, upstream_port=port)
    egress = EgressSettings(
        extra_public_cidrs=("127.0.1.0/24",),
        resolve=types.MappingProxyType({"mapped.test": (PUBLIC,)}),
        dns_servers=(dns.address,),
        dns_timeout_s=30.0,
    )
    return dataclasses.replace(settings, egress=egress)


async def test_a_callers_stalled_lookups_do_not_delay_another_callers_fetches(
    tmp_path: Path, dns: DnsServer, up: Upstream
) -> None:
    """The finding at its own scale, through the API: a restricted caller fetches 8 names
    whose DNS never answers (each would hold its lookup 30 s); a fleet caller's fetches of a
    name that resolves and of a mapped name succeed within 10 s, while all 8 are still
    pending. Before the fix the system resolver held a loop-pool thread per lookup with no
    deadline: the victim's fetches failed after 30 s and 10 s."""
    settings = lab_settings(tmp_path, dns, up.port)
    fetcher = build_fetcher(settings)
    db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    app = create_app(settings, db, fetcher)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="on",
        log_level="warning",
        timeout_graceful_shutdown=0.5,  # the attacker's handlers would run to their deadline
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            attack = [
                asyncio.create_task(
                    client.get(
                        "/v1/fetch",
                        params={"url": f"http://v{i}{STALL}:{up.port}/page"},
                        headers=auth(RESTRICTED_KEY),
                    )
                )
                for i in range(8)
            ]
            await wait_in_flight(fetcher.lookups, "agent", 4)
            async with asyncio.timeout(10):
                for name in ("ok.test", "mapped.test"):
                    r = await client.get(
                        "/v1/fetch",
                        params={"url": f"http://{name}:{up.port}/page"},
                        headers=auth(FLEET_KEY),
                    )
                    assert (r.status_code, r.json()["status"]) == (200, 200)
            assert not any(t.done() for t in attack)
            assert fetcher.lookups.in_flight("agent") == 4
            assert fetcher.lookups.in_flight("") == 0  # robots.txt lookups were the caller's
            for t in attack:
                t.cancel()
            await asyncio.gather(*attack, return_exceptions=True)
    finally:
        server.should_exit = True
        await serving
