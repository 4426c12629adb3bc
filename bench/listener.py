"""What sift's listener bounds cost per request, in process: stock vs guarded httptools protocol.

    .venv/bin/python bench/listener.py [--requests 2000] [--rounds 51]

Drives uvicorn's ``HttpToolsProtocol`` and sift's ``GuardedHttpTools`` (api/listener.py)
with the same kept-alive request bytes over an in-memory transport and a bare ASGI app, on
uvloop, in many short alternating rounds; prints the best round's CPU µs per request
(process time, so waiting for a core on a shared machine does not count) of each and the
difference. End-to-end figures (bench/serve.py) swing with the machine's load; this
isolates the listener's own cost, to compare with a whole cache hit's server CPU.
No sockets at all.

Data: one request, built in the run; nothing to download.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import uvloop
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from sift.api.listener import ListenerLimits, guarded_protocol

_JSON = b'{"url": "http://127.0.0.1:9/article", "robots": false}'
REQUEST = (
    b"POST /v1/fetch HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\n"
    b"Authorization: Bearer 0123456789abcdef0123456789abcdef\r\n"
    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(_JSON), _JSON)
)
BODY = b"x" * 5950


async def app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": BODY})


class Transport(asyncio.Transport):
    """Just enough of a socket transport: counts what is written, never closes."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8080), "peername": ("127.0.0.1", 40000)}.get(
            name, default
        )

    def write(self, data: Any) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass


async def run(protocol_class: type[asyncio.Protocol], requests: int) -> float:
    config = Config(app=app, http=protocol_class, access_log=False, log_level="error")
    config.load()
    state = ServerState()
    protocol: Any = protocol_class(config=config, server_state=state, app_state={})  # type: ignore[call-arg]
    transport = Transport()
    protocol.connection_made(transport)
    started = time.process_time()
    for _ in range(requests):
        protocol.data_received(REQUEST)
        await asyncio.gather(*state.tasks)
    elapsed = time.process_time() - started
    assert transport.written > requests * len(BODY), "responses were not written"
    protocol.connection_lost(None)
    return elapsed / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=51)
    args = parser.parse_args()
    guarded = guarded_protocol(
        ListenerLimits(max_connections=1000, head_timeout_s=10.0, max_head_bytes=64 << 10)
    )
    classes: dict[str, type[asyncio.Protocol]] = {"stock": HttpToolsProtocol, "sift": guarded}
    best = {name: float("inf") for name in classes}
    for r in range(args.rounds):
        for name in list(classes) if r % 2 == 0 else list(classes)[::-1]:
            us = uvloop.run(run(classes[name], args.requests))
            best[name] = min(best[name], us)
    print(f"{args.requests} kept-alive requests per round, best of {args.rounds} rounds")
    print(f"stock httptools protocol: {best['stock']:.2f} µs/request")
    print(f"sift guarded protocol:    {best['sift']:.2f} µs/request")
    print(f"difference: {best['sift'] - best['stock']:+.2f} µs/request")


if __name__ == "__main__":
    main()
