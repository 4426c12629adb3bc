"""The webhook outbox in the store: its rows and its interface (``outbox.outbox_of`` picks
the backend: the batch store's, the node's SQLite or the PostgreSQL several nodes share).

Three tables (``sqlite/webhooks.py``, ``postgres/webhooks.py``):

- ``webhook_delivery``: one row per event to deliver — owner (a caller's name), source
  (``watch`` | ``job``) and its id, the URL, the signing secret, the event JSON exactly as
  it is sent, and its state: ``pending`` (due at ``next_at``), ``sending`` (claimed by a
  node until ``next_at``, its lease, under a fencing ``token``), then ``delivered`` or
  ``failed`` (the secret is blanked then: it is not kept past its use).
- ``webhook_attempt``: the delivery log, one row per attempt (when, the HTTP status or the
  error code, how long it took).
- ``webhook_job``: a batch job's or crawl's webhook, waiting for its job to end.

Time is a parameter (``now``, unix seconds): the deliverer's clock. A claim is one
statement that moves due rows to ``sending`` (on PostgreSQL ``FOR UPDATE SKIP LOCKED``), so
each attempt is made by exactly one node; an outcome lands only under the claim's token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Source = Literal["watch", "job"]
DeliveryState = Literal["pending", "sending", "delivered", "failed"]
SOURCES: tuple[Source, ...] = ("watch", "job")
FINAL_STATES: tuple[DeliveryState, ...] = ("delivered", "failed")
# The job statuses after which a job's webhook fires.
ENDED_JOB_STATES: tuple[str, ...] = ("done", "partial", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """An event to deliver, as ``enqueue`` stores it (due at once)."""

    id: str  # the webhook-id: "msg_" + hex, the same for every attempt
    owner: str
    source: Source
    source_id: str
    url: str
    secret: str
    event: str  # JSON, sent byte for byte
    created_at: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """A claimed delivery: what one attempt sends, and the token its outcome must carry."""

    id: str
    owner: str
    url: str
    secret: str
    event: str
    attempts: int  # made before this one
    token: int


@dataclass(frozen=True, slots=True)
class Attempt:
    """One line of the delivery log."""

    n: int  # 1 for the first attempt
    at: float  # unix seconds when it began
    status: int | None  # the receiver's HTTP status, when it answered
    error: str | None  # sift's error code when it did not (or "http_<status>")
    duration_ms: int


@dataclass(frozen=True, slots=True)
class JobWebhook:
    """A job's webhook whose job has ended (``status``), with the job's target counts."""

    job_id: str
    owner: str
    url: str
    secret: str
    status: str
    counts: dict[str, int] = field(default_factory=dict)


class Outbox(Protocol):
    """The webhook tables of one store (see the module docstring)."""

    async def add(self, delivery: NewDelivery) -> None:
        """Store a new delivery, due at once."""
        ...

    async def due(
        self, now: float, limit: int, skip_owners: Sequence[str]
    ) -> list[tuple[str, str]]:
        """``(id, owner)`` of up to ``limit`` deliveries due at ``now`` (pending, or sending
        with an expired lease), oldest due first, none of ``skip_owners``."""
        ...

    async def claim(self, ids: Sequence[str], now: float, lease_s: float) -> list[Delivery]:
        """Take those of ``ids`` still due: ``sending`` until ``now + lease_s``, each under a
        fresh token. Another node's claim of the same row gets nothing."""
        ...

    async def record(
        self, delivery: Delivery, attempt: Attempt, state: DeliveryState, next_at: float
    ) -> bool:
        """Log ``attempt`` and move the delivery to ``state`` (``pending`` again at
        ``next_at``, or final) — only if it is still claimed under ``delivery.token``.
        False: fenced out (the lease was lost), nothing written."""
        ...

    async def release(self, deliveries: Sequence[Delivery], now: float) -> int:
        """Put claimed deliveries back to ``pending``, due at ``now``, no attempt counted
        (a stopping node's unfinished attempts)."""
        ...

    async def log(
        self, source: Source, source_id: str, owner: str, limit: int
    ) -> list[dict[str, Any]]:
        """``owner``'s newest ``limit`` deliveries of one source, newest first, each with its
        attempts in order. Empty when there are none (or they are another owner's)."""
        ...

    async def prune(self, before: int) -> int:
        """Delete the deliveries that became final before ``before``, with their log."""
        ...

    async def add_job_webhook(
        self, job_id: str, owner: str, url: str, secret: str, now: int
    ) -> None:
        """Remember ``job_id``'s webhook until its job ends."""
        ...

    async def ended_jobs(self, limit: int) -> list[JobWebhook]:
        """Up to ``limit`` job webhooks whose job has ended (done, partial, failed or
        cancelled). Forgets the webhooks of jobs that are gone."""
        ...

    async def fire_job(self, job_id: str, delivery: NewDelivery) -> bool:
        """In one transaction: forget ``job_id``'s webhook and store ``delivery``. False
        (nothing stored) when it was fired already — by another node, say."""
        ...


def log_view(rows: Sequence[Any], attempts: Sequence[Any]) -> list[dict[str, Any]]:
    """The delivery log as the API shows it (both backends read the same columns)."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for delivery_id, n, at, status, error, duration_ms in attempts:
        by_id.setdefault(str(delivery_id), []).append(
            {
                "n": int(n),
                "at": float(at),
                "status": status,
                "error": error,
                "duration_ms": int(duration_ms),
            }
        )
    out = []
    for id_, url, state, event, n_attempts, next_at, created_at, finished_at in rows:
        try:
            kind = json.loads(event).get("type")
        except (ValueError, AttributeError):
            kind = None
        out.append(
            {
                "id": id_,
                "type": kind,
                "url": url,
                "state": state,
                "attempts": int(n_attempts),
                "next_attempt_at": float(next_at) if state == "pending" else None,
                "created_at": int(created_at),
                "finished_at": finished_at,
                "log": by_id.get(str(id_), []),
            }
        )
    return out
