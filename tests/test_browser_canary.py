"""Canary test: a hostile page in the real browser reaches no loopback address.

A pseudo-public attack page (127.0.1.1, public through ``extra_public_cidrs``) fires every
vector a page has at loopback canaries — 127.0.0.1 and [::1], on the port the restricted
policy allows (so only the address rule can stop them) and on another port — plus WebRTC
STUN to a UDP port the OS picked for the UDP canaries. Loaded as a restricted caller, the
canaries must see 0 connections and 0 datagrams. The same page with the guard switched off
(a test-only switch of ``Browser``) must record hits, so this test can fail. Top-level
navigations to a canary (a 302 and a meta refresh) must end in ``blocked_address`` with no
hit either.

Lab-only switches: ``--allow-loopback-in-peer-connection`` (WebRTC ignores loopback
otherwise, so the STUN vector could not even fire here) and
``--unsafely-treat-insecure-origin-as-secure`` (so the page may register a service worker).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Self

import pytest

from browserhelpers import require_browser
from sift.browser import Browser
from sift.config import BrowserSettings
from sift.errors import Blocked, BrowserTimeout
from sift.fetch import Fetcher, StaticResolver, restricted_policy
from upstream import CanaryListener, Upstream, reserve_port

pytestmark = pytest.mark.slow

PUBLIC = "127.0.1.1"
CANARY_HOSTS = ("127.0.0.1", "::1")


def attack_page(p: int, q: int, stun: int) -> str:
    """Every vector at every canary (host × port), then WebRTC STUN at both hosts on UDP
    port ``stun``."""
    vectors = []
    for host in ("127.0.0.1", "[::1]"):
        for port in (p, q):
            base = f"http://{host}:{port}"
            ws = f"ws://{host}:{port}"
            vectors.append(f"""
<script>
try {{ fetch("{base}/fetch", {{mode: "no-cors"}}); }} catch (e) {{}}
try {{ fetch("{base}/cors", {{method: "PUT", headers: {{"X-A": "1"}}}}); }} catch (e) {{}}
try {{ const x = new XMLHttpRequest(); x.open("GET", "{base}/xhr"); x.send(); }} catch (e) {{}}
try {{ navigator.sendBeacon("{base}/beacon", "b"); }} catch (e) {{}}
try {{ fetch("{base}/keepalive", {{method: "POST", body: "k", keepalive: true}}); }} catch (e) {{}}
try {{ new WebSocket("{ws}/ws"); }} catch (e) {{}}
try {{ new EventSource("{base}/sse"); }} catch (e) {{}}
try {{ new Worker(URL.createObjectURL(new Blob(
  ['fetch("{base}/worker")'], {{type: "text/javascript"}}))); }} catch (e) {{}}
try {{ import("{base}/import.js").catch(() => {{}}); }} catch (e) {{}}
try {{ window.open("{base}/popup"); }} catch (e) {{}}
</script>
<img src="{base}/img"><script async src="{base}/script"></script>
<link rel="stylesheet" media="print" href="{base}/css"><link rel="prefetch" href="{base}/prefetch">
<link rel="preconnect" href="{base}"><link rel="preload" as="script" href="{base}/preload">
<iframe src="{base}/iframe"></iframe><video src="{base}/video"></video>
<object data="{base}/object"></object><a ping="{base}/ping" href="/x">x</a>
<div style="background:url({base}/bg)"></div>""")
    return f"""<!doctype html><html><head><title>attack</title>
<style>@font-face {{ font-family: f; src: url(http://127.0.0.1:{p}/font.woff2); }}
body {{ font-family: f; }}</style>
<script type="speculationrules">
{{"prefetch": [{{"source": "list", "urls": ["http://127.0.0.1:{p}/spec"]}}],
  "prerender": [{{"source": "list", "urls": ["http://[::1]:{p}/prerender"]}}]}}
</script></head><body><p>attack page</p>
{"".join(vectors)}
<iframe srcdoc="<script>location='http://127.0.0.1:{p}/srcdoc'</script>"></iframe>
<iframe src="/to-canary"></iframe>
<script>
try {{ navigator.serviceWorker.register("/sw.js").catch(() => {{}}); }} catch (e) {{}}
for (const h of ["127.0.0.1", "[::1]"]) {{
  try {{
    const pc = new RTCPeerConnection({{iceServers: [{{urls: "stun:" + h + ":{stun}"}}]}});
    pc.createDataChannel("d");
    pc.createOffer().then(o => pc.setLocalDescription(o)).catch(() => {{}});
  }} catch (e) {{}}
}}
</script></body></html>"""


class UdpCanary:
    """UDP sockets (bound ones, handed over) that must never receive a datagram."""

    def __init__(self, socks: Iterable[socket.socket]) -> None:
        self._socks = list(socks)
        for s in self._socks:
            s.setblocking(False)
        self.count = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def received(self) -> int:
        for s in self._socks:
            while True:
                try:
                    s.recv(65536)
                except BlockingIOError:
                    break
                self.count += 1
        return self.count

    def close(self) -> None:
        for s in self._socks:
            s.close()


@dataclass
class Lab:
    up: Upstream
    p: int
    canaries: list[CanaryListener]
    udp: UdpCanary

    def hits(self) -> int:
        return sum(self.per_canary())

    def per_canary(self) -> list[int]:
        """Connections per TCP canary port (both hosts), then datagrams on UDP."""
        return [*(c.accepted() for c in self.canaries), self.udp.received()]

    def url(self, path: str) -> str:
        return f"http://{PUBLIC}:{self.p}{path}"


@pytest.fixture
async def lab() -> AsyncIterator[Lab]:
    require_browser()
    # Every socket is closed whatever step fails: one left to the garbage collector would
    # fail some later, unrelated test with a ResourceWarning.
    with contextlib.ExitStack() as stack:
        p, socks = reserve_port([PUBLIC, *CANARY_HOSTS])
        for s in socks.values():
            stack.callback(s.close)
        q_port, q_socks = reserve_port(CANARY_HOSTS)  # a second canary port, not in the policy
        canaries = [
            stack.enter_context(CanaryListener([socks[h] for h in CANARY_HOSTS])),
            stack.enter_context(CanaryListener(q_socks.values())),
        ]
        stun, udp_socks = reserve_port(CANARY_HOSTS, kind=socket.SOCK_DGRAM)
        udp = stack.enter_context(UdpCanary(udp_socks.values()))
        async with Upstream(PUBLIC, sock=socks[PUBLIC]) as up:
            up.page("/attack", attack_page(p, q_port, stun))
            up.redirect("/to-canary", f"http://127.0.0.1:{p}/redirected")
            up.redirect("/redirect", f"http://127.0.0.1:{p}/top")
            up.page(
                "/refresh",
                f'<meta http-equiv="refresh" content="0;url=http://[::1]:{p}/refresh">'
                "<p>moving on</p>",
            )
            up.page(
                "/sw.js",
                f'fetch("http://127.0.0.1:{p}/sw");',
                content_type="text/javascript",
            )
            up.page("/x", "x")
            yield Lab(up, p, canaries, udp)


LAB_ARGS = (
    "--allow-loopback-in-peer-connection",
    f"--unsafely-treat-insecure-origin-as-secure=http://{PUBLIC}",
)


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent="sift-test",
        resolver=StaticResolver({}),
        extra_public_cidrs=["127.0.1.0/24"],
    ) as f:
        yield f


def _settings(netns: str) -> BrowserSettings:
    # Media not blocked here: the img, font and video vectors must fire too.
    return BrowserSettings(block_media=False, netns=netns, network_quiet_s=1.0)


def _runs() -> Iterator[str]:
    yield "off"  # the proxy and the flags alone
    yield "auto"  # plus the network namespace where this machine allows it


@pytest.mark.parametrize("netns", list(_runs()))
async def test_restricted_page_reaches_no_canary(lab: Lab, fetcher: Fetcher, netns: str) -> None:
    policy = restricted_policy(extra_ports=frozenset({lab.p}), timeout_s=20)
    browser = Browser(_settings(netns), fetcher, lab_args=LAB_ARGS)
    try:
        page = await browser.load(
            lab.url("/attack"), policy, caller="agent", caller_pages=1, deadline_s=15
        )
        assert b"attack page" in page.body
        assert browser.last_proxy is not None
        assert browser.last_proxy.stats.refused > 20  # the vectors did fire, and were refused
        for path in ("/redirect", "/refresh"):
            with pytest.raises(Blocked):
                await browser.load(
                    lab.url(path), policy, caller="agent", caller_pages=1, deadline_s=15
                )
    finally:
        await browser.close()
    assert lab.hits() == 0


async def test_control_without_the_guard_hits_the_canaries(lab: Lab, fetcher: Fetcher) -> None:
    """The same page with the guard off: the canaries must see connections, or the test
    above proves nothing."""
    policy = restricted_policy(extra_ports=frozenset({lab.p}), timeout_s=20)
    browser = Browser(_settings("off"), fetcher, guard=False, lab_args=LAB_ARGS)
    try:
        # Unguarded, the page's blocking scripts wait on canaries that never answer, so it
        # may well time out: the hits are what this run is for.
        with contextlib.suppress(BrowserTimeout):
            await browser.load(
                lab.url("/attack"), policy, caller="agent", caller_pages=1, deadline_s=8
            )
    finally:
        await browser.close()
    tcp_p, tcp_q, udp = lab.per_canary()
    print("control hits: port p", tcp_p, "port q", tcp_q, "udp", udp)
    assert tcp_p > 5 and tcp_q > 5 and udp > 0
