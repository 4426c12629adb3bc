"""Sitemaps: ``<urlset>`` documents, ``<sitemapindex>`` documents, robots.txt ``Sitemap:``.

``parse_sitemap`` reads one document (XML, or gzip-compressed XML, inflated to at most
``max_bytes``) with a parser that resolves no entities and reaches no network, and returns
its page URLs and the sitemaps it points to. ``collect`` walks from the root sitemaps
through indexes, breadth first, reading at most ``max_docs`` documents and keeping at most
``max_urls`` page URLs; a document that cannot be fetched or parsed is skipped (a site's
broken sitemap must not fail the crawl).
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

from lxml import etree

MAX_DOCS: Final = 20
MAX_URLS: Final = 50_000
_GZIP_MAGIC: Final = b"\x1f\x8b"

Fetch = Callable[[str], Awaitable[bytes | None]]


def _inflate(body: bytes, max_bytes: int) -> bytes | None:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, max_bytes)
    except zlib.error:
        return None
    return out if not d.unconsumed_tail else None  # larger than max_bytes inflated


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def parse_sitemap(body: bytes, max_bytes: int) -> tuple[list[str], list[str]]:
    """``(page URLs, sitemap URLs)`` of one document; both empty when it is not a sitemap."""
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
    child = "url" if kind == "urlset" else "sitemap"
    locs: list[str] = []
    for entry in root:
        if _local(entry.tag) != child:
            continue
        for el in entry:
            if _local(el.tag) == "loc" and el.text and el.text.strip():
                locs.append(el.text.strip())
                break
    return (locs, []) if kind == "urlset" else ([], locs)


async def collect(
    fetch: Fetch,
    roots: list[str],
    *,
    follow: Callable[[str], bool],
    max_bytes: int,
    max_docs: int = MAX_DOCS,
    max_urls: int = MAX_URLS,
) -> list[str]:
    """Page URLs from ``roots`` and the indexes below them (see the module docstring);
    ``follow(url)`` says whether a sitemap an index names may be read."""
    queue = deque(dict.fromkeys(roots))
    read: set[str] = set(queue)
    urls: dict[str, None] = {}
    docs = 0
    while queue and docs < max_docs and len(urls) < max_urls:
        url = queue.popleft()
        docs += 1
        body = await fetch(url)
        if body is None:
            continue
        pages, sitemaps = parse_sitemap(body, max_bytes)
        for page in pages:
            urls[page] = None
            if len(urls) >= max_urls:
                break
        for sm in sitemaps:
            if sm not in read and follow(sm):
                read.add(sm)
                queue.append(sm)
    return list(urls)
