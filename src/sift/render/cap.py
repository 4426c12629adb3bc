"""The output cap: one window of a rendered text, in UTF-8 bytes, and where to continue.

Contract of ``cap(content, offset, max_bytes)``:

- Offsets and sizes are UTF-8 byte counts of ``content``; ``total_bytes`` is its full size.
- A slice never splits a UTF-8 sequence. When the rest does not fit, the cut prefers the end
  of a paragraph (after a blank line), then the end of a line, found in the last 10 % of the
  window; otherwise it falls back to the last character boundary that fits.
- ``next_offset`` is where the next slice starts (None when this slice reaches the end);
  following it from 0 until ``truncated`` is false yields exactly ``content``.
- ``offset == total_bytes`` is a valid, empty, final slice (so empty content works).
  An offset past the end, negative, or inside a UTF-8 sequence raises ``OffsetOutOfRange``
  (sift never hands out such an offset, so a caller holding one has a stale or made-up one).
- ``max_bytes`` must be at least ``MIN_MAX_BYTES`` (one 4-byte character), else ``BadRequest``.

Cost: the text is encoded once per distinct string (a small cache keeps the last few, so a
service slicing the same 5 MB cached render repeatedly does not re-encode); each call then
does only C-level searches over the last 10 % of the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sift.errors import BadRequest, OffsetOutOfRange

# The smallest slice: one UTF-8 character of 4 bytes. Defined here, in the lower layer;
# ``sift.options`` checks requests against it up front.
MIN_MAX_BYTES = 4

# Where in the window a clean boundary is looked for: its last tenth.
BOUNDARY_WINDOW_FRACTION = 0.10


@dataclass(frozen=True)
class Slice:
    """One window of the content (see module docstring for the contract)."""

    content: str
    offset: int
    bytes: int
    next_offset: int | None
    total_bytes: int
    truncated: bool


@lru_cache(maxsize=4)
def _encoded(content: str) -> bytes:
    # surrogatepass: any Python str round-trips, even one holding lone surrogates.
    return content.encode("utf-8", errors="surrogatepass")


def total_bytes(content: str) -> int:
    """The UTF-8 size of ``content``."""
    return len(_encoded(content))


def cap(content: str, offset: int, max_bytes: int) -> Slice:
    """The window of ``content`` starting at byte ``offset``, at most ``max_bytes`` long."""
    if max_bytes < MIN_MAX_BYTES:
        raise BadRequest(
            f"max_bytes must be at least {MIN_MAX_BYTES}, got {max_bytes}",
            hint="Ask for a larger max_bytes.",
        )
    data = _encoded(content)
    total = len(data)
    if offset < 0 or offset > total:
        raise OffsetOutOfRange(f"offset {offset} is outside the content (total_bytes {total})")
    if offset < total and (data[offset] & 0xC0) == 0x80:
        raise OffsetOutOfRange(f"offset {offset} falls inside a UTF-8 character")
    end = offset + max_bytes
    if end >= total:
        piece = data[offset:]
        return Slice(_decode(piece), offset, len(piece), None, total, False)
    cut = _cut_point(data, offset, end, max_bytes)
    piece = data[offset:cut]
    return Slice(_decode(piece), offset, len(piece), cut, total, True)


def _cut_point(data: bytes, offset: int, end: int, max_bytes: int) -> int:
    """The best cut in ``(offset, end]``: paragraph end, line end, else a character start."""
    lo = max(offset + 1, end - max(1, int(max_bytes * BOUNDARY_WINDOW_FRACTION)))
    i = data.rfind(b"\n\n", lo, end)
    if i >= 0:
        return i + 2 if i + 2 <= end else i + 1
    i = data.rfind(b"\n", lo, end)
    if i >= 0:
        return i + 1
    cut = end
    # Step back over continuation bytes (at most 3) to the start of a character.
    while cut > offset + 1 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return cut


def _decode(piece: bytes) -> str:
    return piece.decode("utf-8", errors="surrogatepass")
