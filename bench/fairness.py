"""Fairness: one caller floods a resource while another caller's ordinary requests are timed.

    .venv/bin/python bench/fairness.py [--floods baseline,connections,dns,maps,renders,browser]
                                       [--requests 300] [--rounds 3] [--victims 30]
                                       [--flood-nice 19]

sift promises that no caller can stall the others (issue 24). One command runs every flood
(or those ``--floods`` names) and ends with one table: for each, the victim's p50/p99 alone
and under the flood, **p99 loaded / p99 unloaded**, and the issue's target — p99 under the
flood <= 2 x p99 alone + the flood's fair share (``fairtable.Row``).

The floods of this module (``FLOODS``: ``baseline``, ``connections``) each start a fresh
`sift serve` (subprocess, loopback only, ``bench/siftserve.py``) with two callers —
``victim`` (fleet) and ``flooder`` (restricted) — and a local upstream page, then:

1. warm the victim's request (one cache miss);
2. ``--rounds`` times: time ``--requests`` / rounds of them (*unloaded*), start the flood
   (in a process of its own), let it build up for ``--warmup-s``, time as many again
   (*loaded*), stop the flood — so the machine's drifting load falls on both sides;
3. print p50/p99 of both over every round, the victim's failed requests and connections,
   the flood's own counters and rate, and sift's CPU.

What the bench models: an attacker elsewhere on the network. Its client runs on this
machine only because the bench must, so it runs at ``nice 19`` (``--flood-nice``): its own
CPU, which a remote attacker would not take from sift, comes after sift's and the
victim's. It still opens connections as fast as sift closes them (the rate is reported,
about the same at nice 0 and 19). At ``--flood-nice 0`` the victim's median under the flood
rose 7-9 x while sift's CPU did not change: the victim waited for a core the flooder held.

The others run from their own modules, which still run alone too: ``dns`` and ``maps``
(``bench/fairness_egress.py``: a DNS server and an upstream of their own, a `sift serve`),
``renders`` and ``browser`` (``bench/fairness_render.py``: sift's parts in this process, two
render workers; ``browser`` needs Chromium).

Every flood is bounded in count and time (``--flood-s`` at most, then it is stopped) and
talks only to loopback.

Adding a flood of this kind: write one coroutine ``async def my_flood(lab: Lab, stop:
asyncio.Event) -> Counters`` that loads sift as ``lab.flood_key`` until ``stop`` is set and
returns its counters, and register it with ``@flood("name", config=..., victim=...)``:
``config`` is TOML added to that flood's server (e.g. an ``[egress.resolve]`` table),
``victim`` replaces the ordinary request timed (by default a cached ``POST /v1/fetch``) when
the resource needs another one. A flood needing a lab of its own goes in ``runs()``.

Data: none from outside; every server, page and flood is made here, on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import httpx

import siftserve
from fairtable import Row, table
from sift.keys import add_caller

HOST = "127.0.0.1"  # the only address any part of this bench talks to
MAX_CONNECTIONS = 64  # the bench server's listener.max_connections
BASE_CONFIG = (
    f"[classes.fleet]\nallow_private = true\n[listener]\nmax_connections = {MAX_CONNECTIONS}\n"
)
PAGE = (
    "<html><head><title>Fairness</title></head><body><article><h1>Victim page</h1>"
    + "".join(
        f"<p>Paragraph {i} of an ordinary article, cached after one fetch.</p>" for i in range(30)
    )
    + "</article></body></html>"
).encode()

Counters = Counter[str]


@dataclass(frozen=True)
class Lab:
    """One running sift and what a flood and the victim need to reach it."""

    base_url: str
    port: int
    victim_key: str
    flood_key: str
    page_url: str  # the upstream page the victim fetches
    max_connections: int
    pid: int  # the sift serve process (its CPU time is reported)


FloodFn = Callable[[Lab, asyncio.Event], Awaitable[Counters]]
VictimFn = Callable[[Lab, httpx.AsyncClient], Awaitable[None]]


async def fetch_cached(lab: Lab, client: httpx.AsyncClient) -> None:
    """The ordinary request: a /v1/fetch of a page sift has cached."""
    r = await client.post("/v1/fetch", json={"url": lab.page_url})
    r.raise_for_status()


@dataclass(frozen=True)
class Flood:
    name: str
    run: FloodFn
    config: str = ""
    victim: VictimFn = fetch_cached


FLOODS: dict[str, Flood] = {}


def flood(
    name: str, *, config: str = "", victim: VictimFn = fetch_cached
) -> Callable[[FloodFn], FloodFn]:
    """Register a flood under ``name`` (see the module docstring)."""

    def register(fn: FloodFn) -> FloodFn:
        FLOODS[name] = Flood(name, fn, config, victim)
        return fn

    return register


# -- the floods ------------------------------------------------------------------------------


@flood("baseline")
async def nothing(lab: Lab, stop: asyncio.Event) -> Counters:
    """No flood at all: the loaded run measures only the noise between two runs."""
    await stop.wait()
    return Counter()


TRICKLE_S = 1.0  # a slow-body attacker sends one byte this often
SLOW_BODY_BYTES = 100_000  # ... of a body declared this long (a stall of 27 hours)
MAX_OPENED = 50_000  # connections one flood may open in all


@flood("connections")
async def slow_bodies(lab: Lab, stop: asyncio.Event) -> Counters:
    """Twice ``max_connections`` keyed clients each send a whole POST head, then one body
    byte per second; whenever sift closes one (evicted for a newcomer, or past its body
    deadline) it reconnects at once. Counts the answers sift gave them by status."""
    counters: Counters = Counter()
    head = (
        f"POST /v1/fetch HTTP/1.1\r\nHost: {HOST}:{lab.port}\r\n"
        f"Authorization: Bearer {lab.flood_key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {SLOW_BODY_BYTES}\r\n\r\n{{"
    ).encode()

    async def attacker() -> None:
        while not stop.is_set() and counters["opened"] < MAX_OPENED:
            try:
                reader, writer = await asyncio.open_connection(HOST, lab.port)
            except OSError:
                counters["connect_failed"] += 1
                await asyncio.sleep(0.1)
                continue
            counters["opened"] += 1
            try:
                writer.write(head)
                while not stop.is_set():
                    await writer.drain()
                    try:
                        answer = await asyncio.wait_for(reader.read(4096), TRICKLE_S)
                    except TimeoutError:
                        writer.write(b" ")
                        continue
                    status = answer.split(b" ", 2)[1].decode() if answer else "closed"
                    counters[f"answer_{status}"] += 1
                    break
            except OSError:
                counters["reset"] += 1
            finally:
                writer.close()

    await asyncio.gather(*(attacker() for _ in range(2 * lab.max_connections)))
    return counters


# -- running one flood ---------------------------------------------------------------------


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer((HOST, 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/page"
    finally:
        server.shutdown()


@contextmanager
def sift_serve(tmp: Path, config: str, page_url: str) -> Iterator[Lab]:
    cfg = tmp / "sift.toml"
    cfg.write_text(BASE_CONFIG + config)
    victim, flooder = add_caller(cfg, "victim", "fleet"), add_caller(cfg, "flooder", "restricted")
    with siftserve.sift_serve(cfg, tmp / "data") as served:
        yield Lab(
            served.base_url,
            served.port,
            victim,
            flooder,
            page_url,
            MAX_CONNECTIONS,
            served.proc.pid,
        )


@dataclass
class Timing:
    latencies_s: list[float]
    failed: int
    connections: set[object] = field(default_factory=set)  # the victim's, by local address

    def p(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def time_victim(lab: Lab, victim: VictimFn, requests: int, until: float) -> Timing:
    """``requests`` victim requests one after another (or until ``until``, loop time)."""
    timing = Timing([], 0)
    headers = {"Authorization": f"Bearer {lab.victim_key}"}

    async def seen(response: httpx.Response) -> None:
        stream = response.extensions.get("network_stream")
        if stream is not None:
            timing.connections.add(stream.get_extra_info("client_addr"))

    async with httpx.AsyncClient(
        base_url=lab.base_url, headers=headers, timeout=60, event_hooks={"response": [seen]}
    ) as client:
        loop = asyncio.get_running_loop()
        for _ in range(requests):
            if loop.time() > until:
                break
            started = time.perf_counter()
            try:
                await victim(lab, client)
            except httpx.HTTPError:
                timing.failed += 1
                continue
            timing.latencies_s.append(time.perf_counter() - started)
    return timing


def _flood_process(
    name: str, lab: Lab, stop: EventType, out: Queue[Counters], nice: int = 0
) -> None:
    """The flood, in a process of its own: its event loop and CPU are not the victim's.
    ``nice`` lowers its priority (see ``--flood-nice``)."""
    os.nice(nice)

    async def run() -> Counters:
        loop = asyncio.get_running_loop()
        stopped = asyncio.Event()
        threading.Thread(
            target=lambda: (stop.wait(), loop.call_soon_threadsafe(stopped.set)), daemon=True
        ).start()
        return await FLOODS[name].run(lab, stopped)

    out.put(asyncio.run(run()))


@dataclass
class Round:
    """What one round measured: the victim alone, then under the flood."""

    unloaded: Timing
    loaded: Timing
    counters: Counters
    cpu_s: tuple[float, float, float]  # sift alone, sift and the flooder under the flood
    took_s: tuple[float, float]  # how long each side lasted


async def one_round(spec: Flood, lab: Lab, args: argparse.Namespace, requests: int) -> Round:
    """``requests`` victim requests alone, then as many under a fresh flood process."""
    loop = asyncio.get_running_loop()
    cpu, started = siftserve.cpu_s(lab.pid), time.perf_counter()
    unloaded = await time_victim(lab, spec.victim, requests, loop.time() + args.flood_s)
    alone = (siftserve.cpu_s(lab.pid) - cpu, time.perf_counter() - started)
    ctx = multiprocessing.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    flooder = ctx.Process(
        target=_flood_process, args=(spec.name, lab, stop, out, args.flood_nice), daemon=True
    )
    flooder.start()
    try:
        await asyncio.sleep(args.warmup_s)
        assert flooder.pid is not None
        cpu, flood_cpu = siftserve.cpu_s(lab.pid), siftserve.cpu_s(flooder.pid)
        started = time.perf_counter()
        loaded = await time_victim(lab, spec.victim, requests, loop.time() + args.flood_s)
        took = time.perf_counter() - started
        busy = siftserve.cpu_s(lab.pid) - cpu
        flood_cpu = siftserve.cpu_s(flooder.pid) - flood_cpu
    finally:
        stop.set()
        counters: Counters = await asyncio.to_thread(out.get, True, 60)
        flooder.join(10)
        if flooder.is_alive():
            flooder.kill()
    return Round(unloaded, loaded, counters, (alone[0], busy, flood_cpu), (alone[1], took))


async def run_flood(spec: Flood, lab: Lab, args: argparse.Namespace) -> Row:
    """``--rounds`` rounds of (alone, under the flood), so the machine's drifting load falls
    on both sides; p50/p99 over every round's requests."""
    loop = asyncio.get_running_loop()
    await time_victim(lab, spec.victim, 1, loop.time() + 60)  # warm: the one cache miss
    rounds = [
        await one_round(spec, lab, args, args.requests // args.rounds) for _ in range(args.rounds)
    ]
    unloaded, loaded = Timing([], 0), Timing([], 0)
    counters: Counters = Counter()
    for r in rounds:
        unloaded.latencies_s += r.unloaded.latencies_s
        loaded.latencies_s += r.loaded.latencies_s
        unloaded.failed += r.unloaded.failed
        loaded.failed += r.loaded.failed
        loaded.connections |= r.loaded.connections
        counters += r.counters
    idle_cpu = sum(r.cpu_s[0] for r in rounds) / sum(r.took_s[0] for r in rounds)
    flood_s = sum(r.took_s[1] for r in rounds)
    busy_cpu = sum(r.cpu_s[1] for r in rounds) / flood_s
    flood_cpu = sum(r.cpu_s[2] for r in rounds) / flood_s
    ratio = loaded.p(0.99) / unloaded.p(0.99)
    print(
        f"{spec.name:12} unloaded p50 {unloaded.p(0.5) * 1e3:7.1f} ms p99 "
        f"{unloaded.p(0.99) * 1e3:7.1f} ms | loaded p50 {loaded.p(0.5) * 1e3:7.1f} ms p99 "
        f"{loaded.p(0.99) * 1e3:7.1f} ms | p99 ratio {ratio:5.2f} | victim "
        f"{len(loaded.latencies_s)} ok, {loaded.failed} failed, on "
        f"{len(loaded.connections)} connection(s) | sift CPU "
        f"{idle_cpu:.0%} -> {busy_cpu:.0%} of a core (the flooder {flood_cpu:.0%}, "
        f"nice {args.flood_nice}) | load {os.getloadavg()[0]:.1f}"
    )
    note = ", ".join(f"{k} {v}" for k, v in sorted(counters.items()))
    if counters:
        print(f"{'':12} flood: {note}")
    if "opened" in counters:
        note = (
            f"{counters['opened'] / (flood_s + args.rounds * args.warmup_s):,.0f} connections/s "
            f"({counters['opened']:,} opened, {counters['answer_503']:,} answered 503)"
        )
    return Row(
        spec.name,
        unloaded.p(0.5),
        unloaded.p(0.99),
        loaded.p(0.5),
        loaded.p(0.99),
        0.0,
        f"sift CPU {busy_cpu:.0%} of a core; {note}" if note else f"sift CPU {busy_cpu:.0%}",
    )


def serve_flood(name: str, args: argparse.Namespace) -> list[Row]:
    """One flood of ``FLOODS`` against a fresh ``sift serve``."""
    spec = FLOODS[name]
    with (
        upstream() as page_url,
        tempfile.TemporaryDirectory() as tmp,
        sift_serve(Path(tmp), spec.config, page_url) as lab,
    ):
        return [asyncio.run(run_flood(spec, lab, args))]


def egress_flood(name: str, args: argparse.Namespace) -> list[Row]:
    """``bench/fairness_egress.py``'s DNS or maps flood (a ``sift serve`` of its own)."""
    import fairness_egress

    if name == "dns":
        result = fairness_egress.flood_dns()
        note = "8 fetches of never-answering names"
    else:
        result = fairness_egress.flood_maps()
        note = "16 maps of a 50,000-URL sitemap"
    print(result, flush=True)
    note += f"; {result['flood_answered']} answered while timed; upstream and flood at nice 19"
    return [fairness_egress.as_row(result, note)]


def render_flood(name: str, args: argparse.Namespace) -> list[Row]:
    """``bench/fairness_render.py``'s render or browser-page flood (sift's parts in this
    process)."""
    import fairness_render

    return asyncio.run(fairness_render.run(only=name, victims=args.victims))


def runs() -> dict[str, Callable[[str, argparse.Namespace], list[Row]]]:
    """Every flood by name: those registered here (``FLOODS``), then the egress and render
    floods of their own modules."""
    out: dict[str, Callable[[str, argparse.Namespace], list[Row]]] = dict.fromkeys(
        FLOODS, serve_flood
    )
    out |= {"dns": egress_flood, "maps": egress_flood}
    out |= {"renders": render_flood, "browser": render_flood}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    every = runs()
    parser.add_argument("--floods", default=",".join(every), help=f"of: {', '.join(every)}")
    parser.add_argument("--requests", type=int, default=300, help="victim requests per run")
    parser.add_argument("--rounds", type=int, default=3, help="alone/flood rounds per flood")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="flood build-up before timing")
    parser.add_argument("--flood-s", type=float, default=30.0, help="longest a timed run lasts")
    parser.add_argument("--victims", type=int, default=30, help="victim requests, renders")
    parser.add_argument(
        "--flood-nice",
        type=int,
        default=19,
        help="the flood process's nice (19: its CPU comes last, as a remote attacker's would "
        "not be on this machine at all; 0: it competes with sift and the victim)",
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.floods.split(",") if n.strip()]
    unknown = [n for n in names if n not in every]
    if unknown:
        raise SystemExit(f"unknown flood(s) {', '.join(unknown)}; known: {', '.join(every)}")
    print(f"{args.requests} victim requests per run; max_connections {MAX_CONNECTIONS}")
    rows: list[Row] = []
    for name in names:
        rows += every[name](name, args)
    print("\n" + table(rows))


if __name__ == "__main__":
    main()
