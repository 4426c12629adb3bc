"""Watches: checks per second against the same fetches as a batch job, and CPU per check.

    .venv/bin/python bench/watch.py [--watches 1000] [--rounds 4] [--concurrency 32]
                                    [--latency-ms 10]

In this process: one sift node assembled as ``sift serve`` builds it (``sift.assembly``:
SQLite store, fetcher, render pool of one worker per core, service), its watch ``Scheduler``
and its batch ``Runner``, on one fake clock (the schedule is driven, the work is real). The
upstream is a separate process on 127.0.0.1 serving ``--watches`` pages for the watches
(``/w/<i>``) and as many for the batch (``/b/<i>``), each answered after ``--latency-ms``;
in round r the pages with ``i % 10 == r % 10`` change (10 % per round), the same pages on
both sides. Only loopback traffic.

Per round: the watches are all due (the clock moves one interval) and ``run_due()`` runs
every check; then the same URLs are fetched as one batch job (``max_age_s`` 0, as a check
fetches) run to the end. Both sides get the same concurrency and per-host limit. Figures:
checks/s vs targets/s (bound: >= 0.9x), and sift's CPU per check (this process + render
workers, from /proc) in the changing rounds and in one last round where nothing changes
(CPU per unchanged check). Round 0 (every page new) is a warm-up and not counted.

Data: generated in the run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from aiohttp import web

from sift.assembly import assemble
from sift.assembly.watching import make_watches
from sift.config import BatchSettings, ClassesSettings, Settings, WatchSettings
from sift.principal import Principal

BENCH = Principal("bench", "fleet")
T0 = 1_000_000.0
EVERY_S = 60.0


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _upstream(port: int, latency_s: float) -> None:
    """The site: /w/<i> and /b/<i>; /round/<r> sets the round (what has changed)."""
    state = {"round": 0}

    async def page(request: web.Request) -> web.StreamResponse:
        i = int(request.match_info["i"])
        r = state["round"]
        version = max((k for k in range(r + 1) if k % 10 == i % 10), default=0)
        await asyncio.sleep(latency_s)
        body = (
            f"<html><head><title>{request.path}</title></head><body><article>"
            f"<h1>{request.path}</h1><p>Price list, version {version}: "
            f"{'item ' * 40}</p><p>Updated in round {version}.</p></article></body></html>"
        )
        return web.Response(text=body, content_type="text/html")

    async def set_round(request: web.Request) -> web.StreamResponse:
        state["round"] = int(request.match_info["r"])
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/w/{i}", page)
    app.router.add_get("/b/{i}", page)
    app.router.add_get("/round/{r}", set_round)
    web.run_app(app, host="127.0.0.1", port=port, print=None, handle_signals=True)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _settings(tmp: Path, n: int, concurrency: int) -> Settings:
    fleet = dataclasses.replace(
        ClassesSettings().fleet, allow_private=True, max_watches=n, min_interval_s=1.0
    )
    return Settings(
        data_dir=str(tmp),
        access_log=False,
        classes=ClassesSettings(fleet=fleet),
        batch=BatchSettings(concurrency=concurrency, per_host=concurrency),
        watch=WatchSettings(
            concurrency=concurrency, claim_batch=concurrency, jitter_s=0.0, events_kept=5
        ),
    )


async def run(args: argparse.Namespace) -> None:
    port = _free_port()
    site = multiprocessing.get_context("fork").Process(
        target=_upstream, args=(port, args.latency_ms / 1000), daemon=True
    )
    site.start()
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as ctl:
        for _ in range(100):
            try:
                await ctl.get(f"{base}/round/0")
                break
            except httpx.TransportError:
                await asyncio.sleep(0.05)
        clock = FakeClock()
        with tempfile.TemporaryDirectory() as tmp:
            settings = _settings(Path(tmp), args.watches, args.concurrency)
            async with assemble(
                settings,
                with_browser=False,
                principals={BENCH.name: BENCH},
                clock=clock,
                sleep=clock.sleep,
            ) as parts:
                assert parts.store is not None and parts.runner and parts.jobs
                jobs, runner = parts.jobs, parts.runner
                watches = make_watches(
                    settings,
                    parts.store,
                    parts.service,
                    clock=clock,
                    sleep=clock.sleep,
                    scheduler=True,
                )
                sched = watches.scheduler
                assert sched is not None
                for i in range(args.watches):
                    await watches.create(BENCH, {"url": f"{base}/w/{i}", "every": EVERY_S}, T0)
                pids = [os.getpid(), *parts.render_pool.pids()]

                def cpu() -> float:
                    return sum(cpu_s(p) for p in pids)

                rows = []
                for r in range(args.rounds + 1):
                    last = r == args.rounds  # nothing changes: the page stays at round r - 1
                    await ctl.get(f"{base}/round/{r - 1 if last else r}")
                    clock.now = T0 + EVERY_S * r
                    body: dict[str, object] = {
                        "targets": [f"{base}/b/{i}" for i in range(args.watches)],
                        "options": {"max_age_s": 0},
                    }

                    async def as_watches() -> tuple[float, float]:
                        c0, t0 = cpu(), time.perf_counter()
                        checks = await sched.run_due()
                        assert checks == args.watches, checks
                        return time.perf_counter() - t0, cpu() - c0

                    async def as_batch(
                        key: str = f"bench-{r}", body: dict[str, object] = body
                    ) -> tuple[float, float]:
                        c0, t0 = cpu(), time.perf_counter()
                        await jobs.submit(BENCH, key, body, int(clock()))
                        await runner.run_until_idle()
                        return time.perf_counter() - t0, cpu() - c0

                    # Alternate which side goes first: neither always finds the other's
                    # warm-up (robots.txt rules, connections) done.
                    if r % 2:
                        (b_s, b_cpu), (w_s, w_cpu) = await as_batch(), await as_watches()
                    else:
                        (w_s, w_cpu), (b_s, b_cpu) = await as_watches(), await as_batch()
                    checks = args.watches
                    rows.append(
                        (
                            r,
                            last,
                            checks / w_s,
                            w_cpu / checks,
                            args.watches / b_s,
                            b_cpu / args.watches,
                        )
                    )
                    print(
                        f"round {r}{' (nothing changes)' if last else ''}: watches "
                        f"{checks / w_s:7.1f} checks/s, {1000 * w_cpu / checks:.2f} ms CPU "
                        f"per check | batch {args.watches / b_s:7.1f} targets/s, "
                        f"{1000 * b_cpu / args.watches:.2f} ms CPU per target",
                        flush=True,
                    )
    site.terminate()
    site.join()
    counted = [row for row in rows if row[0] > 0 and not row[1]]
    w = statistics.median(row[2] for row in counted)
    b = statistics.median(row[4] for row in counted)
    unchanged = rows[-1]
    print(
        f"\nmedian of rounds 1-{args.rounds - 1} (10 % changing): watches {w:.1f} checks/s vs "
        f"batch {b:.1f} targets/s = {w / b:.2f}x (bound >= 0.9x: "
        f"{'met' if w / b >= 0.9 else 'NOT met'})\n"
        f"CPU per unchanged check (last round, nothing changed): "
        f"{1000 * unchanged[3]:.2f} ms (batch target: {1000 * unchanged[5]:.2f} ms)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--watches", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--latency-ms", type=float, default=10.0)
    args = p.parse_args()
    if args.rounds < 2:
        sys.exit("--rounds: at least 2 (round 0 warms up, the last changes nothing)")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
