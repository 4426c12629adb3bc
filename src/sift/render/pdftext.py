"""One PDF page's text with its line and paragraph breaks.

pypdf's plain extraction ends each line with ``\\n`` but knows no paragraphs: a page came
out as one run of lines, which a markdown reader joins into one paragraph. Its layout mode
does find blank lines, but it pads text with spaces to mimic columns (two columns come out
side by side) and ignores the operator visitor that bounds extraction time, so it is not
used. Instead, plain extraction reports every piece of text with where it was drawn
(``visitor_text``), and the lines are set apart here by their vertical steps:

- a step down larger than ``PARAGRAPH_STEP`` times the page's usual line step starts a
  paragraph: a blank line, or extra space after a paragraph, as word processors and TeX
  set it. The usual step is the most common step down (to half a point; the smaller one on
  a tie), when the page has at least ``MIN_STEPS`` of them; else ``DEFAULT_LEADING`` times
  the font height, a common leading;
- a step up by more than a line (a new column, a box beside the text) starts one too.

Lines are separated by ``\\n``, paragraphs by a blank line; trailing spaces are dropped.
Positions are measured along the text's own up direction, so rotated pages work alike.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from pypdf import PageObject

PARAGRAPH_STEP: Final = 1.3
MIN_STEPS: Final = 3
DEFAULT_LEADING: Final = 1.2


@dataclass
class _Line:
    """A line's text and where its first piece was drawn: the baseline origin (user space),
    the unit vector pointing up from the text, and the font's height."""

    parts: list[str] = field(default_factory=list)
    x: float = 0.0
    y: float = 0.0
    up: tuple[float, float] = (0.0, 1.0)
    height: float = 0.0
    placed: bool = False

    def place(self, cm: list[float], tm: list[float], size: float) -> None:
        # The text matrix times the current transformation matrix (PDF 1.7, 9.4.4).
        c, d, e, f = tm[2:6]
        m0, m1, m2, m3, m4, m5 = cm
        up_x, up_y = c * m0 + d * m2, c * m1 + d * m3
        scale = math.hypot(up_x, up_y) or 1.0
        self.x, self.y = e * m0 + f * m2 + m4, e * m1 + f * m3 + m5
        self.up = (up_x / scale, up_y / scale)
        self.height = abs(size) * scale
        self.placed = True

    @property
    def text(self) -> str:
        return "".join(self.parts).rstrip()


def _lines(page: PageObject, watch: Callable[..., None]) -> list[_Line]:
    """The page's lines as pypdf's plain extraction finds them, each placed."""
    lines = [_Line()]

    def on_text(text: str, cm: Any, tm: Any, _font: Any, size: Any) -> None:
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            line = lines[-1]
            if piece and not line.placed:
                line.place(list(cm), list(tm), float(size or 0))
            line.parts.append(piece)
            if i < len(pieces) - 1:
                lines.append(_Line())

    page.extract_text(visitor_operand_before=watch, visitor_text=on_text)
    return [line for line in lines if line.text.strip()]


def _step(above: _Line, below: _Line) -> float:
    """How far ``below`` lies under ``above``, along ``above``'s up direction (negative:
    it lies higher)."""
    return (above.x - below.x) * above.up[0] + (above.y - below.y) * above.up[1]


def _usual_step(lines: list[_Line], steps: list[float]) -> float | None:
    """The most common step down between lines, or None when the page has too few."""
    down = [round(s * 2) / 2 for s, a in zip(steps, lines, strict=False) if s >= a.height / 2 > 0]
    if len(down) < MIN_STEPS:
        return None
    counts = Counter(down)
    return min(counts, key=lambda step: (-counts[step], step))


def page_text(page: PageObject, watch: Callable[..., None]) -> str:
    """The page's text: lines by ``\\n``, paragraphs by a blank line. ``watch`` is called
    before every content-stream operator (and may raise to stop)."""
    lines = _lines(page, watch)
    steps = [_step(a, b) for a, b in itertools.pairwise(lines)]
    usual = _usual_step(lines, steps)
    out: list[str] = []
    for i, line in enumerate(lines):
        if i > 0:
            step, height = steps[i - 1], lines[i - 1].height
            limit = PARAGRAPH_STEP * (usual if usual is not None else DEFAULT_LEADING * height)
            out.append("\n\n" if step > limit or step < -height else "\n")
        out.append(line.text)
    return "".join(out).strip()
