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
from urllib.parse import urljoin, urlsplit

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
        root = etree.fromstring(body, etree.HTMLParser(no_network=True))
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return []
    if root is None:
        return []
    base = page_url
    hrefs: list[str] = []
    seen_base = False
    # One walk over the elements that matter, in document order.
    for el in root.iter("a", "area", "base", "meta"):
        tag = el.tag
        if tag == "meta":
            if str(el.get("name") or "").lower() == "robots" and _rel_nofollow(
                str(el.get("content") or "").replace(",", " ")
            ):
                return []
        elif tag == "base":
            href = str(el.get("href") or "").strip()
            if href and not seen_base:
                seen_base = True
                with contextlib.suppress(ValueError):
                    base = urljoin(page_url, href)
        else:
            href = el.get("href")
            if href and not _rel_nofollow(el.get("rel")) and el.get("download") is None:
                hrefs.append(str(href).strip())
    out: dict[str, None] = {}
    origin = _origin(base)
    for href in hrefs:
        url = _absolute(base, origin, href)
        if url is None:
            continue
        scheme, _, rest = url.partition("://")
        if scheme.lower() not in _SCHEMES or not rest or rest[0] in "/?#":
            continue
        slash = rest.find("/")
        path = "" if slash < 0 else rest[slash:].split("?", 1)[0]
        if not looks_like_page(path):
            continue
        out[url] = None
        if len(out) >= max_links:
            break
    return list(out)


def _origin(base: str) -> str | None:
    try:
        parts = urlsplit(base)
    except ValueError:
        return None
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


def _absolute(base: str, origin: str | None, href: str) -> str | None:
    """``href`` resolved against ``base``, fragment dropped. Site-relative and absolute
    http(s) hrefs — most links — take a fast path (the frontier normalises every URL
    afterwards: dot segments, escapes, case); the rest go through ``urljoin``."""
    href = href.split("#", 1)[0]
    if not href:
        return None
    if href[0] == "/" and href[:2] != "//" and origin is not None:
        return origin + href
    low = href[:8].lower()
    if low.startswith(("http://", "https://")):
        return href
    try:
        return urljoin(base, href)
    except ValueError:
        return None
