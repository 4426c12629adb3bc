"""Discovered URLs in the compact form they travel in between processes.

``Found``: admitted URLs by origin, in the order each origin first appeared; each origin's
URLs in order, in chunks of at most ``CHUNK_URLS`` normalised URLs joined by newlines (a
normalised URL holds no whitespace). Moving 50,000 URLs between a worker process and the
event loop's process is then a copy of a few strings, not 50,000 objects to build.
"""

from __future__ import annotations

from typing import Final

# URLs in one chunk: also what one robots.txt job checks.
CHUNK_URLS: Final = 4096

Found = dict[str, list[str]]


def chunked(urls: list[str]) -> list[str]:
    """``urls`` as chunks."""
    return ["\n".join(urls[i : i + CHUNK_URLS]) for i in range(0, len(urls), CHUNK_URLS)]


def merge(into: Found, more: Found) -> Found:
    """``more``'s chunks after ``into``'s, origin by origin (``into`` is changed)."""
    for origin, chunks in more.items():
        into.setdefault(origin, []).extend(chunks)
    return into


def count(found: Found) -> int:
    """How many URLs ``found`` holds."""
    return sum(chunk.count("\n") + 1 for chunks in found.values() for chunk in chunks if chunk)
