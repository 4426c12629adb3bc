"""Several real `sift serve` nodes on one PostgreSQL: node death, stalls, politeness and
idempotency across the cluster, and the store going away.

Each node is a child process of this test (tests/servehelpers.py) with its own data_dir and
the same ``[store] url``; upstreams are real HTTP servers on 127.0.0.1, one port per "host".
The test reads the shared store directly (psycopg) to see who holds which claim.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from aiohttp import web

from pgserver import start_server
from servehelpers import SIFT, Served, ServeSpec, free_port, sift_serves, write_config
from upstream import Upstream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@dataclass
class HostLog:
    """What one upstream host saw: page requests in order, concurrency, request starts."""

    latency_s: float
    hits: dict[str, int] = field(default_factory=dict)
    now: int = 0
    peak: int = 0
    starts: list[float] = field(default_factory=list)
    hold: asyncio.Event | None = None  # when set, requests wait for it

    async def handler(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] = self.hits.get(request.path, 0) + 1
        self.starts.append(time.monotonic())
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            if self.hold is not None:
                await self.hold.wait()
            await asyncio.sleep(self.latency_s)
        finally:
            self.now -= 1
        return web.Response(text=f"page {request.path}", content_type="text/plain")


async def host(log: HostLog, robots: str = "") -> Upstream:
    up = await Upstream().start()
    up.route("/p", log.handler, prefix=True)
    if robots:
        up.page("/robots.txt", robots, content_type="text/plain")
    return up


@contextmanager
def nodes(
    tmp_path: Path, url: str, n: int, *, batch: str = "", store: str = ""
) -> Iterator[list[Served]]:
    """``n`` nodes sharing ``url``; node i is labelled ``node{i}`` in claims."""
    cfg, fleet, restricted = write_config(tmp_path, f"[batch]\nshutdown_grace_s = 0.5\n{batch}")
    base = cfg.read_text()
    specs = []
    for i in range(n):
        node_cfg = tmp_path / f"node{i}.toml"
        node_cfg.write_text(f'{base}\n[store]\nurl = "{url}"\nnode_id = "node{i}"\n{store}')
        specs.append(ServeSpec((node_cfg, fleet, restricted), tmp_path / f"data{i}"))
    # Several nodes start on a busy 2-core machine: a generous deadline for all of them.
    with sift_serves(specs, start_timeout_s=90) as served:
        yield served


def client(node: Served) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=node.base_url, headers={"Authorization": f"Bearer {node.fleet_key}"}, timeout=30
    )


async def submit(node: Served, key: str, targets: list[str]) -> str:
    async with client(node) as c:
        r = await c.post("/v1/batch", json={"targets": targets}, headers={"Idempotency-Key": key})
        assert r.status_code == 202, r.text
        return str(r.json()["id"])


async def wait_status(node: Served, job_id: str, want: set[str], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    async with client(node) as c:
        while True:
            view = (await c.get(f"/v1/batch/{job_id}")).json()
            if view["status"] in want:
                return view
            assert time.monotonic() < deadline, view
            await asyncio.sleep(0.1)


async def results(node: Served, job_id: str) -> list[dict[str, Any]]:
    async with client(node) as c:
        r = await c.get(f"/v1/batch/{job_id}/results", params={"limit": 1000})
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        return items


def running_of(url: str, node_id: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT url FROM batch_target WHERE status = 'running' AND lease_owner = %s",
            (node_id,),
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql.encode()).fetchall()


async def until(pred: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def metric(node: Served, name: str) -> float:
    text = httpx.get(
        f"{node.base_url}/metrics", headers={"Authorization": f"Bearer {node.fleet_key}"}
    ).text
    m = re.search(rf"^{name} ([0-9.e+]+)$", text, flags=re.M)
    return float(m.group(1)) if m else 0.0


def paths(log: HostLog) -> dict[str, int]:
    return {p: n for p, n in log.hits.items() if p.startswith("/p")}


async def test_kill_9_one_node_mid_job(tmp_path: Path, pg_url: str) -> None:
    logs = [HostLog(latency_s=0.3) for _ in range(3)]
    ups = [await host(log) for log in logs]
    try:
        targets = [up.url(f"/p{h}-{i}") for h, up in enumerate(ups) for i in range(8)]
        with nodes(
            tmp_path,
            pg_url,
            3,
            batch="concurrency = 2\nper_host = 2\n",  # 3 nodes x 2 = the 6 host slots
            store="lease_s = 3.0\nrenew_s = 1.0\n",
        ) as (a, b, victim):
            job_id = await submit(a, "kill-1", targets)
            await until(lambda: len(running_of(pg_url, "node2")) >= 1)
            os.kill(victim.proc.pid, signal.SIGSTOP)  # freeze its claims while we look
            await asyncio.sleep(0.2)  # let requests already sent reach the upstreams
            held = running_of(pg_url, "node2")
            # Of its claims, those whose request already reached a host: fetched twice.
            sent = {urlsplit(u).path for u in held} & {p for lg in logs for p in paths(lg)}
            os.kill(victim.proc.pid, signal.SIGKILL)
            view = await wait_status(b, job_id, {"done", "partial", "failed"})
            assert (view["status"], view["targets_done"], view["counts"]["done"]) == (
                "done",
                24,
                24,
            )
            items = await results(a, job_id)
            assert [it["idx"] for it in items] == list(range(24))
            assert {it["status"] for it in items} == {"done"}
            stalls = query(pg_url, "SELECT url, stalls FROM batch_target WHERE stalls > 0")
            assert sorted(str(u) for u, _ in stalls) == held  # only the killed node's claims
        fetched = {p: n for lg in logs for p, n in paths(lg).items()}
        assert len(fetched) == 24
        assert {p for p, n in fetched.items() if n == 2} == sent
        assert set(fetched.values()) <= {1, 2}
        # Never above per_host, cluster-wide. Reaching it is not promised here: the killed
        # node's gate slots stay held until its lease expires, so a host may run at 1 meanwhile
        # (the held test below pins a host at exactly per_host).
        assert all(1 <= log.peak <= 2 for log in logs), [log.peak for log in logs]
    finally:
        for up in ups:
            await up.stop()


async def test_sigstop_past_the_lease_then_sigcont_its_writes_are_fenced(
    tmp_path: Path, pg_url: str
) -> None:
    log = HostLog(latency_s=0.3)
    up = await host(log)
    try:
        targets = [up.url(f"/p{i}") for i in range(12)]
        with nodes(
            tmp_path,
            pg_url,
            2,
            batch="concurrency = 2\nper_host = 4\n",
            store="lease_s = 2.0\nrenew_s = 0.5\n",
        ) as (a, stalled):
            job_id = await submit(a, "stop-1", targets)
            await until(lambda: len(running_of(pg_url, "node1")) >= 1)
            os.kill(stalled.proc.pid, signal.SIGSTOP)
            held = running_of(pg_url, "node1")
            try:
                view = await wait_status(a, job_id, {"done", "partial", "failed"})
            finally:
                os.kill(stalled.proc.pid, signal.SIGCONT)
            assert (view["status"], view["targets_done"]) == ("done", 12)
            # Back from the stall, every claim it held is gone: each fetch is either stopped
            # at the next renewal or its late write is fenced out; nothing is written twice.
            fenced = "sift_batch_fenced_writes_total"
            lost = "sift_batch_leases_lost_total"
            await until(lambda: metric(stalled, fenced) + metric(stalled, lost) >= len(held))
            assert metric(stalled, fenced) + metric(stalled, lost) == len(held)
            items = await results(stalled, job_id)
            assert [(it["idx"], it["status"]) for it in items] == [(i, "done") for i in range(12)]
            stalls = query(pg_url, "SELECT url FROM batch_target WHERE stalls = 1 ORDER BY url")
            assert sorted(str(r[0]) for r in stalls) == held
            assert query(pg_url, "SELECT inflight FROM host_gate") == [(0,)]
    finally:
        await up.stop()


async def test_one_key_on_three_nodes_one_job_and_cancel_reaches_the_fetching_node(
    tmp_path: Path, pg_url: str
) -> None:
    log = HostLog(latency_s=0.0, hold=asyncio.Event())
    up = await host(log)
    try:
        targets = [up.url(f"/p{i}") for i in range(6)]
        with nodes(
            tmp_path,
            pg_url,
            3,
            batch="concurrency = 2\nper_host = 2\n",
            store="lease_s = 10.0\nrenew_s = 0.5\n",
        ) as served:

            async def post(node: Served) -> tuple[int, str]:
                async with client(node) as c:
                    r = await c.post(
                        "/v1/batch", json={"targets": targets}, headers={"Idempotency-Key": "one"}
                    )
                    return r.status_code, str(r.json()["id"])

            answers = await asyncio.gather(*(post(served[i % 3]) for i in range(12)))
            assert sorted(code for code, _ in answers) == [200] * 11 + [202]
            assert len({job_id for _, job_id in answers}) == 1
            job_id = answers[0][1]
            assert query(pg_url, "SELECT count(*) FROM batch_job") == [(1,)]

            # Two targets hang at the host (per_host = 2); cancel on whichever node holds none.
            await until(lambda: query(pg_url, RUNNING_COUNT) == [(2,)] and log.now == 2)
            owners = {str(r[0]) for r in query(pg_url, OWNERS)}
            idle = next(n for i, n in enumerate(served) if f"node{i}" not in owners)
            async with client(idle) as c:
                view = (await c.delete(f"/v1/batch/{job_id}")).json()
            assert (view["status"], view["counts"]["cancelled"]) == ("cancelled", 6)
            assert log.peak == 2  # six free slots on three nodes, per_host = 2 cluster-wide
            lost = "sift_batch_leases_lost_total"
            await until(lambda: sum(metric(n, lost) for n in served) >= 2)
            assert sum(metric(n, lost) for n in served) == 2
            assert [metric(n, "sift_batch_fenced_writes_total") for n in served] == [0, 0, 0]
            assert query(pg_url, "SELECT inflight FROM host_gate") == [(0,)]
    finally:
        assert log.hold is not None
        log.hold.set()
        await up.stop()


RUNNING_COUNT = "SELECT count(*) FROM batch_target WHERE status = 'running'"
OWNERS = "SELECT DISTINCT lease_owner FROM batch_target WHERE status = 'running'"


async def test_crawl_delay_spaces_requests_across_nodes(tmp_path: Path, pg_url: str) -> None:
    log = HostLog(latency_s=0.0)
    up = await host(log, robots="User-agent: *\nCrawl-delay: 1\n")
    try:
        with nodes(
            tmp_path, pg_url, 2, batch="concurrency = 4\nper_host = 4\n", store="renew_s = 1.0\n"
        ) as (a, b):
            job_id = await submit(a, "delay", [up.url(f"/p{i}") for i in range(4)])
            view = await wait_status(b, job_id, {"done", "partial", "failed"})
            assert (view["status"], view["targets_done"]) == ("done", 4)
        assert len(log.starts) == 4
        gaps = [b - a for a, b in zip(log.starts, log.starts[1:], strict=False)]
        # The gate spaces claims by exactly the delay on PostgreSQL's clock; a request may
        # leave its node a little later than its claim, so allow 0.2 s of jitter.
        assert min(gaps) >= 0.8, gaps
        owners = query(pg_url, "SELECT count(*) FROM batch_target WHERE status = 'done'")
        assert owners == [(4,)]
    finally:
        await up.stop()


def test_a_wrong_or_unreachable_store_url_exits_2_with_one_line(tmp_path: Path) -> None:
    cfg, _, _ = write_config(tmp_path)
    where = ["--data-dir", str(tmp_path / "data"), "--listen", f"127.0.0.1:{free_port()}"]
    for url, expected in (
        ("mysql://db/sift", "store.url: expected a postgresql:// URL"),
        (
            f"postgresql://postgres@/sift?host={tmp_path}/nowhere",
            "store.url: cannot use the PostgreSQL store: ",
        ),
    ):
        proc = subprocess.run(
            # Its own data directory and a free port: the refusal comes after both are
            # taken (no fixed port, nothing left in the working directory).
            [*SIFT, "serve", "--config", str(cfg), "--set", f"store.url={url}", *where],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert expected in lines[0], lines


async def test_store_going_away_answers_503_then_recovers(tmp_path: Path) -> None:
    server = start_server()  # its own server: this test stops it
    try:
        with server.admin() as conn:
            conn.execute("CREATE DATABASE sift")
        url = server.url("sift")
        log = HostLog(latency_s=0.0)
        up = await host(log)
        try:
            with nodes(tmp_path, url, 1, store="connect_timeout_s = 1.0\n") as (a,):
                job_id = await submit(a, "k", [up.url("/p0"), up.url("/p1")])
                await wait_status(a, job_id, {"done"})
                server.halt()
                async with client(a) as c:
                    r = await c.get(f"/v1/batch/{job_id}")
                    assert r.status_code == 503
                    err = r.json()["error"]
                    assert err["code"] == "store_unavailable"
                    assert err["hint"].startswith("The batch job store (PostgreSQL) cannot be")
                    assert (await c.get("/healthz")).status_code == 503
                    server.resume()
                    await until(lambda: httpx.get(f"{a.base_url}/healthz").status_code == 200)
                    view = (await c.get(f"/v1/batch/{job_id}")).json()
                    assert (view["status"], view["targets_done"]) == ("done", 2)
                items = await results(a, job_id)
                assert [(it["idx"], it["status"]) for it in items] == [(0, "done"), (1, "done")]
        finally:
            await up.stop()
    finally:
        server.stop()
