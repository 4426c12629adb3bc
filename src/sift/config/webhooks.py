"""``[webhooks]``: how signed webhook events are delivered (docs/watches.md, "Webhooks")."""

from __future__ import annotations

from dataclasses import dataclass, field

from sift.config.values import check_positive, doc
from sift.errors import ConfigError


@dataclass(frozen=True)
class WebhooksSettings:
    """Delivery of webhook events: deadlines, retries, concurrency, the delivery log."""

    timeout_s: float = field(
        default=10.0,
        metadata=doc(
            "Deadline of one delivery attempt, from the DNS lookup to the last byte of the "
            "answer; past it the attempt fails as upstream_timeout."
        ),
    )
    max_attempts: int = field(
        default=8,
        metadata=doc("Attempts per event before it is given up (the first one included)."),
    )
    backoff_s: float = field(
        default=5.0,
        metadata=doc("Wait before the first retry; each further retry waits twice as long."),
    )
    max_backoff_s: float = field(
        default=3600.0, metadata=doc("The longest wait between two attempts.")
    )
    concurrency: int = field(
        default=16, metadata=doc("Attempts in flight at once on this node, all owners together.")
    )
    per_owner: int = field(
        default=4,
        metadata=doc(
            "Attempts in flight at once on this node for one owner (a caller): a slow or "
            "dead receiver holds at most this many."
        ),
    )
    poll_s: float = field(
        default=1.0,
        metadata=doc(
            "How often the deliverer looks for due events, retries and finished jobs with "
            "a webhook (an event enqueued on this node is sent at once)."
        ),
    )
    lease_s: float = field(
        default=60.0,
        metadata=doc(
            "How long a node holds an event it is sending; past it (the node died) another "
            "node sends it again. At least twice timeout_s."
        ),
    )
    max_response_bytes: int = field(
        default=64 << 10,
        metadata=doc(
            "Bytes of a receiver's answer read at most (the rest is not read).", size=True
        ),
    )
    keep_s: int = field(
        default=7 * 86400,
        metadata=doc("How long a finished event and its delivery log are kept."),
    )
    log_limit: int = field(
        default=100,
        metadata=doc("Events listed per GET /v1/watches/{id}/deliveries, newest first."),
    )


def check_webhooks(wh: WebhooksSettings, where: str) -> None:
    check_positive(
        wh,
        (
            "timeout_s",
            "max_attempts",
            "backoff_s",
            "max_backoff_s",
            "concurrency",
            "per_owner",
            "poll_s",
            "lease_s",
            "max_response_bytes",
            "keep_s",
            "log_limit",
        ),
        where,
        "webhooks.",
    )
    if wh.lease_s < 2 * wh.timeout_s:
        raise ConfigError(
            f"{where}: webhooks.lease_s: must be at least twice webhooks.timeout_s "
            f"({wh.timeout_s}), or a slow attempt's event is sent by a second node"
        )
