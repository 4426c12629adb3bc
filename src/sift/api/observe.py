"""Per-request metrics and one structured log line, as a plain ASGI middleware.

Route handlers leave what they know (caller, URL host, cache state) in
``request.state.observe``; this middleware adds status, bytes and duration, counts the
request in Prometheus and writes one JSON log line.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sift.metrics import Metrics

access_log = logging.getLogger("sift.access")


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        nbytes = 0

        async def send_wrapper(message: Message) -> None:
            nonlocal status, nbytes
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                nbytes += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            info: dict[str, Any] = scope.get("state", {}).get("observe", {})
            route = info.get("route") or _route_of(scope)
            caller_class = info.get("class", "-")
            self.metrics.requests.labels(route, str(status), caller_class).inc()
            if access_log.isEnabledFor(logging.INFO):
                line = {
                    "method": scope["method"],
                    "route": route,
                    "status": status,
                    "caller": info.get("caller", "-"),
                    "class": caller_class,
                    "host": info.get("host", "-"),
                    "bytes": nbytes,
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                    "cache": info.get("cache", "-"),
                }
                access_log.info(json.dumps(line, separators=(",", ":")))


def _route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"
