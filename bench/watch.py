"""Watches: checks per second against the same fetches as a batch job, and CPU per check.

    .venv/bin/python bench/watch.py [--watches 1000] [--rounds 4] [--concurrency 32]
                                    [--latency-ms 10] [--groups 10]

In this process: one sift node assembled as ``sift serve`` builds it (``sift.assembly``:
SQLite store, fetcher, render pool of one worker per core, service), its watch ``Scheduler``
and its batch ``Runner``, on one fake clock (the schedule is driven, the work is real). The
upstream is a separate process on 127.0.0.1 serving ``--watches`` pages for the watches
(``/w/<i>``) and as many for the batch (``/b/<i>``), each answered after ``--latency-ms``;
in round r the pages with ``i % 10 == r % 10`` change (10 % per round), the same pages on
both sides. Only loopback traffic.

Per round (one interval of the fake clock), in ``--groups`` sub-rounds: one group of the
watches is due and ``run_due()`` runs its checks, and the same number of URLs is fetched as
one batch job (``max_age_s`` 0, as a check fetches) run to the end; which side goes first
alternates. Short sub-rounds side by side keep the load of the shared machine (other work on
2 cores) the same for both sides. Both sides get the same concurrency and per-host limit.
Figures: checks/s vs targets/s per round, the median of those ratios (bound: >= 0.9x), and
sift's CPU per check in the changing rounds and in one last round where nothing changes (CPU
per unchanged check): all of sift (this process + the render workers, read again at each
measure: they start in the background and may be replaced), this process alone, and of
that the database thread (``sift-dcache``), from /proc. Round 0 (every page new) is a
warm-up and not counted. Before 2026-12-04 the render workers were read once, before they
had started: the CPU figures were this process only.

Data: generated in the run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import threading
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


def cpu_s(pid: int, tid: int | None = None) -> float:
    """CPU seconds of a process (or of one of its threads, ``tid``), from /proc."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _db_thread_id() -> int:
    """The native id of the database's worker thread (``sift.dcache.aio``)."""
    return next(
        t.native_id for t in threading.enumerate() if t.name == "sift-dcache" and t.native_id
    )


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


@dataclasses.dataclass
class Side:
    """One side's totals in one round: seconds, CPU seconds (sift's in all, of which this
    process's and, of that, the database thread's), fetches."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    main_s: float = 0.0
    db_s: float = 0.0
    n: int = 0

    def add(self, wall_s: float, cpu: tuple[float, float, float], n: int) -> None:
        self.wall_s += wall_s
        self.cpu_s += cpu[0]
        self.main_s += cpu[1]
        self.db_s += cpu[2]
        self.n += n

    def ms(self) -> str:
        """CPU per fetch: all (this process, of which the DB thread)."""
        per = 1000 / self.n
        return (
            f"{self.cpu_s * per:.2f} ms CPU ({self.main_s * per:.2f} here, "
            f"DB thread {self.db_s * per:.2f})"
        )


async def _wait_up(ctl: httpx.AsyncClient, base: str) -> None:
    for _ in range(100):
        try:
            await ctl.get(f"{base}/round/0")
            return
        except httpx.TransportError:
            await asyncio.sleep(0.05)


async def run(args: argparse.Namespace) -> None:
    port = _free_port()
    site = multiprocessing.get_context("fork").Process(
        target=_upstream, args=(port, args.latency_ms / 1000), daemon=True
    )
    site.start()
    base = f"http://127.0.0.1:{port}"
    clock = FakeClock()
    n, groups = args.watches, args.groups
    size = n // groups
    step_s = EVERY_S / groups
    rows: list[tuple[int, bool, Side, Side]] = []
    pairs: list[float] = []  # per sub-round of a changing round: checks/s over targets/s
    async with httpx.AsyncClient() as ctl:
        await _wait_up(ctl, base)
        with tempfile.TemporaryDirectory() as tmp:
            settings = _settings(Path(tmp), n, args.concurrency)
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
                # Group g is due at T0 + g * step_s (+ k * EVERY_S): one group per sub-round.
                for i in range(groups * size):
                    when = T0 + (i // size) * step_s
                    await watches.create(BENCH, {"url": f"{base}/w/{i}", "every": EVERY_S}, when)
                me, db_tid = os.getpid(), _db_thread_id()
                CpuAt = tuple[dict[int, float], float]

                def cpu() -> CpuAt:
                    # The render workers are read again each time: they start in the
                    # background and may be replaced; a worker counts while alive at both ends.
                    procs = {p: cpu_s(p) for p in [me, *parts.render_pool.pids()]}
                    return procs, cpu_s(me, db_tid)

                def since(c0: CpuAt) -> tuple[float, float, float]:
                    (p0, db0), (p1, db1) = c0, cpu()
                    total = sum(p1[p] - p0[p] for p in p1.keys() & p0.keys())
                    return total, p1[me] - p0[me], db1 - db0

                async def as_watches(side: Side) -> None:
                    c0, t0 = cpu(), time.perf_counter()
                    checks = await sched.run_due()
                    side.add(time.perf_counter() - t0, since(c0), checks)
                    assert checks == size, checks

                async def as_batch(side: Side, key: str, g: int) -> None:
                    body = {
                        "targets": [f"{base}/b/{i}" for i in range(g * size, (g + 1) * size)],
                        "options": {"max_age_s": 0},
                    }
                    c0, t0 = cpu(), time.perf_counter()
                    await jobs.submit(BENCH, key, body, int(clock()))
                    await runner.run_until_idle()
                    side.add(time.perf_counter() - t0, since(c0), size)

                for r in range(args.rounds + 1):
                    last = r == args.rounds  # nothing changes: the pages stay at round r - 1
                    await ctl.get(f"{base}/round/{r - 1 if last else r}")
                    w, b = Side(), Side()
                    for g in range(groups):
                        clock.now = T0 + EVERY_S * r + g * step_s
                        gc.collect()
                        # Alternate which side goes first, group by group: both see the same
                        # load on the shared machine, neither always finds the other's
                        # leftovers (queued writes, garbage).
                        w_s, b_s = w.wall_s, b.wall_s
                        if (r * groups + g) % 2:
                            await as_batch(b, f"bench-{r}-{g}", g)
                            await as_watches(w)
                        else:
                            await as_watches(w)
                            await as_batch(b, f"bench-{r}-{g}", g)
                        if r > 0 and not last:
                            pairs.append((b.wall_s - b_s) / (w.wall_s - w_s))
                    rows.append((r, last, w, b))
                    print(
                        f"round {r}{' (nothing changes)' if last else ''}: watches "
                        f"{w.n / w.wall_s:7.1f} checks/s, {w.ms()} per check | batch "
                        f"{b.n / b.wall_s:7.1f} targets/s, {b.ms()} per target | "
                        f"{(w.n / w.wall_s) / (b.n / b.wall_s):.2f}x",
                        flush=True,
                    )
    site.terminate()
    site.join()
    _summary(rows, args.rounds, pairs)


def _summary(rows: list[tuple[int, bool, Side, Side]], rounds: int, pairs: list[float]) -> None:
    counted = [(w, b) for r, last, w, b in rows if r > 0 and not last]
    ratios = [(w.n / w.wall_s) / (b.n / b.wall_s) for w, b in counted]
    ratio = statistics.median(ratios)
    _, _, uw, ub = rows[-1]
    print(
        f"\nrounds 1-{rounds - 1} (10 % changing): median of the per-round ratios "
        f"{ratio:.2f}x (bound >= 0.9x: {'met' if ratio >= 0.9 else 'NOT met'}); per round: "
        + ", ".join(f"{x:.2f}" for x in ratios)
        + f"\nsub-rounds side by side ({len(pairs)}, changing rounds): median "
        f"{statistics.median(pairs):.2f}x, quartiles "
        + " / ".join(f"{q:.2f}" for q in statistics.quantiles(pairs, n=4))
        + "\nCPU per check, 10 % changing (median): "
        f"{1000 * statistics.median(w.cpu_s / w.n for w, _ in counted):.2f} ms (batch target: "
        f"{1000 * statistics.median(b.cpu_s / b.n for _, b in counted):.2f} ms)"
        f"\nCPU per unchanged check (last round, nothing changed): "
        f"{1000 * uw.cpu_s / uw.n:.2f} ms (batch target: {1000 * ub.cpu_s / ub.n:.2f} ms)"
        f"\nCPU per changed check, estimated (the changing rounds' median less 9/10 of an "
        f"unchanged one, x10): {_per_changed([w for w, _ in counted], uw):.2f} ms (batch "
        f"target: {_per_changed([b for _, b in counted], ub):.2f} ms)"
    )


def _per_changed(sides: list[Side], unchanged: Side) -> float:
    changing = statistics.median(s.cpu_s / s.n for s in sides)
    return 1000 * (changing - 0.9 * unchanged.cpu_s / unchanged.n) / 0.1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--watches", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--latency-ms", type=float, default=10.0)
    p.add_argument("--groups", type=int, default=10, help="sub-rounds per round")
    args = p.parse_args()
    if args.rounds < 2:
        sys.exit("--rounds: at least 2 (round 0 warms up, the last changes nothing)")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
