"""Watches in the store: the row types and the ``WatchStore`` interface both backends share.

A watch (docs/watches.md) is a URL a caller asked sift to check every ``every_s`` seconds.
Its row carries the schedule (``next_due``), the claim of the check running now
(``lease_until``, ``token``) and a summary of its checks; each check's outcome is a
``WatchEvent``, kept per watch up to a count (``events_kept``), newest first.

Claims: ``claim_due_watches(now, limit, lease_s)`` takes due watches whose lease is free, in
one step — SQLite on its one worker thread, PostgreSQL with ``FOR UPDATE SKIP LOCKED`` — and
in the same step moves each one's ``next_due`` on by its interval (anchored to the old due
time, so a schedule keeps its phase) and sets a lease with a new fencing ``token``. So each
due check is claimed by exactly one node, and a check that fails or whose node dies is
simply tried again at the next due time: a failure never causes a burst. ``record_check``
writes an outcome only under the token of the claim (a watch deleted or re-claimed
meanwhile keeps nothing of it).

Time is a parameter everywhere (``now``, unix seconds as a float).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from sift.errors import NotFound, QuotaExceeded
from sift.jsonio import loads
from sift.store.history import Conflict, HistoryWrite, SnapshotRow

Outcome = Literal["ok", "failed"]

WATCH_COLS: Final = (
    "id, caller, caller_class, url, every_s, options, ignore, webhook, webhook_secret, "
    "created_at, next_due, lease_until, token, checks, failures, changes, last_checked_at, "
    "last_outcome"
)
EVENT_COLS: Final = "watch_id, seq, checked_at, outcome, http_status, change, error, hint"


@dataclass(slots=True)
class Watch:
    """One ``watch`` row. ``options`` is the JSON of its fetch options (url excluded),
    ``ignore`` the JSON list of its ignore selectors; ``webhook`` is "" when there is none."""

    id: str
    caller: str
    caller_class: str
    url: str
    every_s: float
    options: str
    ignore: str
    webhook: str
    webhook_secret: str
    created_at: float
    next_due: float
    lease_until: float = 0.0
    token: int = 0
    checks: int = 0
    failures: int = 0
    changes: int = 0
    last_checked_at: float | None = None
    last_outcome: str = ""  # "" (never checked), "failed" or the change status


@dataclass(slots=True)
class WatchEvent:
    """One check's outcome. ``change`` is the envelope's ``change`` as JSON (None when the
    check failed or the fetch reported none); ``error`` is ``"<code>: <message>"``."""

    watch_id: str
    seq: int
    checked_at: float
    outcome: Outcome
    http_status: int | None = None
    change: str | None = None
    error: str | None = None
    hint: str | None = None


def watch_row(r: Any) -> Watch:
    return Watch(
        id=str(r[0]),
        caller=str(r[1]),
        caller_class=str(r[2]),
        url=str(r[3]),
        every_s=float(r[4]),
        options=str(r[5]),
        ignore=str(r[6]),
        webhook=str(r[7]),
        webhook_secret=str(r[8]),
        created_at=float(r[9]),
        next_due=float(r[10]),
        lease_until=float(r[11]),
        token=int(r[12]),
        checks=int(r[13]),
        failures=int(r[14]),
        changes=int(r[15]),
        last_checked_at=None if r[16] is None else float(r[16]),
        last_outcome=str(r[17]),
    )


def event_row(r: Any) -> WatchEvent:
    return WatchEvent(
        watch_id=str(r[0]),
        seq=int(r[1]),
        checked_at=float(r[2]),
        outcome="ok" if r[3] == "ok" else "failed",
        http_status=None if r[4] is None else int(r[4]),
        change=None if r[5] is None else str(r[5]),
        error=None if r[6] is None else str(r[6]),
        hint=None if r[7] is None else str(r[7]),
    )


def event_values(e: WatchEvent) -> tuple[Any, ...]:
    """``e`` in ``EVENT_COLS`` order (``event_row``'s inverse)."""
    return (
        e.watch_id,
        e.seq,
        e.checked_at,
        e.outcome,
        e.http_status,
        e.change,
        e.error,
        e.hint,
    )


def watch_values(w: Watch) -> tuple[Any, ...]:
    return (
        w.id,
        w.caller,
        w.caller_class,
        w.url,
        w.every_s,
        w.options,
        w.ignore,
        w.webhook,
        w.webhook_secret,
        w.created_at,
        w.next_due,
        w.lease_until,
        w.token,
        w.checks,
        w.failures,
        w.changes,
        w.last_checked_at,
        w.last_outcome,
    )


def watch_not_found(watch_id: str) -> NotFound:
    """The one NotFound for a watch that is missing or another caller's (same message)."""
    return NotFound(
        f"no watch {watch_id!r}",
        hint="Check the id (GET /v1/watches lists yours); only the caller who created a "
        "watch can see it.",
    )


def too_many_watches(limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"this caller already has {limit} watches, its class's limit",
        hint="Delete a watch you no longer need (DELETE /v1/watches/{id}), then create again.",
    )


def event_summary(event: WatchEvent) -> str:
    """A watch's ``last_outcome`` after ``event``: "failed", the change status, or "ok"
    (a fetch that reported no change field)."""
    if event.outcome == "failed":
        return "failed"
    if event.change is None:
        return "ok"
    status = loads(event.change).get("status")
    return status if isinstance(status, str) else "ok"


# The summaries (``event_summary``) of a check that saw the page change or go away.
CHANGE_SUMMARIES: Final = frozenset({"changed", "removed"})


def is_change(event: WatchEvent) -> bool:
    """The check saw the page change (or go away): what a webhook is sent for."""
    return event_summary(event) in CHANGE_SUMMARIES


def next_due_after(due: float, every_s: float, now: float) -> float:
    """The next due time after a check due at ``due`` was claimed at ``now`` (>= ``due``):
    the first point of the watch's grid (``due + k * every_s``) later than ``now``. A
    schedule that fell behind skips the missed checks (no burst) and keeps its phase. Both
    backends compute exactly this, in SQL."""
    return due + every_s * (math.floor((now - due) / every_s) + 1)


class WatchStore(Protocol):
    """The watch operations; ``store.watches`` of either batch store."""

    async def create_watch(self, watch: Watch, max_watches: int) -> None:
        """Insert ``watch`` unless its caller already has ``max_watches`` (QuotaExceeded);
        the count and the insert are one step."""
        ...

    async def watches_of(self, caller: str) -> list[Watch]:
        """The caller's watches, oldest first."""
        ...

    async def owned_watch(self, watch_id: str, caller: str) -> Watch:
        """The watch, or ``watch_not_found`` when it is missing or another caller's."""
        ...

    async def delete_watch(self, watch_id: str, caller: str) -> None:
        """Delete the watch and its events; ``watch_not_found`` as ``owned_watch``."""
        ...

    async def watch_events(self, watch_id: str, limit: int) -> list[WatchEvent]:
        """The newest ``limit`` events, newest first."""
        ...

    async def claim_due_watches(self, now: float, limit: int, lease_s: float) -> list[Watch]:
        """Claim up to ``limit`` watches due at ``now`` with a free lease, soonest due first
        (see the module docstring); the rows as claimed (new token and lease)."""
        ...

    async def record_check(self, event: WatchEvent, token: int, keep: int) -> bool:
        """Store ``event`` (its ``seq`` is assigned here) under the claim ``token`` and free
        the lease; keep the newest ``keep`` events. False (nothing written) when the watch is
        gone or claimed again since."""
        ...

    async def record_check_and_history(
        self, event: WatchEvent, token: int, keep: int, write: HistoryWrite
    ) -> SnapshotRow | Conflict | None:
        """``record_check`` and the check's history snapshot (``HistoryStore.record`` of
        ``write``) in one transaction: both or neither. The snapshot as written; None
        (nothing written) when the watch is gone or claimed again since; ``Conflict``
        (nothing written) when the history's latest is not ``write.expect``."""
        ...

    async def release_watch_leases(self) -> int:
        """Free every lease (a node of its own, starting: nothing it held is running)."""
        ...

    async def watch_count(self) -> int:
        """All watches of all callers (operations)."""
        ...
