"""SSRF suite: every spelling of "loopback" a restricted caller might try, end to end.

For the restricted run, a canary listener sits on each target address (127.0.0.1, [::1]
and the pseudo-public 127.0.1.1, all on port P, which the policy *allows*, so only the
address or name rule can stop the fetch) and on 127.0.1.1:R (a port the policy does not
allow). After every case the canaries' accept count must be 0. The fleet run puts real
upstreams on the same addresses and expects the same URLs to succeed (``allow_private``),
except those that are refused for every caller (unspecified, translation ranges, parser
tricks, other schemes).

The lab settings are the documented ones: ``extra_public_cidrs = ["127.0.1.0/24"]`` and an
``[egress.resolve]`` table. The resolver knows only test names: nothing reaches real DNS.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from aiohttp import web

from sift.errors import Blocked, DnsFailure, InvalidUrl, SiftError, TlsFailure
from sift.fetch import BLOCKED_MESSAGE, Fetcher, FetchPolicy, StaticResolver, restricted_policy
from upstream import CanaryListener, Upstream, reserve_port

TARGET_HOSTS = ("127.0.0.1", "::1", "127.0.1.1")
EXTRA_PUBLIC = ["127.0.1.0/24"]
STATIC_HOSTS = {  # the [egress.resolve] table
    "pub.test": ["127.0.1.1"],
    "loop.test": ["127.0.0.1"],
    "mixed.test": ["127.0.1.1", "127.0.0.1"],
    "mixed6.test": ["127.0.1.1", "::1"],
    "v6loop.test": ["::1"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "zero.test": ["0.0.0.0"],
    "nat64.test": ["64:ff9b::7f00:1"],
}
DNS = {  # what the test resolver answers; names refused by name point at 127.0.1.1 on purpose
    "localhost": ["127.0.0.1"],
    "foo.localhost": ["127.0.0.1"],
    "metadata.google.internal": ["127.0.1.1"],
    "db.internal": ["127.0.1.1"],
    "intranet": ["127.0.1.1"],
}
OK_BODY = b"loopback ok"
OK = "ok"


@dataclass(frozen=True)
class Case:
    id: str
    url: str  # template: {p} allowed target port, {r} disallowed port, {q} redirector port
    restricted: type[SiftError]
    fleet: type[SiftError] | str = OK


DIRECT = [
    # literal forms of 127.0.0.1
    Case("dotted", "http://127.0.0.1:{p}/", Blocked),
    Case("short-2", "http://127.1:{p}/", Blocked),
    Case("short-3", "http://127.0.1:{p}/", Blocked),
    Case("decimal", "http://2130706433:{p}/", Blocked),
    Case("hex", "http://0x7f000001:{p}/", Blocked),
    Case("hex-dotted", "http://0x7f.0x0.0x0.0x1:{p}/", Blocked),
    Case("hex-short", "http://0x7f.1:{p}/", Blocked),
    Case("octal", "http://0177.0.0.1:{p}/", Blocked),
    Case("octal-whole", "http://017700000001:{p}/", Blocked),
    Case("leading-zeros", "http://127.000.000.001:{p}/", Blocked),
    Case("trailing-dot", "http://127.0.0.1.:{p}/", Blocked),
    Case("upper-scheme", "HTTP://127.0.0.1:{p}/", Blocked),
    Case("zero", "http://0:{p}/", Blocked, Blocked),
    Case("zeros", "http://0.0.0.0:{p}/", Blocked, Blocked),
    Case("zero-hex", "http://0x0:{p}/", Blocked, Blocked),
    # IPv6 forms
    Case("v6-loopback", "http://[::1]:{p}/", Blocked),
    Case("v6-long", "http://[0:0:0:0:0:0:0:1]:{p}/", Blocked),
    Case("v6-unspecified", "http://[::]:{p}/", Blocked, Blocked),
    Case("v6-mapped-dotted", "http://[::ffff:127.0.0.1]:{p}/", Blocked),
    Case("v6-mapped-hex", "http://[::ffff:7f00:1]:{p}/", Blocked),
    Case("v6-compatible", "http://[::127.0.0.1]:{p}/", Blocked, Blocked),
    Case("v6-nat64", "http://[64:ff9b::7f00:1]:{p}/", Blocked, Blocked),
    Case("v6-6to4", "http://[2002:7f00:1::1]:{p}/", Blocked, Blocked),
    # unicode hosts a resolver would fold to localhost / 127.0.0.1
    Case("fullwidth", "http://ｌｏｃａｌｈｏｓｔ:{p}/", Blocked),
    Case("circled", "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:{p}/", Blocked),
    Case("soft-hyphen", "http://local\u00adhost:{p}/", Blocked),
    Case("ideographic-dots", "http://127。0。0。1:{p}/", Blocked),
    Case("fullwidth-digits", "http://１２７．０．０．１:{p}/", Blocked),
    Case("halfwidth-dots", "http://127｡0｡0｡1:{p}/", Blocked),
    Case("upper-localhost", "http://LOCALHOST:{p}/", Blocked),
    Case("localhost-dot", "http://localhost.:{p}/", Blocked),
    Case("sub-localhost", "http://foo.localhost:{p}/", Blocked),
    # names refused by name although they resolve to the pseudo-public 127.0.1.1
    Case("metadata-name", "http://metadata.google.internal:{p}/", Blocked),
    Case("internal-name", "http://db.internal:{p}/", Blocked),
    Case("single-label", "http://intranet:{p}/", Blocked),
    # names mapped through [egress.resolve]: refused after the lookup, which a restricted
    # caller is answered exactly as a name that does not resolve (it may not learn which
    # internal names exist, see test_restricted_cannot_tell_refused_names_from_unknown_ones)
    Case("resolve-loop", "http://loop.test:{p}/", DnsFailure),
    Case("resolve-mixed", "http://mixed.test:{p}/", DnsFailure),
    Case("resolve-mixed6", "http://mixed6.test:{p}/", DnsFailure),
    Case("resolve-v6", "http://v6loop.test:{p}/", DnsFailure),
    Case("resolve-mapped", "http://mapped.test:{p}/", DnsFailure),
    Case("resolve-zero", "http://zero.test:{p}/", DnsFailure, Blocked),
    Case("resolve-nat64", "http://nat64.test:{p}/", DnsFailure, Blocked),
    # parser tricks
    Case("userinfo", "http://pub.test@127.0.0.1:{p}/", InvalidUrl, InvalidUrl),
    Case("userinfo-port", "http://127.0.0.1:{p}@pub.test/", InvalidUrl, InvalidUrl),
    Case("backslash-at", "http://pub.test\\@127.0.0.1:{p}/", InvalidUrl, InvalidUrl),
    Case("backslash-host", "http://127.0.0.1:{p}\\@pub.test/", InvalidUrl, InvalidUrl),
    Case("backslash-scheme", "http:\\\\127.0.0.1:{p}/", InvalidUrl, InvalidUrl),
    Case("percent-host", "http://%31%32%37.0.0.1:{p}/", InvalidUrl, InvalidUrl),
    Case("tab-in-host", "http://local\thost:{p}/", InvalidUrl, InvalidUrl),
    Case("newline-in-host", "http://127.0.0.1\n:{p}/", InvalidUrl, InvalidUrl),
    Case("space-in-host", "http://127.0.0.1 :{p}/", InvalidUrl, InvalidUrl),
    Case("v6-zone", "http://[::1%25lo]:{p}/", InvalidUrl, InvalidUrl),
    # other schemes
    Case("file", "file:///etc/passwd", InvalidUrl, InvalidUrl),
    Case("gopher", "gopher://127.0.0.1:{p}/_GET%20/", InvalidUrl, InvalidUrl),
    Case("ftp", "ftp://127.0.0.1:{p}/", InvalidUrl, InvalidUrl),
    Case("dict", "dict://127.0.0.1:{p}/", InvalidUrl, InvalidUrl),
    Case("ws", "ws://127.0.0.1:{p}/", InvalidUrl, InvalidUrl),
    # ports outside the restricted list, on the pseudo-public range
    Case("port-literal", "http://127.0.1.1:{r}/", Blocked),
    Case("port-name", "http://pub.test:{r}/", Blocked),
]

REDIRECT_TARGETS = [
    ("dotted", "http://127.0.0.1:{p}/", OK),
    ("short", "http://127.1:{p}/", OK),
    ("decimal", "http://2130706433:{p}/", OK),
    ("hex", "http://0x7f000001:{p}/", OK),
    ("v6", "http://[::1]:{p}/", OK),
    ("v6-mapped", "http://[::ffff:127.0.0.1]:{p}/", OK),
    ("resolve-loop", "http://loop.test:{p}/", OK),
    ("resolve-mixed", "http://mixed.test:{p}/", OK),
    ("localhost", "http://localhost:{p}/", OK),
    ("metadata-name", "http://metadata.google.internal:{p}/", OK),
    ("scheme-relative", "//127.0.0.1:{p}/", OK),
    ("cross-scheme", "https://127.0.0.1:{p}/", TlsFailure),
    ("zeros", "http://0.0.0.0:{p}/", Blocked),
]
REDIRECTS = [
    Case(
        f"redirect-{status}-{name}",
        f"http://pub.test:{{q}}/redirect/{status}?to={target}",
        DnsFailure if name.startswith("resolve-") else Blocked,
        fleet,
    )
    for status in (301, 302, 303, 307, 308)
    for name, target, fleet in REDIRECT_TARGETS
] + [
    Case(
        "redirect-file", "http://pub.test:{q}/redirect/302?to=file:///etc/passwd", Blocked, Blocked
    ),
    Case(
        "redirect-gopher",
        "http://pub.test:{q}/redirect/302?to=gopher://127.0.0.1:{p}/",
        Blocked,
        Blocked,
    ),
    Case(
        "redirect-userinfo",
        "http://pub.test:{q}/redirect/302?to=http://a@127.0.0.1:{p}/",
        Blocked,
        Blocked,
    ),
    Case("redirect-port", "http://pub.test:{q}/redirect/302?to=http://pub.test:{r}/", Blocked),
]
CASES = DIRECT + REDIRECTS


@dataclass
class Lab:
    p: int
    r: int
    pub: Upstream

    def url(self, case: Case) -> str:
        url = case.url
        if "?to=" in url:
            head, target = url.split("?to=", 1)
            target = target.format(p=self.p, r=self.r)
            url = head + "?to=" + quote(target, safe="")
        return url.format(p=self.p, r=self.r, q=self.pub.port)


async def redirector() -> Upstream:
    pub = Upstream("127.0.1.1")

    async def redirect(request: web.Request) -> web.StreamResponse:
        status = int(request.path.rsplit("/", 1)[1])
        return web.Response(status=status, headers={"Location": request.query["to"]})

    pub.route("/redirect/", redirect, prefix=True)
    pub.page("/pub", "public page")
    return await pub.start()


def fetcher() -> Fetcher:
    return Fetcher(
        user_agent="sift-ssrf-test",
        resolver=StaticResolver(DNS),
        extra_public_cidrs=EXTRA_PUBLIC,
        static_hosts=STATIC_HOSTS,
    )


@pytest.fixture
async def restricted_lab() -> AsyncIterator[tuple[Lab, CanaryListener, FetchPolicy]]:
    p, socks = reserve_port(TARGET_HOSTS)
    # The canaries are closed whatever fails after they are made (a socket left to the
    # garbage collector fails a later, unrelated test with a ResourceWarning).
    with CanaryListener([*socks.values()]) as canary, CanaryListener.on(["127.0.1.1"]) as off:
        r = off._socks[0].getsockname()[1]
        pub = await redirector()
        # A short deadline: if the guard ever failed, a canary accepts and never answers.
        policy = restricted_policy(frozenset({p, pub.port}), timeout_s=1.0)
        try:
            yield Lab(p, r, pub), _Both(canary, off), policy
        finally:
            await pub.stop()


class _Both(CanaryListener):
    def __init__(self, *canaries: CanaryListener) -> None:
        self._canaries = canaries
        self.count = 0

    def accepted(self) -> int:
        return sum(c.accepted() for c in self._canaries)


@pytest.fixture
async def fleet_lab() -> AsyncIterator[tuple[Lab, FetchPolicy]]:
    p, socks = reserve_port(TARGET_HOSTS)
    r_up = await Upstream("127.0.1.1").start()
    ups = [Upstream(host, sock=sock) for host, sock in socks.items()] + [r_up]
    for up in ups:
        up.page("/", OK_BODY, content_type="text/plain")
    for up in ups[:-1]:
        await up.start()
    pub = await redirector()
    try:
        yield Lab(p, r_up.port, pub), FetchPolicy(allow_private=True, timeout_s=5.0)
    finally:
        for up in [*ups, pub]:
            await up.stop()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_restricted_never_connects(
    case: Case, restricted_lab: tuple[Lab, CanaryListener, FetchPolicy]
) -> None:
    lab, canary, policy = restricted_lab
    async with fetcher() as f:
        with pytest.raises(case.restricted) as info:
            await f.fetch(lab.url(case), policy)
    assert type(info.value) is case.restricted
    if case.restricted is Blocked:
        assert info.value.message == BLOCKED_MESSAGE
        assert info.value.to_dict()["error"]["code"] == "blocked_address"
    if case.restricted is DnsFailure:
        host = lab.url(case).split("?to=")[-1].replace("%3A", ":").replace("%2F", "/")
        name = host.split("//", 1)[1].split(":", 1)[0]
        assert info.value.message == (
            f"The host name {name!r} does not resolve to an address this caller may reach."
        )
    assert canary.accepted() == 0
    assert lab.pub.hits.total() == (1 if "/redirect/" in case.url else 0)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_fleet_with_allow_private(case: Case, fleet_lab: tuple[Lab, FetchPolicy]) -> None:
    lab, policy = fleet_lab
    async with fetcher() as f:
        if case.fleet == OK:
            result = await f.fetch(lab.url(case), policy)
            assert (result.status, result.body) == (200, OK_BODY)
        else:
            assert not isinstance(case.fleet, str)
            with pytest.raises(case.fleet):
                await f.fetch(lab.url(case), policy)


def test_suite_size() -> None:
    assert len(CASES) >= 60


PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


async def test_proxy_variables_are_ignored(
    monkeypatch: pytest.MonkeyPatch, restricted_lab: tuple[Lab, CanaryListener, FetchPolicy]
) -> None:
    lab, canary, policy = restricted_lab
    for var in PROXY_VARS:
        monkeypatch.setenv(var, f"http://127.0.0.1:{lab.p}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with fetcher() as f:
        result = await f.fetch(f"http://pub.test:{lab.pub.port}/pub", policy)
        fleet = await f.fetch(
            f"http://pub.test:{lab.pub.port}/pub", FetchPolicy(allow_private=True)
        )
    assert (result.status, result.body, fleet.body) == (200, b"public page", b"public page")
    assert lab.pub.hits["/pub"] == 2
    assert canary.accepted() == 0


class FlipResolver(StaticResolver):
    """Answers public first, loopback on every later lookup (DNS rebinding)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        answers = await super().resolve(host, port)
        return answers[:1] if self.calls[host] == 1 else answers[1:]


async def test_dns_rebinding_between_and_within_fetches() -> None:
    q, socks = reserve_port(["127.0.1.1", "127.0.0.1"])
    canary = CanaryListener([socks["127.0.0.1"]])
    pub = Upstream("127.0.1.1", sock=socks["127.0.1.1"])
    pub.page("/", "first answer")
    pub.redirect("/self", "/")
    try:
        await pub.start()
    except BaseException:
        canary.close()
        socks["127.0.1.1"].close()
        raise
    resolver = FlipResolver({"rebind.test": ["127.0.1.1", "127.0.0.1"]})
    policy = restricted_policy(frozenset({q}))
    try:
        async with Fetcher(user_agent="t", resolver=resolver, extra_public_cidrs=EXTRA_PUBLIC) as f:
            first = await f.fetch(f"http://rebind.test:{q}/", policy)
            assert (first.body, resolver.calls["rebind.test"]) == (b"first answer", 1)
            # The next lookup answers loopback: refused, whatever a pooled connection says
            # (answered as a name that does not resolve: the caller is restricted).
            with pytest.raises(DnsFailure):
                await f.fetch(f"http://rebind.test:{q}/self", policy)
            assert resolver.calls["rebind.test"] == 2
        assert pub.hits.total() == 1
        assert canary.accepted() == 0
    finally:
        await pub.stop()
        canary.close()
