"""The links a crawl follows from one HTML page.

``<a href>`` and ``<area href>``, resolved against the page's final URL (or its ``<base
href>``), fragment dropped, in document order, each once. Left out: links with
``rel=nofollow`` (and every link of a page whose ``<meta name="robots">`` says ``nofollow``),
``download`` links, non-http(s) schemes, and links whose path ends in an extension that is
not a web page (``.pdf``, ``.png``, ``.zip``, … — ``NON_HTML_EXTENSIONS``). At most
``max_links`` links per page.

Parsing is lxml's HTML parser (libxml2), which is pure CPU: callers run it off the event
loop (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
from typing import Final
from urllib.parse import urljoin, urlsplit, urlunsplit

import lxml.html
from lxml import etree

NON_HTML_EXTENSIONS: Final = frozenset(
    [
        "7z",
        "avi",
        "bin",
        "bmp",
        "bz2",
        "css",
        "csv",
        "dmg",
        "doc",
        "docx",
        "eot",
        "epub",
        "exe",
        "flac",
        "gif",
        "gz",
        "ico",
        "iso",
        "jar",
        "jpeg",
        "jpg",
        "js",
        "json",
        "m4a",
        "m4v",
        "mkv",
        "mov",
        "mp3",
        "mp4",
        "mpeg",
        "msi",
        "ogg",
        "otf",
        "pdf",
        "png",
        "ppt",
        "pptx",
        "ps",
        "rar",
        "rss",
        "rtf",
        "svg",
        "tar",
        "tgz",
        "tif",
        "tiff",
        "ttf",
        "txt",
        "wav",
        "webm",
        "webp",
        "wmv",
        "woff",
        "woff2",
        "xls",
        "xlsx",
        "xml",
        "xz",
        "zip",
    ]
)
_SCHEMES: Final = ("http", "https")


def looks_like_page(path: str) -> bool:
    """False when the path's last segment ends in a known non-HTML extension."""
    last = path.rsplit("/", 1)[-1]
    if "." not in last:
        return True
    return last.rsplit(".", 1)[1].lower() not in NON_HTML_EXTENSIONS


def _rel_nofollow(value: str | None) -> bool:
    return value is not None and "nofollow" in value.lower().split()


def page_links(body: bytes, page_url: str, max_links: int) -> list[str]:
    """The followable links of an HTML ``body`` fetched from ``page_url`` (see the module
    docstring): absolute URLs without fragments, each once, in document order."""
    if not body.strip():
        return []
    try:
        root = lxml.html.document_fromstring(body)
    except (etree.ParserError, ValueError):
        return []
    for meta in root.iter("meta"):
        if str(meta.get("name") or "").lower() == "robots" and _rel_nofollow(
            str(meta.get("content") or "").replace(",", " ")
        ):
            return []
    base = page_url
    for el in root.iter("base"):
        href = str(el.get("href") or "").strip()
        if href:
            with contextlib.suppress(ValueError):
                base = urljoin(page_url, href)
            break
    out: dict[str, None] = {}
    for el in root.iter("a", "area"):
        href = el.get("href")
        if not href or _rel_nofollow(el.get("rel")) or el.get("download") is not None:
            continue
        try:
            parts = urlsplit(urljoin(base, str(href).strip()))
        except ValueError:
            continue
        if parts.scheme.lower() not in _SCHEMES or not parts.netloc:
            continue
        if not looks_like_page(parts.path):
            continue
        out[urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))] = None
        if len(out) >= max_links:
            break
    return list(out)
