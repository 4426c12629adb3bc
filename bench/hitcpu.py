"""Server CPU per cache hit, in process, this checkout against another one in the same run.

    .venv/bin/python bench/hitcpu.py --baseline-src /tmp/base/src [--runs 6]

(``git archive <commit> src | tar -x -C /tmp/base`` makes the baseline.) Each run is a
fresh subprocess, alternating baseline and this checkout: it builds the real app
(``create_app`` over a real database and fetcher, lifespan started as uvicorn does), serves
one page from a loopback upstream once so it is cached, then feeds the same kept-alive
``POST /v1/fetch`` (fleet key) through the HTTP protocol ``sift serve`` uses — the stock
httptools protocol in a checkout without ``sift.api.listener`` — over an in-memory
transport, and reports the best of many short rounds of CPU (process) time per request.
This is bench/serve.py's cache hit without wrk, the kernel's loopback and the machine's
other load in the figure: on a shared 2-core machine those swing wrk's results by ±50%.

Data: one page, generated in the run; nothing to download. The baseline is a checkout's
``src`` (see above).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PAGE = (
    "<html lang='en'><head><title>Bench page</title></head><body><article><h1>Bench</h1>"
    + "".join(
        f"<p>Paragraph {i}: the quick brown fox jumps over the lazy dog, again and again.</p>"
        for i in range(40)
    )
    + "</article></body></html>"
).encode()


class _Upstream(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8080), "peername": ("127.0.0.1", 40000)}.get(
            name, default
        )

    def write(self, data: Any) -> None:
        self.data += data

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def prepare() -> tuple[ThreadingHTTPServer, Any, str]:
    """A loopback upstream, settings over a fresh data directory, a fleet key."""
    from sift.config import load_settings
    from sift.keys import add_caller

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    tmp = Path(tempfile.mkdtemp(prefix="sift-hitcpu-"))
    cfg = tmp / "sift.toml"
    cfg.write_text("[classes.fleet]\nallow_private = true\n")
    key = add_caller(cfg, "bench", "fleet")
    settings = load_settings(cfg, env={}, overrides={"data_dir": str(tmp / "data")})
    Path(settings.data_dir).mkdir(parents=True)
    return upstream, settings, key


async def measure(
    upstream: ThreadingHTTPServer, settings: Any, key: str, requests: int, rounds: int
) -> float:
    """One run (in this process): best CPU µs per cache hit."""
    import uvicorn
    from uvicorn.lifespan.on import LifespanOn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    try:  # this checkout: sift.assembly builds what sift serve runs, sift.server its app
        from sift.assembly import build_fetcher
        from sift.server.app import create_app
    except ImportError:  # a baseline from before the assembly module
        from sift.api.app import create_app  # type: ignore[import-not-found,no-redef]

        from sift.cli import build_fetcher  # type: ignore[attr-defined,no-redef]
    from sift.dcache import DB

    protocol_class: Any = HttpToolsProtocol
    try:  # this checkout: the protocol sift serve uses
        from sift.api.listener import ListenerLimits, guarded_protocol

        protocol_class = guarded_protocol(ListenerLimits(1000, 10.0, 64 << 10))
    except ImportError:  # a baseline from before the listener bounds
        pass

    app = create_app(
        settings,
        DB.open(settings.db_path, max_bytes=settings.cache.max_bytes),
        build_fetcher(settings),
    )
    config = uvicorn.Config(app, http=protocol_class, access_log=False, log_level="error")
    config.load()
    lifespan = LifespanOn(config)
    await lifespan.startup()
    state = ServerState()
    protocol = protocol_class(config=config, server_state=state, app_state=lifespan.state)
    transport = Transport()
    protocol.connection_made(transport)
    body = json.dumps(
        {"url": f"http://127.0.0.1:{upstream.server_address[1]}/article", "robots": False}
    ).encode()
    request = (
        b"POST /v1/fetch HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\n"
        b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (key.encode(), len(body), body)
    )

    async def serve(n: int) -> None:
        for _ in range(n):
            protocol.data_received(request)
            await asyncio.gather(*state.tasks)

    await serve(1)  # the miss: fetched, rendered, cached
    await serve(200)  # warm
    transport.data.clear()
    await serve(1)
    assert b'"cache":"hit"' in transport.data, transport.data[:500]
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        await serve(requests)
        best = min(best, (time.process_time() - started) / requests * 1e6)
        transport.data.clear()
    protocol.connection_lost(None)
    await lifespan.shutdown()
    upstream.shutdown()
    shutil.rmtree(Path(settings.data_dir).parent, ignore_errors=True)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline-src", metavar="DIR", required=True)
    parser.add_argument("--runs", type=int, default=6, help="subprocess runs per checkout")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import uvloop

        upstream, settings, key = prepare()
        print(uvloop.run(measure(upstream, settings, key, args.requests, args.rounds)))
        return
    child = [
        sys.executable,
        __file__,
        "--child",
        "--baseline-src",
        args.baseline_src,
        f"--requests={args.requests}",
        f"--rounds={args.rounds}",
    ]
    results: dict[str, list[float]] = {"base": [], "sift": []}
    for run in range(args.runs):
        for name in ("base", "sift") if run % 2 == 0 else ("sift", "base"):
            env = {**os.environ, "PYTHONWARNINGS": "ignore"}
            if name == "base":
                env["PYTHONPATH"] = args.baseline_src
            out = subprocess.run(
                child, env=env, capture_output=True, text=True, check=True, timeout=600
            )
            results[name].append(float(out.stdout.strip().splitlines()[-1]))
    print(
        f"{args.runs} runs per checkout, each the best of {args.rounds} rounds of {args.requests}"
    )
    for name, values in results.items():
        print(f"{name}: " + ", ".join(f"{v:.1f}" for v in values) + " CPU µs per cache hit")
    base, sift = statistics.median(results["base"]), statistics.median(results["sift"])
    print(
        f"median: base {base:.1f} µs, sift {sift:.1f} µs, sift/base {sift / base:.3f}x CPU "
        f"per hit (target <= 1.10x)"
    )


if __name__ == "__main__":
    main()
