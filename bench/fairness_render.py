"""Fairness under a flood of renders or browser pages: a victim's p99, loaded vs unloaded.

    .venv/bin/python bench/fairness_render.py [--victims 30] [--only renders|browser|lone]
        [--start-method forkserver|spawn] [--spare 1] [--reserved 1] [--workers 2]

Loopback only: one upstream on 127.0.1.1 (public through ``extra_public_cidrs``, named
``pub.test`` by ``egress.resolve``), sift's parts as ``sift serve`` assembles them, called
through ``Service.fetch`` (the pipeline every front end uses). Two floods, each by one
restricted caller (``agent``) against one fleet caller's ordinary requests (``indexer``):

- ``flood_renders``: the attacker keeps ``max_inflight`` (16) renders of a page crafted to
  run to its class's render time limit (2 s here) in flight, each on a new URL, while the
  victim fetches plain article pages, each a new URL (a fetch and a render every time). Two
  render workers. The flood's fair share: with a turn kept for callers with nothing running
  (``--reserved 1``, what ``sift serve`` does: ``render_reserved_workers``) nothing — the
  victim's render starts at once on a worker of its own; without (``--reserved 0``) one
  render limit plus starting the killed worker's replacement (measured under the flood),
  since the victim goes first at the next free worker.
- ``flood_browser``: the attacker keeps its class's browser pages (2) busy with pages that
  spin every core (workers in a loop), while the victim loads JavaScript pages with
  ``engine=browser``. The flood's fair share is nothing more: the attacker's class holds at
  most ``browser_pages_total`` of the ``max_pages`` slots, and its pages run at
  ``browser.page_nice`` and are stopped at ``browser.page_cpu_s``.

``lone`` (``--only lone``, not a flood) measures what a kept turn costs a caller alone: one
caller keeps 16 renders of a large article in flight, and the renders per second are
printed (compare ``--reserved 0`` and ``1``, and ``--workers 1`` for the other rule, "a
caller holds at most workers - 1").

Each prints the victim's p50/p99 alone and under the flood, the ratio loaded/unloaded, and
the target: loaded p99 <= 2 x unloaded p99 + the flood's fair share (ratio to the target
<= 1 passes).

Data: none from outside; the pages are made here, on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import os
import statistics
import sys
import tempfile
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import get_args

from aiohttp import web

from fairtable import Row
from sift.assembly import assemble, build_fetcher
from sift.config import BrowserSettings, ClassesSettings, ClassSettings, EgressSettings, Settings
from sift.errors import SiftError
from sift.fetch import StaticResolver
from sift.options import FetchOptions
from sift.principal import Principal
from sift.service import Service
from sift.workers import RenderPool
from sift.workers.process import StartMethod

HOST, NAME = "127.0.1.1", "pub.test"
ATTACKER = Principal("agent", "restricted")
VICTIM = Principal("indexer", "fleet")
NESTED = "<html><body>" + "<div>" * 2000 + "<span>x</span>" * 100 + "</div>" * 2000
SLOW_SELECTOR = "div div div div span"
ARTICLE = (
    "<html><head><title>A {i}</title></head><body><article><h1>Article {i}</h1>"
    + "<p>A paragraph of an ordinary page, long enough to be its main content. </p>" * 20
    + "</article></body></html>"
)
JS_PAGE = """<!doctype html><title>JS {i}</title><div id="app">Loading</div><script>
setTimeout(() => {{ document.getElementById("app").innerHTML = "<h1>Heading {i}</h1>"; }}, 50);
</script>"""
SPIN_PAGE = """<!doctype html><p>spin</p><script>
const src = "for (;;) {}";
for (let i = 0; i < 4; i++) new Worker(URL.createObjectURL(new Blob([src])));
for (;;) {}
</script>"""
RENDER_LIMIT_S = 2.0


async def start_upstream() -> tuple[web.AppRunner, int]:
    def page(text: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            body = text.format(i=request.match_info.get("i", "")) if "{i}" in text else text
            return web.Response(text=body, content_type="text/html")

        return handler

    app = web.Application()
    app.router.add_get("/nested/{i}", page(NESTED))
    app.router.add_get("/article/{i}", page(ARTICLE))
    app.router.add_get("/big/{i}", page(BIG_ARTICLE))
    app.router.add_get("/js/{i}", page(JS_PAGE))
    app.router.add_get("/spin/{i}", page(SPIN_PAGE))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


DEFAULTS = Settings()
BIG_ARTICLE = ARTICLE.replace("</article>", "<p>More of it.</p>" * 3000 + "</article>")


def bench_settings(port: int, workers: int = 2) -> Settings:
    restricted = ClassSettings(extra_ports=(port,), render_timeout_s=RENDER_LIMIT_S)
    return Settings(
        data_dir=tempfile.mkdtemp(prefix="sift-bench-fairness-"),
        access_log=False,
        render_workers=workers,
        classes=dataclasses.replace(ClassesSettings(), restricted=restricted),
        egress=EgressSettings(
            extra_public_cidrs=("127.0.1.0/24",),
            resolve=types.MappingProxyType({NAME: (HOST,)}),
        ),
        browser=BrowserSettings(max_pages=4),
    )


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed_victims(n: int, one: Callable[[int], Awaitable[None]]) -> list[float]:
    """The victim's requests one after the other (a client waiting for each): seconds."""
    times = []
    for i in range(n):
        started = time.perf_counter()
        await one(i)
        times.append(time.perf_counter() - started)
    return times


@contextlib.asynccontextmanager
async def flood(streams: int, one: Callable[[int], Awaitable[None]]) -> AsyncIterator[None]:
    """``streams`` attacker loops, each sending its next request as the last one ends."""
    counter = itertools.count()

    async def loop() -> None:
        while True:
            with contextlib.suppress(SiftError):
                await one(next(counter))

    tasks = [asyncio.ensure_future(loop()) for _ in range(streams)]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def wait_until(check: Callable[[], bool], within_s: float) -> None:
    end = time.monotonic() + within_s
    while not check():
        if time.monotonic() > end:
            raise RuntimeError("the flood did not build up")
        await asyncio.sleep(0.05)


def report(
    name: str, alone: list[float], loaded: list[float], fair_share_s: float, note: str = ""
) -> Row:
    """Print the victim's figures and the target; the row for ``bench/fairness.py``."""
    a99, l99 = p(alone, 0.99), p(loaded, 0.99)
    target = 2 * a99 + fair_share_s
    print(f"\n{name}: victim latency over {len(alone)} requests (ms)")
    print("| | p50 | p99 |")
    print("|---|---|---|")
    print(f"| alone | {statistics.median(alone) * 1000:.0f} | {a99 * 1000:.0f} |")
    print(f"| under the flood | {statistics.median(loaded) * 1000:.0f} | {l99 * 1000:.0f} |")
    print(f"ratio loaded/unloaded p99: {l99 / a99:.1f}x")
    print(
        f"target: p99 <= 2 x {a99 * 1000:.0f} ms + fair share {fair_share_s * 1000:.0f} ms "
        f"= {target * 1000:.0f} ms -> {l99 / target:.2f} of it "
        f"({'met' if l99 <= target else 'MISSED'})",
        flush=True,
    )
    return Row(
        name,
        statistics.median(alone),
        a99,
        statistics.median(loaded),
        l99,
        fair_share_s,
        note,
    )


async def worker_start_s(start_method: StartMethod) -> float:
    """How long a fresh render worker takes to answer on this machine now."""
    pool = RenderPool(1, start_method=start_method)
    started = time.perf_counter()
    try:
        await pool.run(len, "x", timeout_s=60)
    finally:
        pool.close()
    return time.perf_counter() - started


async def flood_renders(
    service: Service, port: int, victims: int, start_method: StartMethod, reserved: int
) -> Row:
    """Renders: 16 slow renders in flight vs a fleet caller's plain pages."""
    base = f"http://{NAME}:{port}"
    run = itertools.count()

    async def victim(i: int) -> None:
        url = f"{base}/article/{next(run)}-{i}"
        env = await service.fetch(VICTIM, FetchOptions(url=url))
        assert env["content"].startswith("# Article"), env["content"][:80]

    async def attacker(i: int) -> None:
        url = f"{base}/nested/{i}"
        await service.fetch(ATTACKER, FetchOptions(url=url, selector=SLOW_SELECTOR))

    await timed_victims(3, victim)  # warm: workers started, modules imported
    alone = await timed_victims(victims, victim)
    inflight = service.settings.classes.restricted.max_inflight
    async with flood(inflight, attacker):
        await wait_until(lambda: service.render_pool.queued("agent") >= inflight - 2, 60)
        loaded = await timed_victims(victims, victim)
        # A killed worker's replacement starts under the flood's load: part of its share.
        start_s = await worker_start_s(start_method)
    print(f"\na render worker starts in {start_s * 1000:.0f} ms under the flood")
    if reserved:
        note = f"fair share: none (a kept turn); a worker starts in {start_s * 1000:.0f} ms"
        return report("renders", alone, loaded, 0.0, note)
    note = f"fair share: one 2 s render limit + a worker's start under the flood ({start_method})"
    return report("renders", alone, loaded, RENDER_LIMIT_S + start_s, note)


async def lone_caller(service: Service, port: int, renders: int = 64) -> float:
    """One caller alone keeps 16 renders of a large article in flight: renders a second."""
    base = f"http://{NAME}:{port}"
    counter = itertools.count()

    async def one() -> None:
        while (i := next(counter)) < renders:
            await service.fetch(VICTIM, FetchOptions(url=f"{base}/big/{i}"))

    await service.fetch(VICTIM, FetchOptions(url=f"{base}/big/warm"))
    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(16)))
    rate = renders / (time.perf_counter() - started)
    print(f"\nlone caller: {renders} renders of a large article, 16 in flight: {rate:.1f} a second")
    return rate


async def flood_browser(service: Service, port: int, victims: int) -> Row:
    """Browser pages: pages spinning every core vs a fleet caller's JavaScript pages."""
    base = f"http://{NAME}:{port}"
    run = itertools.count()

    async def victim(i: int) -> None:
        url = f"{base}/js/{next(run)}-{i}"
        opts = FetchOptions(url=url, engine="browser", wait_for="#app h1")
        env = await service.fetch(VICTIM, opts)
        assert "Heading" in env["content"], env["content"][:80]

    async def attacker(i: int) -> None:
        url = f"{base}/spin/{i}"
        await service.fetch(ATTACKER, FetchOptions(url=url, engine="browser"))

    await timed_victims(3, victim)
    alone = await timed_victims(victims, victim)
    pages = service.settings.classes.restricted.browser_pages_total
    async with flood(pages, attacker):
        await asyncio.sleep(1.0)  # the spinning pages are up
        loaded = await timed_victims(victims, victim)
    return report("browser pages", alone, loaded, 0.0, "2 pages spinning 5 threads each")


async def run(
    only: str | None = None,
    victims: int = 30,
    start_method: StartMethod = "forkserver",
    spare: int = DEFAULTS.render_spare_workers,
    reserved: int = DEFAULTS.render_reserved_workers,
    workers: int = 2,
) -> list[Row]:
    """The floods (``only`` one of them), each a row; the browser flood only where
    Chromium is installed (else it is left out, with a line printed)."""
    rows: list[Row] = []
    runner, port = await start_upstream()
    settings = bench_settings(port, workers)
    async with assemble(
        settings,
        fetcher=build_fetcher(settings, resolver=StaticResolver({})),
        render_pool=RenderPool(
            settings.render_workers,
            memory_bytes=settings.render_memory_bytes,
            start_method=start_method,
            spare=spare,
            reserved=reserved,
        ),
    ) as parts:
        if only == "lone":
            await lone_caller(parts.service, port)
        if only in (None, "renders"):
            rows.append(await flood_renders(parts.service, port, victims, start_method, reserved))
        if only in (None, "browser"):
            if parts.browser is None or not parts.browser.available:
                print("no browser here (apt-get install chromium-headless-shell): skipped")
            else:
                rows.append(await flood_browser(parts.service, port, victims))
    await runner.cleanup()
    print(
        f"\n(pid {os.getpid()}, {workers} render workers + {reserved} kept turn + {spare} "
        f"spare ({start_method}), loopback only)"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--victims", type=int, default=30)
    parser.add_argument("--only", choices=("renders", "browser", "lone"))
    parser.add_argument(
        "--spare",
        type=int,
        default=DEFAULTS.render_spare_workers,
        help="render workers started beyond the turns (render_spare_workers)",
    )
    parser.add_argument(
        "--reserved",
        type=int,
        default=DEFAULTS.render_reserved_workers,
        help="turns kept for callers with nothing running (render_reserved_workers)",
    )
    parser.add_argument("--workers", type=int, default=2, help="render workers (turns)")
    parser.add_argument(
        "--start-method",
        choices=get_args(StartMethod),
        default="forkserver",
        help="how render workers start (workers/process.py)",
    )
    args = parser.parse_args()
    rows = asyncio.run(
        run(args.only, args.victims, args.start_method, args.spare, args.reserved, args.workers)
    )
    if args.only == "browser" and not rows:
        sys.exit("no browser here: apt-get install chromium-headless-shell")


if __name__ == "__main__":
    main()
