"""``GET /v1/watches/{watch_id}/deliveries``: a watch's webhook delivery log.

The caller's newest events of that watch (at most ``webhooks.log_limit``), newest first,
each with its attempts: when, the receiver's HTTP status or sift's error code, how long.
Another caller's watch answers 404 exactly as a missing one. Until the watch room is wired
in (``owns``), a watch is the caller's when it holds deliveries of theirs; with ``owns`` the
watch decides, and a watch of theirs with no event yet answers an empty list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from sift.api.auth import authenticate
from sift.api.schema import ERROR_RESPONSES, keyed
from sift.errors import NotFound
from sift.jsonio import dumps
from sift.principal import Principal
from sift.store.outbox import outbox_of

# Whether a watch exists and is this caller's (the watch room's answer, wired at merge).
Owns = Callable[[Principal, str], Awaitable[bool]]


class DeliveryAttempt(BaseModel):
    n: int = Field(description="1 for the first attempt.")
    at: float = Field(description="Unix seconds when the attempt began.")
    status: int | None = Field(description="The receiver's HTTP status, when it answered.")
    error: str | None = Field(
        description="Why it failed: http_<status>, or sift's error code (upstream_timeout, "
        "dns_failure, blocked_address, connect_failed, …); null when delivered."
    )
    duration_ms: int


class Delivery(BaseModel):
    id: str = Field(description="The webhook-id of every attempt of this event.")
    type: str | None = Field(description="The event's type (watch.changed, job.finished).")
    url: str
    state: str = Field(description="pending, sending, delivered or failed.")
    attempts: int
    next_attempt_at: float | None = Field(description="When a pending event is retried.")
    created_at: int
    finished_at: int | None
    log: list[DeliveryAttempt]


class DeliveryList(BaseModel):
    items: list[Delivery]


def not_found(watch_id: str) -> NotFound:
    return NotFound(f"watch {watch_id} not found")


def install_delivery_routes(app: FastAPI, owns: Owns | None = None) -> None:
    """Register the route on ``app`` (``owns``: see the module docstring)."""

    async def watch_deliveries(request: Request, watch_id: str) -> Response:
        principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
        if owns is not None and not await owns(principal, watch_id):
            raise not_found(watch_id)
        limit = request.app.state.settings.webhooks.log_limit
        outbox = outbox_of(request.app.state.store)
        items = await outbox.log("watch", watch_id, principal.name, limit)
        if owns is None and not items:
            raise not_found(watch_id)
        return Response(dumps({"items": items}), media_type="application/json")

    errors: dict[int | str, dict[str, Any]] = dict(ERROR_RESPONSES)
    app.add_api_route(
        "/v1/watches/{watch_id}/deliveries",
        watch_deliveries,
        methods=["GET"],
        summary="A watch's webhook deliveries, newest first, with every attempt",
        tags=["watches"],
        response_model=None,
        responses={200: {"model": DeliveryList}, **errors},
        openapi_extra=keyed(),
    )
