"""Batch jobs: scheduling, end-to-end throughput, submit latency and memory, in one run.

    .venv/bin/python bench/batch.py [--targets 2000] [--latency-ms 50] [--concurrency 64]
                                    [--rounds 3]

Every figure runs against a real `sift serve` subprocess (render_workers = one per core,
as `sift serve` defaults to) and a local upstream in this process; only loopback traffic.

1. Scheduling: `--targets` distinct URLs answered after `--latency-ms` with a small
   text/plain body (rendering costs nearly nothing), batch.concurrency = `--concurrency`,
   a per-host limit that does not bind. Ideal wall time = targets x latency / concurrency.
   Bound: <= 1.25x ideal.
2. End to end: the 181 pages of the extraction benchmark served by the upstream, submitted
   as one batch. Baseline: rendering the same pages in a plain loop in this process (one
   core, no I/O). Bound: >= 0.9x the baseline's pages/s (above 1x means both cores render).
3. Submit: POST /v1/batch with 10,000 targets, until the 202. Bound: <= 1 s.
4. Memory: peak RSS (VmHWM) of the server process while it runs that 10,000-target job, on
   a fresh server. Bound: <= 250 MB. The render workers' peaks are printed beside it.

Data: figure 2 serves the 181 pages of the public scrapinghub article-extraction benchmark
(``bench/data.py`` gets it: ``.venv/bin/python bench/data.py --set scrapinghub``, or
``--from DIR`` offline); the other figures generate their pages in the run.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

import siftserve
from data import extraction_pages
from sift.keys import add_caller
from sift.render import RenderOptions, render

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    base: str
    key: str


@contextmanager
def sift_serve(tmp: Path, concurrency: int) -> Iterator[Server]:
    """A `sift serve` subprocess with a fleet caller allowed to reach loopback."""
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "sift.toml"
    cfg.write_text(
        "[classes.fleet]\nallow_private = true\n"
        f"[batch]\nconcurrency = {concurrency}\nper_host = {concurrency}\n"
    )
    key = add_caller(cfg, "bench", "fleet")
    with siftserve.sift_serve(cfg, tmp / "data") as served:
        yield Server(served.proc, served.base_url, key)


def _hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def load_pages() -> list[bytes]:
    return [gzip.decompress(p.read_bytes()) for p in extraction_pages("scrapinghub")]


def render_loop(pages: list[bytes]) -> float:
    """Seconds to render every page once in this process (the single-core CPU bound)."""
    options = RenderOptions()
    started = time.perf_counter()
    for i, body in enumerate(pages):
        render(body, content_type="text/html", url=f"http://bench.test/page/{i}", options=options)
    return time.perf_counter() - started


async def start_upstream(pages: list[bytes], latency_s: float) -> tuple[web.AppRunner, int]:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(latency_s)
        return web.Response(text=f"item {request.match_info['i']}\n", content_type="text/plain")

    async def page(request: web.Request) -> web.StreamResponse:
        body = pages[int(request.match_info["i"])]
        return web.Response(body=body, content_type="text/html", charset="utf-8")

    async def tiny(request: web.Request) -> web.StreamResponse:
        return web.Response(text=f"t{request.match_info['i']}\n", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/s/{i}", slow)
    app.router.add_get("/page/{i}", page)
    app.router.add_get("/t/{i}", tiny)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    return runner, port


async def run_job(
    client: httpx.AsyncClient, targets: list[str], key: str, quiet_s: float = 0.0
) -> tuple[float, float]:
    """(seconds until the 202, seconds until the job is done). The status is polled every
    20 ms, starting ``quiet_s`` after the submit (so polling does not load the server
    while the job cannot be done yet)."""
    started = time.perf_counter()
    r = await client.post("/v1/batch", json={"targets": targets}, headers={"Idempotency-Key": key})
    submitted = time.perf_counter() - started
    if r.status_code != 202:
        raise SystemExit(f"submit failed: {r.status_code} {r.text[:300]}")
    job = r.json()["id"]
    await asyncio.sleep(quiet_s)
    while True:
        view: dict[str, Any] = (await client.get(f"/v1/batch/{job}")).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.02)
    elapsed = time.perf_counter() - started
    if view["status"] != "done":
        raise SystemExit(f"job ended {view['status']}: {view['counts']}")
    return submitted, elapsed


def _client(server: Server) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.base,
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=120,
    )


async def main(args: argparse.Namespace) -> None:
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    pages = load_pages()
    render_loop(pages[:10])  # warm imports and caches
    loop_s = min(render_loop(pages) for _ in range(args.rounds))
    loop_pps = len(pages) / loop_s
    upstream, port = await start_upstream(pages, args.latency_ms / 1000)
    up = f"http://127.0.0.1:{port}"
    tmp = Path(tempfile.mkdtemp(prefix="sift-bench-batch-"))
    try:
        with sift_serve(tmp / "a", args.concurrency) as server:
            async with _client(server) as client:
                # Warm the server (render workers, connection pools) on other URLs.
                await run_job(client, [f"{up}/t/w{i}" for i in range(50)], "warm")
                # 1. Scheduling.
                # Best of --rounds, each on fresh URLs (the machine is shared: noise).
                n = args.targets
                ideal_s = n * args.latency_ms / 1000 / args.concurrency
                sched = []
                e2e = []
                for r in range(args.rounds):
                    urls = [f"{up}/s/{i}?r={r}" for i in range(n)]
                    sched.append((await run_job(client, urls, f"s{r}", 0.9 * ideal_s))[1])
                    # 2. End to end.
                    urls = [f"{up}/page/{i}?r={r}" for i in range(len(pages))]
                    e2e.append((await run_job(client, urls, f"e{r}"))[1])
                sched_s, e2e_s = min(sched), min(e2e)
        e2e_pps = len(pages) / e2e_s
        with sift_serve(tmp / "b", args.concurrency) as server:
            async with _client(server) as client:
                # 3 and 4. Submit 10,000 targets; the server's peak RSS while it runs them.
                submit_s, big_s = await run_job(
                    client, [f"{up}/t/{i}" for i in range(10_000)], "big"
                )
                rss_mb = _hwm_kib(server.proc.pid) / 1024
                # The render workers (and their fork server): every process under sift.
                workers_mb = [
                    round(_hwm_kib(c) / 1024) for c in siftserve.descendants(server.proc.pid)
                ]
    finally:
        await upstream.cleanup()

    print(f"\n1. scheduling: {n} targets x {args.latency_ms} ms / concurrency "
          f"{args.concurrency}: ideal {ideal_s:.2f} s, measured {sched_s:.2f} s "
          f"(rounds {', '.join(f'{x:.2f}' for x in sched)}) "
          f"-> {sched_s / ideal_s:.2f}x ideal (bound <= 1.25x)")  # fmt: skip
    print(f"2. end to end: {len(pages)} pages in {e2e_s:.2f} s = {e2e_pps:.1f} pages/s "
          f"(rounds {', '.join(f'{x:.2f}' for x in e2e)}); "
          f"plain render loop {loop_s:.2f} s = {loop_pps:.1f} pages/s "
          f"-> {e2e_pps / loop_pps:.2f}x (bound >= 0.9x)")  # fmt: skip
    print(f"3. submit 10,000 targets: {submit_s * 1000:.0f} ms (bound <= 1000 ms); "
          f"the job ran in {big_s:.1f} s ({10_000 / big_s:.0f} targets/s)")  # fmt: skip
    print(f"4. peak RSS of the server running it: {rss_mb:.0f} MB (bound <= 250 MB); "
          f"render workers {workers_mb} MB")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=2000)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3, help="best of N for figures 1 and 2")
    asyncio.run(main(parser.parse_args()))
