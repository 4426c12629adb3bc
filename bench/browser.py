"""JavaScript pages through sift's guarded browser vs bare Playwright, same Chromium, one run.

    .venv/bin/python bench/browser.py [--pages 50] [--rounds 2]
    .venv/bin/python bench/browser.py --auto [--pages 100] [--rounds 2]

1. A local upstream on 127.0.1.1 (public through ``extra_public_cidrs``, so a restricted
   caller may load it) serves N distinct JavaScript pages: each fills ``#app`` with an
   ``<h1>`` and text from a JSON endpoint fetched after 200 ms.
2. sift: ``Service.fetch`` as a restricted caller with ``engine="browser"`` and
   ``wait_for="#app h1"`` — the whole pipeline: URL checks, page slots, a fresh context
   behind its own guard proxy (plus the deny-all browser proxy, the flags, the network
   namespace where allowed), DOM extraction, the content cache and rendering to Markdown.
3. bare: Playwright on the same binary, no proxy, no guard, no extra flags: a fresh context
   per page, ``goto`` to DOMContentLoaded, wait for ``#app h1``, ``page.content()``.

Both run at 2 and 4 pages at once, alternating (and alternating who goes first), ``--rounds``
times; the best round of each
is reported (the machine is shared). Prints pages/s, the ratio sift/bare (target: >= 0.8)
and the peak RSS summed over the browser's processes, per open page. Loopback only.

``--auto`` (issue 20): ``engine="auto"`` on a mix of 90 % server-rendered articles (text in
the HTML, plus an external script) and 10 % shells (an empty mount and a module bundle that
writes the text), against an oracle that knows which pages need the browser (``http`` for
the articles, ``browser`` for the shells); 4 pages at once, fresh URLs every round,
alternating who goes first. Prints pages/s and the ratio auto/oracle (target: >= 0.9).

Data: the `--pages` JavaScript pages are generated in the run; nothing to download. Needs
Chromium (Debian's chromium-headless-shell; docs/browser.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
import types
from pathlib import Path

from aiohttp import web

from sift.assembly import assemble, build_fetcher, build_render_pool
from sift.browser import Browser
from sift.config import BrowserSettings, ClassesSettings, ClassSettings, EgressSettings, Settings
from sift.fetch import StaticResolver
from sift.options import Engine, FetchOptions
from sift.principal import Principal
from sift.service import Service

HOST = "127.0.1.1"
NAME = "pub.test"
CHROMIUM = BrowserSettings().executable
PAGE = """<!doctype html><html><head><title>Page {i}</title></head><body>
<div id="app">Loading…</div><script>
setTimeout(async () => {{
  const d = await (await fetch("/data/{i}")).json();
  document.getElementById("app").innerHTML = "<h1>" + d.title + "</h1><p>" + d.text + "</p>";
}}, 200);
</script></body></html>"""
ARTICLE = """<!doctype html><html><head><title>Article {i}</title>
<script src="/assets/analytics.js" defer></script></head><body><nav><a href="/">Home</a></nav>
<article><h1>Article {i}</h1>{paragraphs}</article><footer>(c) Bench</footer></body></html>"""
SHELL = """<!doctype html><html><head><title>App {i}</title>
<script type="module" src="/assets/app-{i}.js"></script></head><body><div id="root"></div>
</body></html>"""
BUNDLE = """const root = document.getElementById("root");
root.innerHTML = "<h1>App {i}</h1>" + {paragraphs};"""
SENTENCE = "This sentence is part of the text a reader came to this page to read. "


def paragraphs(i: str) -> list[str]:
    return [f"Paragraph {n} of page {i}. " + SENTENCE * 6 for n in range(5)]


async def start_upstream() -> tuple[web.AppRunner, int]:
    async def page(request: web.Request) -> web.Response:
        i = request.match_info["i"]
        return web.Response(text=PAGE.format(i=i), content_type="text/html")

    async def data(request: web.Request) -> web.Response:
        i = request.match_info["i"]
        text = f"Page {i} text, " + "with a sentence that makes it worth extracting. " * 8
        return web.json_response({"title": f"Heading {i}", "text": text})

    async def article(request: web.Request) -> web.Response:
        i = request.match_info["i"]
        body = "".join(f"<p>{p}</p>" for p in paragraphs(i))
        return web.Response(text=ARTICLE.format(i=i, paragraphs=body), content_type="text/html")

    async def shell(request: web.Request) -> web.Response:
        return web.Response(text=SHELL.format(i=request.match_info["i"]), content_type="text/html")

    async def bundle(request: web.Request) -> web.Response:
        i = request.match_info["i"]
        body = " + ".join(f'"<p>{p}</p>"' for p in paragraphs(i))
        js = BUNDLE.format(i=i, paragraphs=body)
        return web.Response(text=js, content_type="text/javascript")

    async def analytics(request: web.Request) -> web.Response:
        return web.Response(text="window.seen = 1;", content_type="text/javascript")

    app = web.Application()
    app.router.add_get("/p/{i}", page)
    app.router.add_get("/data/{i}", data)
    app.router.add_get("/article/{i}", article)
    app.router.add_get("/shell/{i}", shell)
    app.router.add_get("/assets/app-{i}.js", bundle)
    app.router.add_get("/assets/analytics.js", analytics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


def chromium_processes() -> dict[int, tuple[int, int]]:
    """Every Chromium process: pid -> (parent pid, RSS bytes)."""
    out: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "exe") != CHROMIUM:
                continue
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        out[int(entry.name)] = (ppid, kb * 1024)
    return out


def browser_roots() -> set[int]:
    """Browser main processes: Chromium processes whose parent is not Chromium."""
    procs = chromium_processes()
    return {pid for pid, (ppid, _) in procs.items() if ppid not in procs}


def browser_rss_bytes(roots: set[int]) -> int:
    """RSS summed over the process trees of ``roots`` (shared pages counted twice)."""
    procs = chromium_processes()
    total = 0
    for pid, (_, rss) in procs.items():
        cur = pid
        while cur in procs and cur not in roots:
            cur = procs[cur][0]
        if cur in roots:
            total += rss
    return total


class PeakRss:
    def __init__(self, roots: set[int]) -> None:
        self.roots = roots
        self.peak = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, browser_rss_bytes(self.roots))
            await asyncio.sleep(0.05)

    def __enter__(self) -> PeakRss:
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def run_pool(n: int, concurrency: int, one: object) -> float:
    """Pages/s for ``n`` pages, ``concurrency`` at once."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            await one(i)  # type: ignore[operator]

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return n / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--auto", action="store_true", help="auto on a 90/10 mix vs an oracle")
    args = parser.parse_args()
    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"no {CHROMIUM}: apt-get install --no-install-recommends chromium-headless-shell")
    runner, port = await start_upstream()
    settings = bench_settings(port)
    # The parts as sift serve builds them; the fetcher's resolver knows no name (NAME is
    # in egress.resolve), and the two render workers start on first use.
    async with assemble(
        settings,
        fetcher=build_fetcher(settings, resolver=StaticResolver({})),
        render_pool=build_render_pool(settings, workers=2),
        start_pool=False,
    ) as parts:
        assert parts.browser is not None
        if args.auto:
            await compare_auto(args.pages, args.rounds, port, parts.service)
        else:
            await compare(args.pages, args.rounds, port, parts.service, parts.browser)
    await runner.cleanup()


def bench_settings(port: int) -> Settings:
    """A restricted caller may reach the upstream's port; NAME resolves to HOST ("public")."""
    tmp = tempfile.mkdtemp(prefix="sift-bench-browser-")
    restricted = ClassSettings(
        extra_ports=(port,), browser_pages=4, browser_pages_total=4, browser_timeout_s=30
    )
    return Settings(
        data_dir=tmp,
        access_log=False,
        classes=dataclasses.replace(ClassesSettings(), restricted=restricted),
        egress=EgressSettings(
            extra_public_cidrs=("127.0.1.0/24",),
            resolve=types.MappingProxyType({NAME: (HOST,)}),
        ),
        browser=BrowserSettings(max_pages=4),
    )


async def compare(pages: int, rounds: int, port: int, service: Service, browser: Browser) -> None:
    """Pages per second, bare Playwright against sift's guarded browser, and sift's RSS."""
    from playwright.async_api import async_playwright

    agent = Principal("agent", "restricted")
    round_no = 0

    async def sift_one(i: int) -> None:
        url = f"http://{NAME}:{port}/p/{round_no}-{i}"
        opts = FetchOptions(url=url, engine="browser", wait_for="#app h1", max_age_s=0)
        env = await service.fetch(agent, opts)
        assert env["engine"] == "browser" and f"Heading {round_no}-{i}" in env["content"], env

    async def bare_one(i: int) -> None:
        ctx = await bare.new_context()
        try:
            page = await ctx.new_page()
            await page.goto(f"http://{HOST}:{port}/p/{round_no}-{i}", wait_until="domcontentloaded")
            await page.wait_for_selector("#app h1", state="attached")
            html = await page.content()
            assert f"Heading {round_no}-{i}" in html
        finally:
            await ctx.close()

    # Warm both (driver, first launch, first context) outside the measurement. sift's
    # browser starts first, so its process tree is told apart from the bare one.
    await sift_one(-1)
    sift_roots = browser_roots()
    pw = await async_playwright().start()
    bare = await pw.chromium.launch(executable_path=CHROMIUM)
    await bare_one(-1)
    best: dict[tuple[str, int], float] = {}
    rss_per_page: dict[int, float] = {}
    for r in range(rounds):
        for concurrency in (2, 4):
            order = [("bare", bare_one), ("sift", sift_one)]
            for name, one in order if r % 2 == 0 else order[::-1]:  # alternate who goes first
                round_no = r * 10 + concurrency + (0 if name == "bare" else 1000)
                with PeakRss(sift_roots) as peak:
                    rate = await run_pool(pages, concurrency, one)
                key = (name, concurrency)
                best[key] = max(best.get(key, 0.0), rate)
                if name == "sift":
                    per_page = peak.peak / concurrency
                    rss_per_page[concurrency] = max(rss_per_page.get(concurrency, 0), per_page)
                print(f"round {r + 1} {name:4} c={concurrency}: {rate:5.2f} pages/s", flush=True)
    print()
    print(f"{pages} JavaScript pages, best of {rounds} rounds (pages/s):")
    print("| pages at once | bare Playwright | sift (guarded) | ratio | sift RSS / open page |")
    print("|---|---|---|---|---|")
    for concurrency in (2, 4):
        b, s = best[("bare", concurrency)], best[("sift", concurrency)]
        print(
            f"| {concurrency} | {b:.2f} | {s:.2f} | {s / b:.2f}x | "
            f"{rss_per_page[concurrency] / (1 << 20):.0f} MiB |"
        )
    print(f"sift's browser ran in a network namespace: {browser.launcher.netns is not None}")
    await bare.close()
    await pw.stop()


async def compare_auto(pages: int, rounds: int, port: int, service: Service) -> None:
    """Pages per second: ``auto`` on every page against an oracle's engine per page."""
    agent = Principal("agent", "restricted")
    shells = {i for i in range(pages) if i % 10 == 0}  # 10 %, spread through the run
    tag = ""

    def one(mode: str) -> object:
        async def fetch(i: int) -> None:
            kind = "shell" if i in shells else "article"
            engine: Engine = "browser" if i in shells else "http"
            engine = "auto" if mode == "auto" else engine
            url = f"http://{NAME}:{port}/{kind}/{tag}-{i}"
            env = await service.fetch(agent, FetchOptions(url=url, engine=engine, max_age_s=0))
            want = "browser" if i in shells else "http"
            assert env["engine"] == want and f"Paragraph 4 of page {tag}-{i}" in env["content"], env

        return fetch

    tag = "warm"
    await run_pool(10, 2, one("auto"))  # the browser launched, the render workers started
    best: dict[str, float] = {}
    for r in range(rounds):
        order = ["oracle", "auto"] if r % 2 == 0 else ["auto", "oracle"]
        for mode in order:
            tag = f"{r}{mode}"
            rate = await run_pool(pages, 4, one(mode))
            best[mode] = max(best.get(mode, 0.0), rate)
            print(f"round {r + 1} {mode:6}: {rate:5.2f} pages/s", flush=True)
    print()
    print(f"{pages} pages ({len(shells)} shells), 4 at once, best of {rounds} rounds (pages/s):")
    print("| oracle (http or browser per page) | auto | ratio |")
    print("|---|---|---|")
    print(f"| {best['oracle']:.2f} | {best['auto']:.2f} | {best['auto'] / best['oracle']:.2f}x |")


if __name__ == "__main__":
    asyncio.run(main())
