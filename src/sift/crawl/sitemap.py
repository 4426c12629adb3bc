"""Sitemaps: ``<urlset>`` documents, ``<sitemapindex>`` documents, robots.txt ``Sitemap:``.

``parse_sitemap`` reads one document (XML, or gzip-compressed XML, inflated to at most
``max_bytes``) with a parser that resolves no entities and reaches no network, and returns
its page URLs and the sitemaps it points to: at most ``max_entries``, and only those read
before ``deadline`` (monotonic seconds). ``collect`` walks from the root sitemaps through
indexes, breadth first, reading at most ``max_docs`` documents and at most ``max_urls``
page URLs; a document that cannot be fetched or parsed is skipped (a site's
broken sitemap must not fail the crawl).

Parsing runs in a worker process, never in the event loop's (issue 24: one 16 MiB sitemap
froze the server ~1.7 s): ``collect`` is handed ``parse`` (``OffLoop.sitemap``, which runs
``cpujobs.sitemap_job``: this parser, then admission). Each document is bounded in bytes
(``max_bytes``), entries (what ``max_urls`` leaves) and time (the job's deadline).
"""

from __future__ import annotations

import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

from lxml import etree

from sift.crawl.found import Found, merge

MAX_DOCS: Final = 20
MAX_URLS: Final = 50_000
# How many entries are walked between two looks at the clock.
_CLOCK_EVERY: Final = 512
_GZIP_MAGIC: Final = b"\x1f\x8b"

Fetch = Callable[[str], Awaitable[bytes | None]]
Parse = Callable[[bytes, int, int], Awaitable[tuple[Found, int, list[str]]]]


def _inflate(body: bytes, max_bytes: int) -> bytes | None:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, max_bytes)
    except zlib.error:
        return None
    return out if not d.unconsumed_tail else None  # larger than max_bytes inflated


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def parse_sitemap(
    body: bytes,
    max_bytes: int,
    max_entries: int = MAX_URLS,
    deadline: float | None = None,
) -> tuple[list[str], list[str]]:
    """``(page URLs, sitemap URLs)`` of one document; both empty when it is not a sitemap.
    At most ``max_entries``, and no more once ``time.monotonic()`` passes ``deadline``."""
    if body.startswith(_GZIP_MAGIC):
        inflated = _inflate(body, max_bytes)
        if inflated is None:
            return [], []
        body = inflated
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=True)
    try:
        root = etree.fromstring(body[:max_bytes], parser)
    except (etree.XMLSyntaxError, ValueError):
        return [], []
    if root is None:
        return [], []
    kind = _local(root.tag)
    if kind not in ("urlset", "sitemapindex"):
        return [], []
    locs = _locs(root, "url" if kind == "urlset" else "sitemap", max_entries, deadline)
    return (locs, []) if kind == "urlset" else ([], locs)


def _locs(root: Any, child: str, max_entries: int, deadline: float | None) -> list[str]:
    locs: list[str] = []
    for n, entry in enumerate(root):
        if len(locs) >= max_entries:
            break
        if deadline is not None and n % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
            break
        if _local(entry.tag) != child:
            continue
        for el in entry:
            if _local(el.tag) == "loc" and el.text and el.text.strip():
                locs.append(el.text.strip())
                break
    return locs


async def collect(
    fetch: Fetch,
    parse: Parse,
    roots: list[str],
    *,
    max_docs: int = MAX_DOCS,
    max_urls: int = MAX_URLS,
) -> Found:
    """The admitted page URLs of ``roots`` and the indexes below them (see the module
    docstring). ``parse(body, max_entries, max_sitemaps)`` reads one document off the
    event loop: its admitted page URLs, how many it listed, the in-scope sitemaps it names
    (``OffLoop.sitemap``). The caller bounds the fetches in time."""
    queue = deque(dict.fromkeys(roots))
    read: set[str] = set(queue)
    found: Found = {}
    listed = docs = 0
    while queue and docs < max_docs and listed < max_urls:
        url = queue.popleft()
        docs += 1
        body = await fetch(url)
        if body is None:
            continue
        pages, count, sitemaps = await parse(body, max_urls - listed, max_docs)
        merge(found, pages)
        listed += count
        for sm in sitemaps:
            if sm not in read:
                read.add(sm)
                queue.append(sm)
    return found
