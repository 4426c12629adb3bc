"""``[watch]``: the watch scheduler — how often it looks for due checks, how many run at
once, how long a claim holds, how first checks are spread, how many events a watch keeps.

The per-class quotas (watches per caller, the shortest interval) live in ``[classes]``
(``max_watches``, ``min_interval_s``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sift.config.values import doc
from sift.errors import ConfigError


@dataclass(frozen=True)
class WatchSettings:
    enabled: bool = field(
        default=True,
        metadata=doc(
            "Run the watch scheduler in sift serve (false: watches are stored and listed, "
            "but no node checks them)."
        ),
    )
    tick_s: float = field(
        default=1.0,
        metadata=doc("How often the scheduler looks for due watches (seconds)."),
    )
    concurrency: int = field(
        default=16, metadata=doc("Watch checks one node runs at once, across all callers.")
    )
    claim_batch: int = field(
        default=64,
        metadata=doc("Due watches one node claims per look (at most; bounded by free slots)."),
    )
    lease_s: float = field(
        default=300.0,
        metadata=doc(
            "How long a claimed check holds its watch: no node claims it again before the "
            "lease ends or the check is recorded (longer than a check can take)."
        ),
    )
    jitter_s: float = field(
        default=30.0,
        metadata=doc(
            "A new watch's first check lands at a random point within this many seconds "
            "(at most its interval): watches created together do not fire together."
        ),
    )
    events_kept: int = field(
        default=50,
        metadata=doc("Check events kept per watch (newest first; older ones are deleted)."),
    )
    max_request_bytes: int = field(
        default=64 << 10,
        metadata=doc("Largest POST /v1/watches body.", size=True),
    )


def check_watch(watch: WatchSettings, where: str) -> None:
    for fname in ("concurrency", "claim_batch", "events_kept", "max_request_bytes"):
        if getattr(watch, fname) < 1:
            raise ConfigError(f"{where}: watch.{fname}: must be at least 1")
    for fname in ("tick_s", "lease_s"):
        if getattr(watch, fname) <= 0:
            raise ConfigError(f"{where}: watch.{fname}: must be positive")
    if watch.jitter_s < 0:
        raise ConfigError(f"{where}: watch.jitter_s: must be 0 or more")
