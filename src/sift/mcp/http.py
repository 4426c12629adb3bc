"""``/mcp`` on ``sift serve``: the SDK's streamable-HTTP transport behind sift's bearer keys.

Every HTTP request is authenticated exactly as ``/v1/fetch`` is (``api.auth.authenticate``:
the same keys, the same classes, the anonymous restricted caller when no keys are
configured); a refused one gets sift's error envelope with status 403 (``key_refusal``: a
401 would start an OAuth sign-in in MCP clients) and never reaches the MCP layer. The
caller is left in the ASGI scope, where the tool handler finds it through the request the
SDK attaches to each message.

The transport is stateless with JSON responses: each POST is served on its own, so no MCP
session state is kept between requests (nothing to hijack or exhaust), and tools, which
answer with one result, need no event stream. ``GET`` (the server-initiated event stream)
and ``DELETE`` (ending a session) are therefore answered ``405`` with ``Allow: POST``, as
the transport spec allows: in stateless mode the SDK would open a GET stream that nothing
ever writes to and hold it, and a connection, until the client hangs up. The SDK's client
opens neither without a session id, which a stateless server never issues.

``Origin`` is checked in front of this endpoint by ``api.hostguard`` (the spec requires it;
the SDK's own ``TransportSecuritySettings`` is off by default and answers in plain text).

A message's body is bounded by the caller's class, as ``POST /v1/batch`` bounds a job
(``body_limit``): a restricted key may not make sift buffer the 16 MiB a fleet job may
take. Past it the answer is ``413 request_too_large`` in the usual envelope, before the
SDK sees the request. The SDK's own limit stays at the largest class's, as a backstop.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from sift.api.auth import KeyRing, authenticate
from sift.api.errors import error_response
from sift.api.observe import OBSERVE_KEY
from sift.config import CallerClass, Settings
from sift.errors import MethodNotAllowed, RequestTooLarge, SiftError, Unauthorized
from sift.mcp.core import Core
from sift.principal import Principal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PRINCIPAL_KEY: Final = "sift.principal"
MCP_PATH: Final = "/mcp"
# A missing or unknown key on /mcp (see key_refusal: a 401 starts OAuth in MCP clients).
KEY_REFUSED_STATUS: Final = 403


def principal_from_request(ctx: ServerRequestContext[Any, Any]) -> Principal:
    """The caller ``McpHttp`` authenticated for the HTTP request carrying this message."""
    scope = getattr(ctx.request, "scope", None)
    principal = scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None
    if not isinstance(principal, Principal):
        raise Unauthorized("this MCP message did not arrive on an authenticated request")
    return principal


def body_limit(settings: Settings, caller_class: CallerClass) -> int:
    """The largest ``/mcp`` body a caller of ``caller_class`` may send: a ``batch_submit`` of
    as many targets as its class may submit (the ``POST /v1/batch`` limit), and never less
    than any other request body (``max_request_bytes``)."""
    max_targets = settings.classes.get(caller_class).max_targets
    return max(settings.max_request_bytes, settings.batch.request_max_bytes(max_targets))


async def bounded_body(scope: Scope, receive: Receive, limit: int) -> Receive:
    """Read the request body, refusing more than ``limit`` bytes (by its ``Content-Length``
    before reading any); a ``receive`` that hands it on in one message."""
    length = Headers(scope=scope).get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise RequestTooLarge(
            f"an MCP message of {length} bytes exceeds this caller's limit of {limit} bytes"
        )
    chunks: list[bytes] = []
    total = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: the SDK sees it too
            first: Message = message
            break
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise RequestTooLarge(f"an MCP message exceeds this caller's limit of {limit} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    else:
        first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


class McpHttp:
    """The ASGI endpoint for ``/mcp``; ``run()`` must be entered in the app's lifespan.

    The MCP SDK (about a second of imports) is loaded on the first request to ``/mcp``, on
    a thread, not when ``sift serve`` starts: most servers never see an MCP client. Its
    transport then runs until ``run()`` exits, which stops it (open requests cancelled)."""

    def __init__(self, settings: Settings, core: Callable[[], Core], keys: KeyRing) -> None:
        self._keys = keys
        self._settings = settings
        self._core = core
        self._manager: StreamableHTTPSessionManager | None = None
        self._starting: asyncio.Lock | None = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """While this runs, ``/mcp`` answers; on exit its transport (if started) stops."""
        self._starting, self._stop = asyncio.Lock(), asyncio.Event()
        try:
            yield
        finally:
            self._stop.set()
            self._stop = None
            if self._holder is not None:
                await self._holder
            self._manager = self._holder = None

    async def _started(self) -> StreamableHTTPSessionManager:
        """The SDK's transport, imported, built and started by the first call."""
        if self._starting is None or self._stop is None:
            raise RuntimeError("/mcp is not running: enter McpHttp.run() in the lifespan")
        async with self._starting:
            if self._manager is None:
                await asyncio.to_thread(_import_sdk)
                manager = _build_manager(self._settings, self._core)
                started = asyncio.Event()
                holder = asyncio.create_task(_hold(manager, started, self._stop))
                waiting = asyncio.create_task(started.wait())
                await asyncio.wait({holder, waiting}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if holder.done():
                    holder.result()  # it failed to start: raise why
                self._manager, self._holder = manager, holder
            return self._manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            refusal = MethodNotAllowed(
                f"{scope['method']} {MCP_PATH}: sift's MCP endpoint is stateless and takes POST "
                "only",
                hint="POST JSON-RPC messages to /mcp; there is no event stream (GET) and no "
                "session to end (DELETE).",
            )
            refusal.headers["Allow"] = "POST"
            await error_response(refusal)(scope, receive, send)
            return
        try:
            principal = authenticate(self._keys, Headers(scope=scope).get("authorization"))
        except SiftError as exc:
            await key_refusal(exc)(scope, receive, send)
            return
        try:
            receive = await bounded_body(
                scope, receive, body_limit(self._settings, principal.caller_class)
            )
        except RequestTooLarge as exc:
            await error_response(exc)(scope, receive, send)
            return
        scope[PRINCIPAL_KEY] = principal
        scope[OBSERVE_KEY] = {
            "route": MCP_PATH,
            "caller": principal.name,
            "class": principal.caller_class,
            "host": "-",
        }
        manager = await self._started()
        await manager.handle_request(scope, receive, send)


_SDK_MODULES: Final = ("mcp.server.streamable_http_manager", "sift.mcp.server")


def _import_sdk() -> None:
    """Import the MCP SDK and sift's server over it (run on a thread: it takes a while)."""
    for name in _SDK_MODULES:
        importlib.import_module(name)


def _build_manager(settings: Settings, core: Callable[[], Core]) -> StreamableHTTPSessionManager:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from sift.mcp.server import build_server
    from sift.mcp.tools import SiftTools

    return StreamableHTTPSessionManager(
        app=build_server(SiftTools(core), principal_from_request),
        json_response=True,
        stateless=True,
        # The largest class's limit; each caller's own is applied first (body_limit).
        max_request_body_size=max(settings.max_request_bytes, settings.batch.max_request_bytes),
    )


async def _hold(
    manager: StreamableHTTPSessionManager, started: asyncio.Event, stop: asyncio.Event
) -> None:
    """Run the transport's task group until ``stop`` (one task enters and exits it)."""
    async with manager.run():
        started.set()
        await stop.wait()


def key_refusal(exc: SiftError) -> Response:
    """The answer to a request on ``/mcp`` without a valid key: sift's error object (its
    ``unauthorized`` code and message, e.g. "unknown key") with status ``403``, not 401.

    MCP clients read a 401 as "start OAuth": the TypeScript SDK and the MCP Inspector start
    an OAuth sign-in on any 401 from the endpoint (``WWW-Authenticate`` or not) and show
    their own "Interactive OAuth requires a TTY…" or a browser sign-in instead of sift's
    message. sift offers no OAuth (its ``/.well-known/oauth-*`` paths are 404): its keys are
    configured as a header in the client, so the refusal is a plain 403 that clients report
    with its body. ``/v1`` keeps 401 (no client there starts OAuth)."""
    refusal = Unauthorized(
        exc.message,
        hint=f"{exc.hint} sift's /mcp has no OAuth sign-in: configure the key in the MCP "
        "client as the header 'Authorization: Bearer <key>'.",
    )
    response = error_response(refusal)
    response.status_code = KEY_REFUSED_STATUS
    return response


def install_mcp(
    app: FastAPI, settings: Settings, core: Callable[[], Core], keys: KeyRing
) -> McpHttp:
    """Route ``/mcp`` to a new ``McpHttp`` over ``core`` (resolved per call, so it may be
    built later, in the lifespan). Enter the returned object's ``run()`` in the lifespan."""
    endpoint = McpHttp(settings, core, keys)
    # In stateless mode the SDK logs "Terminating session" at INFO after every request;
    # the access log already has one line per request.
    logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)
    # A class instance as endpoint: Starlette hands it the raw ASGI call.
    app.router.routes.append(
        Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
    return endpoint
