"""``POST /v1/fetch`` and ``GET /v1/fetch``: the hot path.

The handlers take the raw ``Request`` and parse it by hand (``json.loads`` +
``parse_options``) instead of through a pydantic body model: on a cache hit the request is
parse → authenticate → read the in-process cache → write bytes, and model validation would
cost more than everything else together. The models in ``api/schema.py`` only document the
shapes in the OpenAPI schema.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import Response

from sift.api.auth import authenticate
from sift.api.disconnect import cancel_on_disconnect
from sift.api.observe import OBSERVE_KEY
from sift.api.schema import (
    ERROR_RESPONSES,
    FetchEnvelope,
    fetch_query_parameters,
    fetch_request_body,
    keyed,
)
from sift.errors import BadRequest, RequestTooLarge
from sift.jsonio import loads
from sift.options import FetchOptions, parse_options
from sift.principal import Principal
from sift.service import Service


class JSONBytes(Response):
    """A response of ready JSON bytes, with no per-request header machinery."""

    media_type = "application/json"

    def __init__(self, body: bytes, status_code: int = 200) -> None:
        self.status_code = status_code
        self.body = body
        self.background = None
        self.raw_headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]


async def read_json(request: Request, max_bytes: int) -> Any:
    """The request body as JSON, refusing more than ``max_bytes`` before reading it all."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise RequestTooLarge(f"request body of {length} bytes exceeds {max_bytes} bytes")
    chunks: list[bytes] = []
    total = 0
    more = True
    while more:  # straight from ASGI receive: Request.stream() costs more than the parse
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise BadRequest("the client went away before sending the whole body")
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > max_bytes:
            raise RequestTooLarge(f"request body exceeds {max_bytes} bytes")
        chunks.append(chunk)
        more = message.get("more_body", False)
    try:
        return loads(chunks[0] if len(chunks) == 1 else b"".join(chunks))
    except ValueError as exc:
        raise BadRequest("request body is not valid JSON", hint="Send a JSON object.") from exc


def _observe(request: Request, route: str, principal: Principal, url: str | None) -> None:
    host = "-"
    if url:
        try:
            host = urlsplit(url).hostname or "-"
        except ValueError:
            host = "-"
    request.scope[OBSERVE_KEY] = {
        "route": route,
        "caller": principal.name,
        "class": principal.caller_class,
        "host": host,
    }


async def _run(request: Request, principal: Principal, opts: FetchOptions) -> Response:
    service: Service = request.app.state.service
    with service.inflight.hold(principal):  # per-caller fairness; see sift/service/inflight.py
        body = service.cached_json(principal, opts)  # a hit: answered without waiting
        if body is not None:
            cache = "hit"
        else:
            # A client that hangs up stops its fetch: its in-flight slot, its place in the
            # render queue or its render worker are freed now, not when the work would end.
            async with cancel_on_disconnect(request.receive):
                body, cache = await service.fetch_json(principal, opts)
    request.scope[OBSERVE_KEY]["cache"] = cache
    return JSONBytes(body)


# A request line over the HTTP server's limit (64 KiB) never reaches sift: the server answers
# 400 in plain text. Long option values in a query string can get there.
MALFORMED_REQUEST: dict[str, Any] = {
    "description": "Malformed HTTP request, refused by the HTTP server before sift sees it "
    "(e.g. a request line over 64 KiB: send long options with POST instead)",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}


def install_fetch_routes(app: FastAPI) -> dict[tuple[str, str], Any]:
    """Register the fetch routes; returns them for the fast lane (see api/fastlane.py)."""

    async def post_fetch(request: Request) -> Response:
        settings = request.app.state.settings
        principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
        data = await read_json(request, settings.max_request_bytes)
        if not isinstance(data, dict):
            raise BadRequest("request body must be a JSON object", hint='Send {"url": …}.')
        opts = parse_options(data)
        _observe(request, "/v1/fetch", principal, opts.url)
        return await _run(request, principal, opts)

    async def get_fetch(request: Request) -> Response:
        principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
        params: dict[str, Any] = {}
        for key in request.query_params:
            values = request.query_params.getlist(key)
            params[key] = values if key == "exclude" else values[-1]
        _observe(request, "/v1/fetch", principal, params.get("url"))
        opts = parse_options(params, from_query=True)
        return await _run(request, principal, opts)

    common: dict[str, Any] = {
        "tags": ["fetch"],
        "response_model": None,
        "responses": {200: {"model": FetchEnvelope}, **ERROR_RESPONSES},
    }
    app.add_api_route(
        "/v1/fetch",
        post_fetch,
        methods=["POST"],
        summary="Fetch one URL and return its content, capped",
        openapi_extra={**keyed(), "requestBody": fetch_request_body()},
        **common,
    )
    app.add_api_route(
        "/v1/fetch",
        get_fetch,
        methods=["GET"],
        summary="Fetch one URL (options as query parameters)",
        openapi_extra={**keyed(), "parameters": fetch_query_parameters()},
        **{**common, "responses": {**common["responses"], 400: MALFORMED_REQUEST}},
    )
    return {("POST", "/v1/fetch"): post_fetch, ("GET", "/v1/fetch"): get_fetch}
