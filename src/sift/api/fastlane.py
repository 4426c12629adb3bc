"""The fast lane: hot routes served without the framework's per-request machinery.

On a cache hit, ``/v1/fetch`` is parse → authenticate → read the in-process cache → write
bytes. FastAPI's telemetry check, middleware stack, router, dependency solver and exception
middlewares would cost more than all of that, so ``SiftApp`` hands matching requests
straight to the *same* endpoint functions that are registered (and documented) as FastAPI
routes, observed by the same middleware, with errors rendered as the same envelope.
Everything else goes through FastAPI untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from sift.api.errors import error_response
from sift.errors import SiftError

log = logging.getLogger("sift.api")
Endpoint = Callable[[Request], Awaitable[Response]]


class HotRoutes:
    """ASGI app serving ``routes[(method, path)]``; only called for matching requests."""

    def __init__(self, routes: Mapping[tuple[str, str], Endpoint]) -> None:
        self.routes = dict(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.routes[(scope["method"], scope["path"])]
        try:
            response = await endpoint(Request(scope, receive))
        except SiftError as exc:
            response = error_response(exc)
        except Exception as exc:  # the same last resort as api/errors.py
            log.error("unhandled error on %s %s", scope["method"], scope["path"], exc_info=exc)
            response = error_response(SiftError("sift failed while handling this request"))
        await response(scope, receive, send)


class SiftApp(FastAPI):
    """FastAPI, with a fast lane for the routes registered through ``set_hot_routes``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hot_keys: frozenset[tuple[str, str]] = frozenset()
        self._hot_app: ASGIApp | None = None

    def set_hot_routes(
        self, routes: Mapping[tuple[str, str], Endpoint], wrap: Callable[[ASGIApp], ASGIApp]
    ) -> None:
        """Serve ``routes`` directly, inside ``wrap`` (the observing middleware)."""
        self._hot_keys = frozenset(routes)
        self._hot_app = wrap(HotRoutes(routes))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self._hot_app is not None
            and scope["type"] == "http"
            and (scope["method"], scope["path"]) in self._hot_keys
        ):
            scope["app"] = self
            await self._hot_app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)
