"""A unified diff of two texts by lines, bounded in CPU and in size.

``difflib`` compares lines. Its cost grows with the lines it is given, so the common head
and tail of the two texts (most of a page that changed a little) are cut off first, in
linear time, keeping ``CONTEXT`` lines of each for the hunks; then each side is capped at
``max_lines`` lines (the diff says ``truncated``). The hunk headers are shifted back so their
line numbers are those of the whole texts. The diff returned is cut at a line boundary to
``max_bytes`` (``truncated`` again); ``added`` and ``removed`` count every line of the
compared range, also those past the cut.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

CONTEXT = 3  # lines of context around each hunk, as `diff -u`
FROM_FILE = "previous"
TO_FILE = "current"
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@$")


@dataclass(frozen=True)
class Diff:
    text: str  # the unified diff, every line ending in "\n"; "" when the texts are equal
    added: int
    removed: int
    truncated: bool


@dataclass(frozen=True)
class Trimmed:
    """Two texts' lines less their common head and tail (``CONTEXT`` lines of each kept):
    ``skip`` lines were cut from the head of both."""

    a: list[str]
    b: list[str]
    skip: int

    @property
    def lines(self) -> int:
        """The longer side's lines: what the diff's cost grows with."""
        return max(len(self.a), len(self.b))


def trim(old: str, new: str) -> Trimmed:
    """Cut the common head and tail of ``old`` and ``new`` by lines, in linear time."""
    a, b = old.splitlines(), new.splitlines()
    head = _common_head(a, b)
    tail = _common_tail(a, b, head)
    skip = max(0, head - CONTEXT)
    keep_tail = max(0, tail - CONTEXT)
    return Trimmed(a[skip : len(a) - keep_tail], b[skip : len(b) - keep_tail], skip)


def unified(old: str, new: str, *, max_lines: int, max_bytes: int) -> Diff:
    """The unified diff from ``old`` to ``new`` (headers ``--- previous`` / ``+++ current``)."""
    return unified_trimmed(trim(old, new), max_lines=max_lines, max_bytes=max_bytes)


def unified_trimmed(t: Trimmed, max_lines: int, max_bytes: int) -> Diff:
    """``unified`` of texts already trimmed (module-level: the render pool runs it)."""
    truncated = t.lines > max_lines
    a, b = t.a[:max_lines], t.b[:max_lines]
    out: list[str] = []
    size = 0
    cut = False
    added = removed = 0
    for i, line in enumerate(
        difflib.unified_diff(a, b, FROM_FILE, TO_FILE, n=CONTEXT, lineterm="")
    ):
        if i >= 2:  # past the two file headers
            if line.startswith("@@"):
                line = _shift(line, t.skip)
            elif line.startswith("+"):
                added += 1
            elif line.startswith("-"):
                removed += 1
        if cut:
            continue
        size += len(line.encode()) + 1
        if size > max_bytes:
            truncated = cut = True  # cut here: keep counting, stop keeping lines
            continue
        out.append(line + "\n")
    return Diff("".join(out), added, removed, truncated)


def _common_head(a: list[str], b: list[str]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_tail(a: list[str], b: list[str], head: int) -> int:
    """Equal lines at the end of both, not overlapping the common head."""
    n = min(len(a), len(b)) - head
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


def _shift(hunk: str, by: int) -> str:
    """A hunk header with both start lines moved ``by`` lines down."""
    if by == 0:
        return hunk
    m = _HUNK.match(hunk)
    if m is None:  # never: difflib writes every header this way
        return hunk
    a_start, a_len, b_start, b_len = m.groups()
    return f"@@ -{int(a_start) + by}{a_len or ''} +{int(b_start) + by}{b_len or ''} @@"
