"""The render pool against the ProcessPoolExecutor it replaced, in one run.

    .venv/bin/python bench/renderpool.py [--rounds 4]

Renders the 181 pages of the public scrapinghub article-extraction benchmark (``bench/data.py``
gets it: ``.venv/bin/python bench/data.py --set scrapinghub``, or ``--from DIR`` offline)
with 2 workers and 4 renders in flight, through a spawn ProcessPoolExecutor (the old path:
no time limit, one dead worker breaks the pool) and through sift's RenderPool (hard time and
memory limits), alternating which goes first; prints the best round of each and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor

from data import extraction_pages
from sift.render import RenderOptions
from sift.snapshot import render_call
from sift.workers import RenderPool

OPTS = RenderOptions(max_bytes=4 << 20, timeout_s=30)
IN_FLIGHT = 4


async def _all(bodies: list[bytes], one: Callable[[bytes], Awaitable[object]]) -> None:
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def bounded(body: bytes) -> None:
        async with sem:
            await one(body)

    await asyncio.gather(*(bounded(b) for b in bodies))


async def main(rounds: int) -> None:
    bodies = [p.read_bytes() for p in extraction_pages("scrapinghub")]
    executor = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    pool = RenderPool(2, memory_bytes=1 << 30)
    loop = asyncio.get_running_loop()

    async def old(body: bytes) -> object:
        args = (body, "text/html", "http://x/", OPTS, None)
        return await loop.run_in_executor(executor, render_call, *args)

    async def new(body: bytes) -> object:
        return await pool.run(render_call, body, "text/html", "http://x/", OPTS, None, timeout_s=30)

    times: dict[str, list[float]] = {"ProcessPoolExecutor": [], "RenderPool": []}
    runs = {"ProcessPoolExecutor": old, "RenderPool": new}
    try:
        for one in runs.values():  # warm both: workers started, modules imported
            await _all(bodies, one)
        for r in range(rounds):
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for name in order:
                started = time.perf_counter()
                await _all(bodies, runs[name])
                times[name].append(time.perf_counter() - started)
    finally:
        executor.shutdown()
        pool.close()
    print(f"{len(bodies)} pages, 2 workers, {IN_FLIGHT} in flight, {rounds} alternating rounds")
    for name, ts in times.items():
        print(f"{name:20} best {min(ts):.2f} s  (rounds {', '.join(f'{t:.2f}' for t in ts)})")
    ratio = min(times["RenderPool"]) / min(times["ProcessPoolExecutor"])
    print(f"RenderPool / ProcessPoolExecutor time: {ratio:.2f}x (bound <= 1.10x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    asyncio.run(main(parser.parse_args().rounds))
