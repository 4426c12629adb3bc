"""``[cache]``: the content cache's byte budgets and default freshness."""

from __future__ import annotations

from dataclasses import dataclass, field

from sift.config.values import doc


@dataclass(frozen=True)
class CacheSettings:
    max_bytes: int = field(
        default=1 << 30,
        metadata=doc(
            "Byte budget of the content cache (raw bodies + rendered outputs); LRU-evicted.",
            size=True,
        ),
    )
    hot_bytes: int = field(
        default=64 << 20,
        metadata=doc(
            "In-process copy of recently served renders, so cache hits skip the database.",
            size=True,
        ),
    )
    robots_max_bytes: int = field(
        default=16 << 20,
        metadata=doc(
            "Byte budget of the robots.txt table (origin + body per entry); the oldest "
            "entries are evicted first.",
            size=True,
        ),
    )
    default_max_age_s: int = field(
        default=3600,
        metadata=doc(
            "Age after which a cached page is revalidated, when a request sets no max_age_s."
        ),
    )
