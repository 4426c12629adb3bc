"""The MCP watch tools: ``watch``, ``watches``, ``changes`` — the same ``Watches`` calls as
``/v1/watches`` (a watch made here is the caller's watch on the API too)."""

from __future__ import annotations

from typing import Any

from sift.errors import BadRequest, SiftError
from sift.mcp.watch_schema import CHANGES_DEFAULT_LIMIT, CHANGES_MAX_LIMIT
from sift.principal import Principal
from sift.watch.watches import Watches


def _watches(watches: Watches | None) -> Watches:
    if watches is None:
        raise SiftError("watches are not available in this sift")
    return watches


async def watch(
    watches: Watches | None, principal: Principal, args: dict[str, Any], now: float
) -> dict[str, Any]:
    view = await _watches(watches).create(principal, args, now)
    return {k: v for k, v in view.items() if v is not None or k == "webhook"}


async def list_watches(watches: Watches | None, principal: Principal) -> dict[str, Any]:
    return {"items": await _watches(watches).list(principal)}


async def changes(
    watches: Watches | None, principal: Principal, args: dict[str, Any]
) -> dict[str, Any]:
    watch_id = args.get("id")
    if not isinstance(watch_id, str) or not watch_id:
        raise BadRequest("id: expected the watch id that watch returned")
    limit = args.get("limit", CHANGES_DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= CHANGES_MAX_LIMIT:
        raise BadRequest(f"limit: expected an integer from 1 to {CHANGES_MAX_LIMIT}")
    only = args.get("only_changes", False)
    if not isinstance(only, bool):
        raise BadRequest("only_changes: expected true or false")
    shown = await _watches(watches).get(principal, watch_id, limit)
    events = shown["events"]
    if only:
        events = [
            e for e in events if (e.get("change") or {}).get("status") in ("changed", "removed")
        ]
    return {"id": shown["id"], "url": shown["url"], "events": events}
