"""A stored watch and its events as callers see them (the API, MCP, the client, the CLI)."""

from __future__ import annotations

from typing import Any

from sift.jsonio import loads
from sift.store.watches import Watch, WatchEvent


def watch_view(w: Watch) -> dict[str, Any]:
    """``{id, url, every_s, options, ignore, webhook, created_at, next_check_at,
    last_checked_at, last_outcome, checks, failures, changes}`` (the secret never)."""
    return {
        "id": w.id,
        "url": w.url,
        "every_s": w.every_s,
        "options": loads(w.options),
        "ignore": loads(w.ignore),
        "webhook": w.webhook or None,
        "created_at": w.created_at,
        "next_check_at": w.next_due,
        "last_checked_at": w.last_checked_at,
        "last_outcome": w.last_outcome or None,
        "checks": w.checks,
        "failures": w.failures,
        "changes": w.changes,
    }


def event_view(e: WatchEvent) -> dict[str, Any]:
    """``{seq, checked_at, outcome, http_status, change, error}``; ``error`` is
    ``{code, message, hint}`` for a failed check, else None."""
    error: dict[str, Any] | None = None
    if e.error is not None:
        code, _, message = e.error.partition(": ")
        error = {"code": code, "message": message, "hint": e.hint}
    return {
        "seq": e.seq,
        "checked_at": e.checked_at,
        "outcome": e.outcome,
        "http_status": e.http_status,
        "change": None if e.change is None else loads(e.change),
        "error": error,
    }
