"""The parts of a response beside the content slice — title and links — held to the cap too.

``cap`` bounds the content a caller receives by ``max_bytes``; a page with a megabyte
``<title>`` or a hundred thousand links would otherwise walk around it. Both are cut when a
response is built (the stored snapshot keeps them whole, so a caller with a larger cap still
gets more), and the response says so with a warning:

- ``title`` keeps at most ``min(max_bytes, TITLE_MAX_BYTES)`` UTF-8 bytes, cut on a
  character boundary (warning ``title_truncated``);
- ``links`` keeps links (``{"text", "url"}``) in document order while their count is at
  most ``max_links`` (``classes.<class>.max_links``) and the sum of their texts' and URLs'
  UTF-8 lengths at most ``max_bytes`` (warning ``links_truncated``).
"""

from __future__ import annotations

from typing import Final

TITLE_MAX_BYTES: Final = 1024


def cap_title(title: str | None, max_bytes: int) -> tuple[str | None, bool]:
    """``title`` cut to ``min(max_bytes, TITLE_MAX_BYTES)`` UTF-8 bytes; and whether it was."""
    if title is None:
        return None, False
    limit = min(max_bytes, TITLE_MAX_BYTES)
    if len(title) * 4 <= limit:  # cannot exceed: skip the encode on the hot path
        return title, False
    data = title.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return title, False
    return data[:limit].decode("utf-8", "ignore"), True


def cap_links(
    links: list[dict[str, str]], max_links: int, max_bytes: int
) -> tuple[list[dict[str, str]], bool]:
    """The first links of ``links`` within ``max_links`` and ``max_bytes`` (sum of the UTF-8
    lengths of text and URL); and whether any was dropped."""
    total = 0
    for i, link in enumerate(links):
        total += _utf8_len(link["text"]) + _utf8_len(link["url"])
        if i >= max_links or total > max_bytes:
            return links[:i], True
    return links, False


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
