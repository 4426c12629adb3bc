"""``/v1/watches``: create, list, show (with recent events), delete (docs/watches.md).

Thin handlers over ``sift.watch.watches.Watches`` (``app.state.watches``). Another caller's
watch answers 404 exactly as a missing one.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response

from sift.api.auth import authenticate
from sift.api.batch_routes import _json
from sift.api.fetch_routes import read_json
from sift.api.schema import ERROR_RESPONSES, keyed
from sift.api.watch_schema import (
    WatchCreated,
    WatchDeleted,
    WatchDetail,
    WatchList,
    create_request_body,
)
from sift.principal import Principal
from sift.watch.watches import MAX_EVENTS_LIMIT, Watches


def _caller(request: Request) -> tuple[Watches, Principal]:
    principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
    return request.app.state.watches, principal


# The handlers' names are part of the OpenAPI document (operationId).
async def create_watch(request: Request) -> Response:
    watches, principal = _caller(request)
    body = await read_json(request, request.app.state.settings.watch.max_request_bytes)
    view = await watches.create(principal, body, time.time())
    return _json(view, 201, {"Location": f"/v1/watches/{view['id']}"})


async def list_watches(request: Request) -> Response:
    watches, principal = _caller(request)
    return _json({"items": await watches.list(principal)})


async def show_watch(
    request: Request,
    watch_id: str,
    events: int = Query(20, ge=0, le=MAX_EVENTS_LIMIT, description="Newest events to return."),
) -> Response:
    watches, principal = _caller(request)
    return _json(await watches.get(principal, watch_id, events))


async def delete_watch(request: Request, watch_id: str) -> Response:
    watches, principal = _caller(request)
    return _json(await watches.delete(principal, watch_id))


def install_watch_routes(app: FastAPI) -> None:
    """Register the /v1/watches routes on ``app``."""
    errors: dict[int | str, dict[str, Any]] = dict(ERROR_RESPONSES)
    common: dict[str, Any] = {"tags": ["watches"], "response_model": None, "openapi_extra": keyed()}
    app.add_api_route(
        "/v1/watches",
        create_watch,
        methods=["POST"],
        summary="Watch a URL: check it every interval and keep what changed",
        status_code=201,
        responses={201: {"model": WatchCreated, "description": "Watch created"}, **errors},
        **{**common, "openapi_extra": {**keyed(), "requestBody": create_request_body()}},
    )
    app.add_api_route(
        "/v1/watches",
        list_watches,
        methods=["GET"],
        summary="The caller's watches",
        responses={200: {"model": WatchList}, **errors},
        **common,
    )
    app.add_api_route(
        "/v1/watches/{watch_id}",
        show_watch,
        methods=["GET"],
        summary="A watch and its newest check events (changes with their diffs, failures)",
        responses={200: {"model": WatchDetail}, **errors},
        **common,
    )
    app.add_api_route(
        "/v1/watches/{watch_id}",
        delete_watch,
        methods=["DELETE"],
        summary="Delete a watch and its events",
        responses={200: {"model": WatchDeleted}, **errors},
        **common,
    )
