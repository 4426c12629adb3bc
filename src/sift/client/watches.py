"""The watch calls both client twins send (``/v1/watches``, docs/watches.md): built here
once, as ``core.Call``s; the answers are the API's JSON objects as dicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from sift.client.core import Call


def _body(_status: int, body: Any) -> dict[str, Any]:
    result: dict[str, Any] = body
    return result


def _items(_status: int, body: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = body["items"]
    return items


def watch_path(watch_id: str) -> str:
    return "/v1/watches/" + quote(watch_id, safe="")


def create_call(
    url: str,
    every: float | str,
    *,
    options: dict[str, Any] | None = None,
    ignore: Sequence[str] | None = None,
    webhook: str | None = None,
) -> Call[dict[str, Any]]:
    """``POST /v1/watches``; the answer holds ``webhook_secret`` (once) with a webhook."""
    body: dict[str, Any] = {"url": url, "every": every}
    if options:
        body["options"] = options
    if ignore:
        body["ignore"] = list(ignore)
    if webhook:
        body["webhook"] = webhook
    return Call("POST", "/v1/watches", _body, json=body)


def list_call() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/v1/watches", _items)


def get_call(watch_id: str, events: int) -> Call[dict[str, Any]]:
    return Call("GET", watch_path(watch_id), _body, params={"events": events})


def delete_call(watch_id: str) -> Call[dict[str, Any]]:
    return Call("DELETE", watch_path(watch_id), _body)
