"""Crawl throughput against a batch of the same pages, in one run.

    .venv/bin/python bench/crawl.py [--pages 2000] [--latency-ms 50] [--concurrency 32]
                                    [--rounds 5]

A local site (this process, loopback only) of `--pages` HTML pages, each answered after
`--latency-ms`: the root links to 50 section pages, each section to its share of leaf pages,
every leaf back to the root and its section (links a crawl must read and drop as seen). A
real `sift serve` subprocess (batch.concurrency = per_host = `--concurrency`: one host)
then, per round, on fresh URLs (a path prefix per round and kind, so nothing is a cache hit):

- crawls the site: POST /v1/crawl {max_pages: pages, max_depth: 3, scope: prefix,
  sitemap: false}, from the submit until the job is done;
- fetches the same pages as one batch submitted up front (POST /v1/batch).

Printed: the server's peak RSS over the run (`--pages 10000` shows a 10,000-page crawl's
memory), best-of-rounds pages/s of each, their ratio crawl/batch, and the median of the
per-round ratios (rounds alternate which runs first: the machine's load drifts). Target
(issue 15): >= 0.9x — discovery must not starve the fetch slots.

Data: the site is generated in the run; nothing to download.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

# bench/batch.py: the same server harness
from batch import _client, _hwm_kib, run_job, sift_serve

SECTIONS = 50


def layout(pages: int) -> dict[str, list[str]]:
    """Relative path → the relative paths it links to, for a site of exactly ``pages`` pages."""
    leaves = pages - 1 - SECTIONS
    site: dict[str, list[str]] = {"": [f"s{k}/" for k in range(SECTIONS)]}
    for k in range(SECTIONS):
        site[f"s{k}/"] = []
    for i in range(leaves):
        k = i % SECTIONS
        leaf = f"s{k}/p{i}.html"
        site[f"s{k}/"].append(leaf)
        site[leaf] = ["", f"s{k}/"]
    return site


async def start_site(site: dict[str, list[str]], latency_s: float) -> tuple[web.AppRunner, int]:
    async def page(request: web.Request) -> web.StreamResponse:
        prefix, rel = request.match_info["prefix"], request.match_info["rel"]
        links = site.get(rel)
        if links is None:
            return web.Response(status=404, text="no such page\n")
        await asyncio.sleep(latency_s)
        items = "".join(f'<li><a href="/{prefix}/{h}">{h or "home"}</a></li>' for h in links)
        body = (
            f"<!doctype html><html><head><title>{rel or 'home'}</title></head><body>"
            f"<h1>Page {rel}</h1><p>Text of page {rel}, long enough to be content.</p>"
            f"<ul>{items}</ul></body></html>"
        )
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{prefix}/{rel:.*}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await tcp.start()
    return runner, runner.addresses[0][1]


async def run_crawl(client: httpx.AsyncClient, url: str, pages: int, key: str) -> float:
    """Seconds from the submit until the crawl is done; checks it fetched every page."""
    started = time.perf_counter()
    body = {"url": url, "max_pages": pages, "max_depth": 3, "sitemap": False}
    r = await client.post("/v1/crawl", json=body, headers={"Idempotency-Key": key})
    if r.status_code != 202:
        raise SystemExit(f"crawl failed: {r.status_code} {r.text[:300]}")
    job = r.json()["id"]
    while True:
        view: dict[str, Any] = (await client.get(f"/v1/batch/{job}")).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.02)
    elapsed = time.perf_counter() - started
    if view["status"] != "done" or view["targets_total"] != pages:
        raise SystemExit(f"crawl ended {view['status']}: {view['targets_total']} {view['counts']}")
    return elapsed


async def main(args: argparse.Namespace) -> None:
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    site = layout(args.pages)
    upstream, port = await start_site(site, args.latency_ms / 1000)
    up = f"http://127.0.0.1:{port}"
    tmp = Path(tempfile.mkdtemp(prefix="sift-bench-crawl-"))
    crawl_s: list[float] = []
    batch_s: list[float] = []
    peak_kib = 0
    try:
        with sift_serve(tmp, args.concurrency) as server:
            async with _client(server) as client:
                await run_job(client, [f"{up}/warm/s{k}/" for k in range(SECTIONS)], "warm")
                for r in range(args.rounds):
                    # Alternate which goes first: the shared machine's load drifts.
                    urls = [f"{up}/b{r}/{rel}" for rel in site]
                    if r % 2:
                        batch_s.append((await run_job(client, urls, f"b{r}"))[1])
                    crawl_s.append(await run_crawl(client, f"{up}/c{r}/", args.pages, f"c{r}"))
                    if not r % 2:
                        batch_s.append((await run_job(client, urls, f"b{r}"))[1])
            peak_kib = _hwm_kib(server.proc.pid)
    finally:
        await upstream.cleanup()
    ideal = args.pages * args.latency_ms / 1000 / args.concurrency
    crawl_pps, batch_pps = args.pages / min(crawl_s), args.pages / min(batch_s)
    print(
        f"{args.pages} pages x {args.latency_ms} ms, concurrency {args.concurrency} "
        f"(ideal {ideal:.2f} s)"
    )
    print(f"crawl: {min(crawl_s):.2f} s = {crawl_pps:.0f} pages/s  (rounds: "
          + ", ".join(f"{s:.2f}" for s in crawl_s) + ")")  # fmt: skip
    print(f"batch: {min(batch_s):.2f} s = {batch_pps:.0f} pages/s  (rounds: "
          + ", ".join(f"{s:.2f}" for s in batch_s) + ")")  # fmt: skip
    ratio = crawl_pps / batch_pps
    per_round = sorted(b / c for c, b in zip(crawl_s, batch_s, strict=True))
    median = per_round[len(per_round) // 2]
    print(f"server peak RSS (VmHWM) over the run: {peak_kib / 1024:.0f} MiB")
    print(f"crawl / batch throughput: {ratio:.2f}x best of rounds, {median:.2f}x median of the "
          "rounds' ratios (target >= 0.9x)")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
