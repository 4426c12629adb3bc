"""``[history]``: the change-tracking history (``changes: true``): its bounds and the diff's."""

from __future__ import annotations

from dataclasses import dataclass, field

from sift.config.values import check_positive, doc


@dataclass(frozen=True)
class HistorySettings:
    max_snapshots: int = field(
        default=20,
        metadata=doc(
            "Snapshots kept per (caller, tag, URL) for changes=true; the oldest go first, "
            "the latest always stays."
        ),
    )
    max_bytes: int = field(
        default=256 << 20,
        metadata=doc(
            "Byte budget of the change history (snapshot texts, each stored once per "
            "content digest), apart from the cache's; the oldest snapshots that are not a "
            "URL's latest are evicted first, then the least recently seen latest ones, never "
            "a watch's.",
            size=True,
        ),
    )
    diff_max_lines: int = field(
        default=10000,
        metadata=doc(
            "Lines of each side a diff compares (changes=true), after their common head "
            "and tail; past them the diff covers the first lines only and says truncated. "
            "A diff of more than 1,000 lines runs in the render pool, under the class's "
            "render_timeout_s."
        ),
    )
    diff_max_bytes: int = field(
        default=64 << 10,
        metadata=doc(
            "Largest diff returned in change.diff; a longer one is cut at a line and says "
            "truncated (the added/removed counts stay whole).",
            size=True,
        ),
    )
    memo_max_bytes: int = field(
        default=16 << 20,
        metadata=doc(
            "Memory per node for each history key's latest snapshot and its text (watches, "
            "and changes=true fetches with max_age_s 0): such a fetch then reads nothing from "
            "the store before it and, on a change, not the previous text either; a write "
            "that finds another latest (another node) compares again. 0 turns it off.",
            size=True,
        ),
    )


def check_history(hs: HistorySettings, where: str) -> None:
    check_positive(
        hs, ("max_snapshots", "max_bytes", "diff_max_lines", "diff_max_bytes"), where, "history."
    )
