"""Fetcher benchmark: sift's guarded fetcher against a plain aiohttp loop, one run.

    .venv/bin/python bench/fetch.py [--pages 2000] [--concurrency 64] [--rounds 3] [--uvloop]

1. Throughput: ``--pages`` small HTML pages from a local upstream at ``--concurrency``,
   sift's ``Fetcher`` (restricted policy: URL rules, resolve + vet, IP-literal connect,
   header bounds, bounded streaming read, charset) against a plain ``aiohttp.ClientSession``
   loop (``get`` + ``read``) on the same pages. Rounds alternate; the median pages/s of each is
   compared. Target: sift >= 0.8x the plain loop.
2. Memory: in a fresh process, fetch a 1 GiB chunked body and a gzip bomb inflating to 1 GiB
   with a 10 MiB limit; report how much the peak RSS (ru_maxrss) grew over the warmed-up
   process. Target: <= 32 MiB. The plain loop's ``resp.read()`` on the same body is shown for
   scale only when ``--plain-memory`` is given (it buffers the whole GiB).

The upstream runs in its own process, so it neither shares the client's event loop nor counts
in the client's RSS. Everything stays on 127.0.1.1 (made "public" with the documented lab
setting ``extra_public_cidrs``); nothing leaves the machine.

Data: the pages and the 1 GiB bodies are generated in the run; nothing to download.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import resource
import statistics
import time
import zlib
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection

import aiohttp
from aiohttp import web

from sift.errors import TooLarge
from sift.fetch import Fetcher, restricted_policy

HOST = "127.0.1.1"
MIB = 1 << 20
PAGE = (
    b"<!doctype html><html><head><title>bench</title></head><body>"
    + b"<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>" * 40
    + b"</body></html>"
)


# -- upstream process ---------------------------------------------------------------------
def gzip_zeros(size_mib: int) -> bytes:
    """A valid gzip stream of ``size_mib`` MiB of zeros, built quickly (see tests/upstream)."""
    zeros = bytes(MIB)
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    segment = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.flush()[:-8]
    crc = 0
    for _ in range(size_mib):
        crc = zlib.crc32(zeros, crc)
    trailer = crc.to_bytes(4, "little") + ((size_mib * MIB) & 0xFFFFFFFF).to_bytes(4, "little")
    return head + segment * (size_mib - 1) + end + trailer


def serve(conn: Connection) -> None:
    bomb = gzip_zeros(1024)

    async def page(request: web.Request) -> web.StreamResponse:
        return web.Response(body=PAGE, content_type="text/html", charset="utf-8")

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = bytes(256 << 10)
        try:
            for _ in range(4096):  # 1 GiB
                await resp.write(chunk)
        except ConnectionError:
            pass
        return resp

    async def gz(request: web.Request) -> web.StreamResponse:
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip"})

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/page/{n}", page)
        app.router.add_get("/stream", stream)
        app.router.add_get("/bomb", gz)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, HOST, 0, backlog=1024)
        await site.start()
        conn.send(site.port)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        await runner.cleanup()

    asyncio.run(main())


# -- throughput -----------------------------------------------------------------------------
async def run_plain(port: int, pages: int, concurrency: int) -> tuple[float, float]:
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> None:
            async with sem, session.get(f"http://{HOST}:{port}/page/{i}") as resp:
                body = await resp.read()
                assert resp.status == 200 and len(body) == len(PAGE)

        return await _timed(one, pages)


async def _timed(one: Callable[[int], Awaitable[None]], pages: int) -> tuple[float, float]:
    """(pages/s, client CPU µs per page) for ``pages`` calls of ``one``."""
    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(pages)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return pages / elapsed, cpu / pages * 1e6


async def run_sift(port: int, pages: int, concurrency: int) -> tuple[float, float]:
    sem = asyncio.Semaphore(concurrency)
    policy = restricted_policy(frozenset({port}))
    async with Fetcher(
        user_agent="sift-bench",
        static_hosts={"bench.test": [HOST]},
        extra_public_cidrs=["127.0.1.0/24"],
    ) as fetcher:

        async def one(i: int) -> None:
            async with sem:
                r = await fetcher.fetch(f"http://bench.test:{port}/page/{i}", policy)
                assert r.status == 200 and len(r.body) == len(PAGE) and r.charset == "utf-8"

        return await _timed(one, pages)


# -- memory (in a fresh process) ------------------------------------------------------------
def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure_memory(port: int, path: str, plain: bool, conn: Connection) -> None:
    async def main() -> tuple[float, str]:
        policy = restricted_policy(frozenset({port}), max_download_bytes=10 * MIB, timeout_s=120)
        async with Fetcher(
            user_agent="sift-bench",
            static_hosts={"bench.test": [HOST]},
            extra_public_cidrs=["127.0.1.0/24"],
        ) as fetcher:
            await fetcher.fetch(f"http://bench.test:{port}/page/0", policy)  # warm up
            async with aiohttp.ClientSession(auto_decompress=True) as session:
                async with session.get(f"http://{HOST}:{port}/page/0") as resp:
                    await resp.read()
                before = rss_mib()
                if plain:
                    async with session.get(f"http://{HOST}:{port}{path}") as resp:
                        outcome = f"plain read {len(await resp.read()) // MIB} MiB"
                else:
                    try:
                        await fetcher.fetch(f"http://bench.test:{port}{path}", policy)
                        outcome = "no error (unexpected)"
                    except TooLarge:
                        outcome = "too_large"
        return rss_mib() - before, outcome

    conn.send(asyncio.run(main()))


def memory(port: int, path: str, plain: bool = False) -> tuple[float, str]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=measure_memory, args=(port, path, plain, child))
    proc.start()
    result: tuple[float, str] = parent.recv()
    proc.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plain-memory", action="store_true")
    parser.add_argument("--uvloop", action="store_true", help="run the clients on uvloop")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        uvloop.install()

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=serve, args=(child,), daemon=True)
    server.start()
    port: int = parent.recv()
    try:
        plain: list[tuple[float, float]] = []
        sift: list[tuple[float, float]] = []
        asyncio.run(run_plain(port, 200, args.concurrency))  # warm up both paths
        asyncio.run(run_sift(port, 200, args.concurrency))
        for r in range(args.rounds):
            plain.append(asyncio.run(run_plain(port, args.pages, args.concurrency)))
            sift.append(asyncio.run(run_sift(port, args.pages, args.concurrency)))
            print(
                f"round {r + 1}: plain {plain[-1][0]:6.0f} pages/s {plain[-1][1]:4.0f} µs CPU/page"
                f"   sift {sift[-1][0]:6.0f} pages/s {sift[-1][1]:4.0f} µs CPU/page"
            )
        p = statistics.median(x[0] for x in plain)
        s = statistics.median(x[0] for x in sift)
        pc = min(x[1] for x in plain)
        sc = min(x[1] for x in sift)
        print(
            f"throughput ({args.pages} pages, concurrency {args.concurrency}, median of "
            f"{args.rounds}): plain aiohttp {p:.0f} pages/s, sift {s:.0f} pages/s, "
            f"ratio {s / p:.2f}x (target >= 0.80x)"
        )
        print(
            f"client CPU per page (least disturbed round): plain {pc:.0f} µs, sift {sc:.0f} µs "
            f"(+{sc - pc:.0f} µs), CPU-bound ratio {pc / sc:.2f}x"
        )
        for path, label in (("/stream", "1 GiB chunked body"), ("/bomb", "gzip bomb -> 1 GiB")):
            grew, outcome = memory(port, path)
            print(f"memory, {label}, 10 MiB limit: peak RSS +{grew:.1f} MiB ({outcome}; "
                  "target <= 32 MiB)")  # fmt: skip
        if args.plain_memory:
            grew, outcome = memory(port, "/stream", plain=True)
            print(
                f"memory, plain aiohttp resp.read() of the 1 GiB body: +{grew:.0f} MiB ({outcome})"
            )
    finally:
        parent.send("stop")
        server.join(timeout=10)


if __name__ == "__main__":
    main()
