"""Cache-hit /v1/fetch throughput and latency, against a bare ASGI app in the same run.

    .venv/bin/python bench/serve.py [--duration 10] [--connections 64]

1. A local upstream serves one article page; `sift serve` (subprocess, fleet caller allowed
   to reach loopback) fetches it once, so every later request is a cache hit.
2. A bare ASGI app on the same server (uvicorn, uvloop, httptools) returns the exact same
   envelope bytes from memory for any request: the ceiling for this server stack.
3. wrk (Debian package `wrk`) drives each with the same POST, 2 threads, 64 connections,
   on loopback; requests/s and p50/p99 are parsed from its output.

Prints both and the ratio. Targets (issue 5): sift >= 0.35x the bare app's requests/s,
p99 <= 25 ms. Only loopback traffic; everything stops by itself.

``--baseline-src DIR`` also serves the same page from another checkout's ``src`` (e.g.
``git archive <commit> src | tar -x -C /tmp/base``, then ``--baseline-src /tmp/base/src``)
in the same rounds, and prints this sift's requests/s against it: a before/after
comparison measured under the same machine load.

Data: one article page, generated in the run; nothing to download. Needs ``wrk``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from sift.keys import add_caller

PAGE = (
    "<html lang='en'><head><title>Bench page</title></head><body><nav>Home | News</nav>"
    "<article><h1>Benchmark article</h1>"
    + "".join(
        f"<p>Paragraph {i}: the quick brown fox jumps over the lazy dog, again and again, "
        "so that the page has a realistic amount of text to return.</p>"
        for i in range(40)
    )
    + "</article><footer>footer</footer></body></html>"
).encode()

BARE_APP = """
import sys
BODY = open(sys.argv[1], "rb").read()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})

if __name__ == "__main__":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), loop="uvloop", http="httptools",
                access_log=False, log_level="warning")
"""

WRK_LUA = """
wrk.method = "POST"
wrk.body = '{body}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
"""


class _Upstream(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120  # a loaded machine starts slowly
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def parse_latency(text: str, label: str) -> float:
    m = re.search(rf"^\s+{label}%?\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    if not m:
        raise RuntimeError(f"no {label} latency in wrk output:\n{text}")
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_wrk(
    url: str, lua: Path, duration_s: int, connections: int, pid: int | None = None
) -> dict[str, float]:
    """wrk's req/s and latency; with ``pid``, also that server's CPU µs per request."""
    cpu_before = cpu_s(pid) if pid else 0.0
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{duration_s}s", "--latency", "-s", str(lua), url],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration_s + 60,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if non2xx:
        raise RuntimeError(f"{non2xx.group(1)} error responses:\n{out}")
    got = {"rps": rps, "p50_ms": parse_latency(out, "50"), "p99_ms": parse_latency(out, "99")}
    if pid:
        total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
        got["cpu_us"] = (cpu_s(pid) - cpu_before) / total * 1e6
    return got


def start_sift(
    tmp: Path, name: str, cfg: Path, no_access_log: bool, src: str | None
) -> tuple[subprocess.Popen[bytes], str]:
    """`sift serve` from this checkout, or from ``src`` (put first on the import path)."""
    port = free_port()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if src:
        env["PYTHONPATH"] = src
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sift.cli",
            "serve",
            "--config",
            str(cfg),
            "--listen",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(tmp / f"data-{name}"),
            "--set",
            "render_workers=1",
            "--set",
            f"access_log={'false' if no_access_log else 'true'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    return proc, f"http://127.0.0.1:{port}"


def warm(url: str, body: str, key: str) -> bytes:
    """Fetch the page twice; the second must be a cache hit. Returns its envelope."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    httpx.post(f"{url}/v1/fetch", content=body, timeout=30, headers=headers).raise_for_status()
    hit = httpx.post(f"{url}/v1/fetch", content=body, timeout=30, headers=headers)
    assert hit.json()["cache"] == "hit", hit.text
    return hit.content


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--no-access-log", action="store_true", help="serve with access_log off")
    parser.add_argument("--baseline-src", metavar="DIR", help="also run sift from this src dir")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")

    tmp = Path(tempfile.mkdtemp(prefix="sift-bench-serve-"))
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    page_url = f"http://127.0.0.1:{upstream.server_address[1]}/article"

    cfg = tmp / "sift.toml"
    cfg.write_text("[classes.fleet]\nallow_private = true\n")
    key = add_caller(cfg, "bench", "fleet")
    bare_port = free_port()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    procs: list[subprocess.Popen[bytes]] = []
    base_url: str | None = None
    try:
        sift, sift_url = start_sift(tmp, "sift", cfg, args.no_access_log, None)
        procs.append(sift)
        if args.baseline_src:
            base, base_url = start_sift(tmp, "base", cfg, args.no_access_log, args.baseline_src)
            procs.append(base)
            wait_http(f"{base_url}/healthz", base)
        wait_http(f"{sift_url}/healthz", sift)
        body = json.dumps({"url": page_url, "robots": False})
        envelope = tmp / "envelope.json"
        hit = warm(sift_url, body, key)
        envelope.write_bytes(hit)
        if base_url:
            warm(base_url, body, key)

        bare_src = tmp / "bare_app.py"
        bare_src.write_text(BARE_APP)
        bare = subprocess.Popen(
            [sys.executable, str(bare_src), str(envelope), str(bare_port)], env=env
        )
        procs.append(bare)
        bare_url = f"http://127.0.0.1:{bare_port}"
        wait_http(bare_url, bare)

        lua = tmp / "post.lua"
        lua.write_text(WRK_LUA.format(body=body, key=key))
        # Warm both servers, then alternate them round by round (the machine is shared:
        # alternating spreads its noise over both) and report medians.
        servers = [bare_url, sift_url] + ([base_url] if base_url else [])
        pids = {sift_url: sift.pid, **({base_url: base.pid} if base_url else {})}
        for u in servers:
            run_wrk(f"{u}/v1/fetch", lua, 2, args.connections)
        rounds: list[tuple[dict[str, float], dict[str, float]]] = []
        baseline: list[dict[str, float]] = []
        for r in range(args.rounds):
            order = servers if r % 2 == 0 else servers[::-1]
            got = {
                u: run_wrk(f"{u}/v1/fetch", lua, args.duration, args.connections, pids.get(u))
                for u in order
            }
            rounds.append((got[bare_url], got[sift_url]))
            if base_url:
                baseline.append(got[base_url])
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        upstream.shutdown()
        upstream.server_close()
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"envelope: {len(hit)} bytes; wrk -t2 -c{args.connections} -d{args.duration}s, "
        f"{args.rounds} alternating rounds"
    )
    print(
        f"{'round':<7}{'bare req/s':>12}{'sift req/s':>12}{'ratio':>8}{'bare p99':>10}"
        f"{'sift p50':>10}{'sift p99':>10}"
    )
    for i, (bare, sift) in enumerate(rounds, 1):
        print(
            f"{i:<7}{bare['rps']:>12.0f}{sift['rps']:>12.0f}{sift['rps'] / bare['rps']:>7.2f}x"
            f"{bare['p99_ms']:>10.2f}{sift['p50_ms']:>10.2f}{sift['p99_ms']:>10.2f}"
        )
    ratio = statistics.median(sift["rps"] / bare["rps"] for bare, sift in rounds)
    p99 = statistics.median(sift["p99_ms"] for _, sift in rounds)
    print(
        f"median ratio sift/bare: {ratio:.2f}x (target >= 0.35x); median sift p99 {p99:.1f} ms "
        "(target <= 25 ms)"
    )
    if baseline:
        print(
            f"{'round':<7}{'base req/s':>12}{'sift req/s':>12}{'sift/base':>11}{'base p99':>10}"
            f"{'base CPU µs/req':>17}{'sift CPU µs/req':>17}"
        )
        pairs = list(zip(baseline, (sift for _, sift in rounds), strict=True))
        for i, (base, sift) in enumerate(pairs, 1):
            print(
                f"{i:<7}{base['rps']:>12.0f}{sift['rps']:>12.0f}"
                f"{sift['rps'] / base['rps']:>10.3f}x{base['p99_ms']:>10.2f}"
                f"{base['cpu_us']:>17.1f}{sift['cpu_us']:>17.1f}"
            )
        vs = statistics.median(s["rps"] / b["rps"] for b, s in pairs)
        cpu = statistics.median(s["cpu_us"] / b["cpu_us"] for b, s in pairs)
        print(
            f"median ratio sift/baseline: {vs:.3f}x req/s (target >= 0.90x), "
            f"{cpu:.3f}x server CPU per request"
        )


if __name__ == "__main__":
    main()
