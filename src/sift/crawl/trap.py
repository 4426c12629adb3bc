"""Crawl traps: URLs whose path grows forever (``/a/a/a/…``, ``/x/y/x/y/x/y``).

An endless calendar or a ``?page=N`` that never ends is stopped by ``max_pages`` and
``max_depth``. Links that grow their path are caught earlier, before they waste a fetch: a
path with more than ``max_segments`` segments, or with one segment ``max_repeats`` times or
more, is taken for a trap and never enqueued.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

MAX_SEGMENTS: Final = 32
MAX_REPEATS: Final = 3


def is_trap(path: str, *, max_segments: int = MAX_SEGMENTS, max_repeats: int = MAX_REPEATS) -> bool:
    """Whether ``path`` (no query) looks like a crawl trap (see the module docstring)."""
    segments = [s for s in path.split("/") if s]
    if len(segments) > max_segments:
        return True
    if len(segments) < max_repeats:
        return False
    return Counter(segments).most_common(1)[0][1] >= max_repeats
