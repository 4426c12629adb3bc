"""Fairness under an egress flood (issue 24): DNS and maps.

    .venv/bin/python bench/fairness_egress.py [dns] [maps] [resolvers]

Each flood starts what it needs — a DNS server on 127.0.0.1 (``tests/dnsserver``) that never
answers names under ``stall.test``, an upstream on 127.0.1.1 (made "public" with the lab
setting ``extra_public_cidrs``), and a real ``sift serve`` in its own process — then times a
fleet caller's ordinary requests alone (unloaded) and while a restricted caller floods
(loaded), and reports the victim's p99 both ways and their ratio (the issue's target: within
2x, plus the flood's fair share). Nothing leaves loopback.

- ``flood_dns``: the attacker keeps 8 fetches of never-answering names in flight (each would
  hold its lookup 30 s); the victim fetches a name the DNS server answers (``max_age_s=0``:
  a lookup every time) and a mapped name, in turn.
- ``flood_maps``: the attacker keeps 16 ``/v1/map`` calls in flight on a site whose
  robots.txt names a 50,000-URL sitemap (3.7 MB); the victim fetches a cached page.
- ``compare_resolvers``: the choice behind ``flood_dns``, in one process: the victim's
  lookup latency while 16 callers hold 4 never-answering lookups each, with c-ares
  (``AresResolver``) against a bounded pool of 8 threads doing blocking lookups whose
  sockets time out at the deadline (the best a thread pool can do: ``getaddrinfo`` itself
  cannot even be given a deadline).

``flood_dns`` and ``flood_maps`` return a dict (``unloaded_p99_s``, ``loaded_p99_s``,
``ratio``, ``errors``) a fairness registry can collect.

Data: none from outside; the DNS server, pages and sitemaps are made here, on loopback.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any, TypeVar

import httpx
from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from dnsserver import DnsServer  # noqa: E402
from fairtable import Row  # noqa: E402
from servehelpers import Served, sift_serve, write_config  # noqa: E402
from sift.errors import DnsFailure  # noqa: E402
from sift.fetch import AresResolver, DnsLimits, Lookups  # noqa: E402

T = TypeVar("T")
HOST = "127.0.1.1"
STALL = ".stall.test"
SITEMAP_URLS = 50_000
PAGE = b"<html><body>" + b"<p>victim page</p>" * 50 + b"</body></html>"


# -- the upstream, in a process of its own ---------------------------------------------------
# The upstream and the flood's client stand for machines elsewhere on the network: they run
# here only because the bench must, at this nice, so their CPU (serving 16 copies of a 3.7 MB
# sitemap, in the victim's own process before) comes after sift's and the victim's.
REMOTE_NICE = 19


def _serve_upstream(sitemap_urls: int, nice: int, ready: Queue[int], stop: EventType) -> None:
    os.nice(nice)

    async def main() -> None:
        app = web.Application()
        sitemap = b""

        async def page(_: web.Request) -> web.Response:
            return web.Response(body=PAGE, content_type="text/html")

        async def robots(req: web.Request) -> web.Response:
            return web.Response(text=f"Sitemap: http://{req.host}/sm.xml\n")

        async def sm(_: web.Request) -> web.Response:
            return web.Response(body=sitemap, content_type="application/xml")

        app.router.add_get("/", page)
        app.router.add_get("/page", page)
        app.router.add_get("/robots.txt", robots)
        app.router.add_get("/sm.xml", sm)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, HOST, 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        entries = "".join(
            f"<url><loc>http://site.test:{port}/p/{i}</loc></url>" for i in range(sitemap_urls)
        )
        sitemap = (
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/'
            f'sitemap/0.9">{entries}</urlset>'
        ).encode()
        ready.put(port)
        await asyncio.to_thread(stop.wait)
        await runner.cleanup()

    asyncio.run(main())


@contextmanager
def upstream(sitemap_urls: int = 0, nice: int = REMOTE_NICE) -> Iterator[int]:
    """An HTTP server on 127.0.1.1, in a process of its own at ``nice``: ``/page``, ``/``
    and, for maps, robots.txt naming a sitemap of ``sitemap_urls`` URLs. Yields its port."""
    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve_upstream, args=(sitemap_urls, nice, ready, stop), daemon=True)
    proc.start()
    try:
        yield ready.get(True, 60)
    finally:
        stop.set()
        proc.join(10)
        if proc.is_alive():
            proc.kill()


@contextmanager
def lab(tmp: Path, port: int, dns: DnsServer) -> Iterator[Served]:
    extra = (
        f"[classes.restricted]\nextra_ports = [{port}]\n"
        '[egress]\nextra_public_cidrs = ["127.0.1.0/24"]\n'
        f'dns_servers = ["{dns.address}"]\ndns_timeout_s = 30.0\n'
        f'[egress.resolve]\n"site.test" = ["{HOST}"]\n"mapped.test" = ["{HOST}"]\n'
    )
    with sift_serve(tmp, config=write_config(tmp, extra)) as served:
        yield served


# -- timing -------------------------------------------------------------------------------
def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def time_victim(
    client: httpx.AsyncClient,
    urls: list[str],
    key: str,
    n: int,
    params: dict[str, Any],
    gap_s: float = 0.0,
) -> tuple[list[float], int]:
    """``n`` victim requests one after another, ``gap_s`` apart (so the timed requests span
    the flood's steady state, not one burst of it)."""
    latencies: list[float] = []
    errors = 0
    for i in range(n):
        if gap_s and i:
            await asyncio.sleep(gap_s)
        started = time.perf_counter()
        r = await client.get(
            "/v1/fetch",
            params={"url": urls[i % len(urls)], **params},
            headers={"Authorization": f"Bearer {key}"},
        )
        latencies.append(time.perf_counter() - started)
        errors += r.status_code != 200
    return latencies, errors


@dataclass(frozen=True)
class Attack:
    """A flood, run by ``_attack_process`` in a process of its own (its event loop and CPU
    are not the victim's client's): ``concurrency`` requests kept in flight, each made by
    ``request(i)`` of ``kind`` (``dns``: a fetch of a never-answering name; ``maps``: a
    ``/v1/map`` of the big-sitemap site)."""

    kind: str
    base_url: str
    key: str
    port: int
    concurrency: int


def _attack_request(attack: Attack, client: httpx.AsyncClient, i: int) -> Awaitable[object]:
    headers = {"Authorization": f"Bearer {attack.key}"}
    if attack.kind == "dns":
        url = f"http://a{i}{STALL}:{attack.port}/page"
        return client.get("/v1/fetch", params={"url": url}, headers=headers)
    body = {"url": f"http://site.test:{attack.port}/", "limit": 10_000}
    return client.post("/v1/map", json=body, headers=headers)


def _attack_process(attack: Attack, stop: EventType, out: Queue[int]) -> None:
    os.nice(REMOTE_NICE)  # a remote attacker's CPU is not sift's (see REMOTE_NICE)

    async def run() -> int:
        answered = 0
        async with httpx.AsyncClient(base_url=attack.base_url, timeout=120) as client:

            async def one(i: int) -> None:
                nonlocal answered
                await _attack_request(attack, client, i)
                answered += 1

            flood = asyncio.ensure_future(keep_in_flight(attack.concurrency, one))
            await asyncio.to_thread(stop.wait)
            flood.cancel()
            await asyncio.gather(flood, return_exceptions=True)
        return answered

    out.put(asyncio.run(run()))


async def measure(
    served: Served,
    urls: list[str],
    params: dict[str, Any],
    attack: Attack,
    n: int,
    settle_s: float,
    gap_s: float = 0.0,
    rounds: int = 1,
    drain_s: float = 0.0,
) -> dict[str, Any]:
    """The victim's requests alone, then under the flood, ``rounds`` times in turn (the
    machine's other load drifts: interleaving spreads it over both sides); each flood
    builds up for ``settle_s`` before the timed requests and is given ``drain_s`` after
    it stops (work the server still finishes for it) before the next unloaded run."""
    unloaded: list[float] = []
    loaded: list[float] = []
    errors = answered = 0
    async with httpx.AsyncClient(base_url=served.base_url, timeout=120) as client:
        await time_victim(client, urls, served.fleet_key, 5, params)  # warm
        for r in range(rounds):
            if r:
                await asyncio.sleep(drain_s)
            alone, e1 = await time_victim(client, urls, served.fleet_key, n, params, gap_s)
            (under, e2), flood_answered = await _under_flood(
                attack, settle_s, time_victim(client, urls, served.fleet_key, n, params, gap_s)
            )
            unloaded += alone
            loaded += under
            errors += e1 + e2
            answered += flood_answered
    return {
        "unloaded_p99_s": round(p99(unloaded), 4),
        "loaded_p99_s": round(p99(loaded), 4),
        "unloaded_median_s": round(statistics.median(unloaded), 4),
        "loaded_median_s": round(statistics.median(loaded), 4),
        "ratio": round(p99(loaded) / p99(unloaded), 2),
        "errors": errors,
        "flood_answered": answered,
        "samples": len(loaded),
    }


async def _under_flood(attack: Attack, settle_s: float, timed: Awaitable[T]) -> tuple[T, int]:
    """``timed`` while the flood runs in its own process; and how many flood requests
    were answered meanwhile."""
    ctx = multiprocessing.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    flooder = ctx.Process(target=_attack_process, args=(attack, stop, out), daemon=True)
    flooder.start()
    try:
        await asyncio.sleep(settle_s)
        result = await timed
    finally:
        stop.set()
        answered: int = await asyncio.to_thread(out.get, True, 60)
        flooder.join(10)
        if flooder.is_alive():
            flooder.kill()
    return result, answered


async def keep_in_flight(concurrency: int, one: Callable[[int], Awaitable[object]]) -> None:
    counter = iter(range(1 << 30))

    async def worker() -> None:
        while True:
            with suppress(httpx.HTTPError):
                await one(next(counter))

    await asyncio.gather(*(worker() for _ in range(concurrency)))


# -- the floods ---------------------------------------------------------------------------
def flood_dns(
    n: int = 200, attackers: int = 8, gap_s: float = 0.02, rounds: int = 3
) -> dict[str, Any]:
    """The victim's fetches (a resolving name, a mapped name) alone and while a restricted
    caller keeps ``attackers`` fetches of never-answering names in flight: ``rounds`` x
    (``n`` fetches ``gap_s`` apart alone, then as many under the flood)."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        DnsServer({"ok.test": [HOST]}, silent_suffixes=[STALL]) as dns,
        upstream() as port,
        lab(Path(tmp), port, dns) as served,
    ):
        urls = [f"http://ok.test:{port}/page", f"http://mapped.test:{port}/page"]
        attack = Attack("dns", served.base_url, served.restricted_key, port, attackers)
        result = asyncio.run(measure(served, urls, {"max_age_s": 0}, attack, n, 0.5, gap_s, rounds))
        result["stalled_names_queried"] = sum(1 for q in dns.queries if q.endswith(STALL))
    return {"flood": "dns", **result}


def flood_maps(
    n: int = 200, maps: int = 16, gap_s: float = 0.02, rounds: int = 3
) -> dict[str, Any]:
    """The victim's cached fetch alone and while a restricted caller keeps ``maps`` maps of
    a site with a 50,000-URL sitemap in flight: ``rounds`` x (``n`` fetches ``gap_s`` apart
    alone, then as many after 3 s of the flood, when its maps answer in turn)."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        DnsServer({}, silent_suffixes=[STALL]) as dns,
        upstream(SITEMAP_URLS) as port,
        lab(Path(tmp), port, dns) as served,
    ):
        urls = [f"http://site.test:{port}/page"]
        attack = Attack("maps", served.base_url, served.restricted_key, port, maps)
        result = asyncio.run(measure(served, urls, {}, attack, n, 3.0, gap_s, rounds, 6.0))
    return {"flood": "maps", **result}


def as_row(result: dict[str, Any], note: str = "") -> Row:
    """A flood's result as a row of ``bench/fairness.py``'s table (no fair share: the
    flood may take nothing the victim needs)."""
    return Row(
        str(result["flood"]),
        result["unloaded_median_s"],
        result["unloaded_p99_s"],
        result["loaded_median_s"],
        result["loaded_p99_s"],
        0.0,
        note,
    )


# -- the resolver choice ------------------------------------------------------------------
def _query(name: str) -> bytes:
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)


class ThreadPoolResolver:
    """Blocking lookups (one UDP query, the socket timing out at ``timeout_s``) on a bounded
    pool of threads: each lookup holds a thread until it ends."""

    def __init__(self, server: DnsServer, threads: int, timeout_s: float) -> None:
        self._pool = ThreadPoolExecutor(threads)
        self._server = server
        self._timeout_s = timeout_s

    def _blocking(self, host: str) -> list[str]:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(self._timeout_s)
            s.sendto(_query(host), ("127.0.0.1", self._server.port))
            try:
                reply = s.recv(4096)
            except TimeoutError as exc:
                raise DnsFailure(host) from exc
        if struct.unpack("!H", reply[6:8])[0] == 0:
            raise DnsFailure(host)
        return [socket.inet_ntoa(reply[-4:])]

    async def resolve(self, host: str, port: int) -> list[str]:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._blocking, host)

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


async def _victim_under_stall(front: Lookups, callers: int, per_caller: int) -> dict[str, Any]:
    stalls = [
        asyncio.create_task(front.resolve(f"c{c}-{i}{STALL}", 80, f"caller{c}"))
        for c in range(callers)
        for i in range(per_caller)
    ]
    await asyncio.sleep(0.2)
    latencies = []
    failures = 0
    for _ in range(20):
        started = time.perf_counter()
        try:
            await front.resolve("ok.test", 80, "victim")
        except DnsFailure:
            failures += 1
        latencies.append(time.perf_counter() - started)
    for t in stalls:
        t.cancel()
    await asyncio.gather(*stalls, return_exceptions=True)
    await front.close()
    return {"victim_p99_s": round(p99(latencies), 4), "victim_failures": failures}


def compare_resolvers(timeout_s: float = 3.0) -> dict[str, Any]:
    """The victim's lookups while 16 callers hold 4 never-answering lookups each."""
    out: dict[str, Any] = {}
    with DnsServer({"ok.test": [HOST]}, silent_suffixes=[STALL]) as dns:
        limits = DnsLimits(timeout_s=timeout_s, servers=(dns.address,))
        for kind in ("c-ares", "threads-8"):
            resolver: Any = (
                AresResolver(servers=limits.servers, timeout_s=timeout_s)
                if kind == "c-ares"
                else ThreadPoolResolver(dns, 8, timeout_s)
            )
            out[kind] = asyncio.run(_victim_under_stall(Lookups({}, resolver, limits), 16, 4))
    return {"flood": "resolvers", "deadline_s": timeout_s, **out}


if __name__ == "__main__":
    chosen = sys.argv[1:] or ["resolvers", "dns", "maps"]
    runs = {"dns": flood_dns, "maps": flood_maps, "resolvers": compare_resolvers}
    for name in chosen:
        print(runs[name](), flush=True)
