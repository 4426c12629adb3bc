"""Renders for bodies that are not HTML: JSON, XML feeds and documents, PDF.

Each returns readable text (markdown where it has structure) and never raises anything but
a sift error; all work is bounded by the body size, by lxml's own limits (no entity
expansion, no network, capped depth) for XML, and for JSON and PDF by an output budget
(``max_chars``). PDF text extraction is also bounded in pages (``max_pages``) and time
(``time_budget_s``): a small crafted PDF can make pypdf run for minutes (form XObjects
drawing each other), so extraction stops past the budget and keeps what it has. The render
pool's hard limit stays the backstop.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

from lxml import etree
from pypdf import PdfReader
from pypdf.errors import PyPdfError

from sift.errors import UnsupportedContentType
from sift.render.markdown import normalize_inline
from sift.render.pdftext import page_text

# A PDF's text layer rarely needs more than this many pages for an agent; bounded time.
DEFAULT_MAX_PDF_PAGES = 500
# What a damaged or hostile PDF can make pypdf raise.
_PDF_ERRORS = (PyPdfError, ValueError, TypeError, KeyError, IndexError, OSError, RecursionError)


def render_json(text: str, max_chars: int | None = None) -> tuple[str, list[str]]:
    """Pretty-printed JSON; text that is not JSON (or nests absurdly deep) passes through.

    Indentation grows with depth (quadratic in it), so the output is written piece by piece
    and stops past ``max_chars`` with ``render_budget_exceeded``."""
    try:
        obj = json.loads(text)
        if max_chars is None:
            return json.dumps(obj, indent=2, ensure_ascii=False), []
        parts: list[str] = []
        left = max_chars
        for chunk in json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(obj):
            parts.append(chunk)
            left -= len(chunk)
            if left < 0:
                return "".join(parts), ["render_budget_exceeded"]
        return "".join(parts), []
    except (ValueError, RecursionError):
        return text, ["invalid_json"]


def _local(tag: Any) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _text_of(el: Any) -> str:
    return normalize_inline("".join(el.itertext()))


def _html_to_text(fragment: str) -> str:
    """Feed descriptions are often escaped HTML; keep their words only."""
    if "<" not in fragment:
        return normalize_inline(fragment)
    try:
        doc = etree.fromstring(
            f"<div>{fragment}</div>".encode(),
            etree.HTMLParser(encoding="utf-8", no_network=True, remove_comments=True),
        )
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return normalize_inline(fragment)
    if doc is None:
        return ""
    for bad in doc.iter("script", "style"):
        bad.text = ""
    return normalize_inline(" ".join(doc.itertext()))


def _child(el: Any, *names: str) -> Any:
    for child in el:
        if _local(child.tag) in names:
            return child
    return None


def _feed_link(el: Any) -> str:
    for child in el:
        if _local(child.tag) == "link":
            href = str(child.get("href") or "").strip()
            if href and child.get("rel", "alternate") == "alternate":
                return href
            text = str(child.text or "").strip()
            if text:
                return text
    return ""


def _render_feed(root: Any) -> tuple[str | None, str]:
    """RSS 2.0 / RSS 1.0 (RDF) / Atom: a title, then one section per item."""
    top = root
    if _local(root.tag) == "rss":
        top = _child(root, "channel")
        if top is None:
            top = root
    title_el = _child(top, "title")
    title = _text_of(title_el) if title_el is not None else None
    blocks: list[str] = []
    if title:
        blocks.append("# " + title)
    desc = _child(top, "description", "subtitle")
    if desc is not None and _text_of(desc):
        blocks.append(_html_to_text(desc.text or _text_of(desc)))
    items = [c for c in top.iter() if _local(c.tag) in ("item", "entry")]
    for item in items:
        t_el = _child(item, "title")
        item_title = _text_of(t_el) if t_el is not None else ""
        link = _feed_link(item)
        head = f"[{item_title or link}]({link})" if link else item_title
        if head:
            blocks.append("## " + head)
        date = _child(item, "pubdate", "updated", "published", "date")
        if date is not None and _text_of(date):
            blocks.append(_text_of(date))
        body = _child(item, "description", "summary", "content", "encoded")
        if body is not None:
            text = _html_to_text(body.text or "".join(body.itertext()))
            if text:
                blocks.append(text)
    return title, "\n\n".join(blocks)


def render_xml(body_utf8: bytes) -> tuple[str | None, str]:
    """Feeds become item lists; other XML becomes its text, one element per line."""
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        remove_comments=True,
        remove_pis=True,
        huge_tree=False,
        recover=True,
    )
    try:
        root = etree.fromstring(body_utf8, parser)
    except (etree.XMLSyntaxError, ValueError):
        root = None
    if root is None:
        return None, body_utf8.decode("utf-8", errors="replace")
    if _local(root.tag) in ("rss", "feed", "rdf"):
        return _render_feed(root)
    return None, "\n".join(_xml_lines(root))


def _xml_lines(root: Any) -> list[str]:
    """One line per element with text; an element with mixed content (a child followed by
    more text, ``<a>Why <b>x</b> are great</a>``) is one line of all its text."""
    lines: list[str] = []
    stack = [root]
    while stack:
        el = stack.pop()
        children = [c for c in el if isinstance(c.tag, str)]
        if any(c.tail and c.tail.strip() for c in children):
            line = _text_of(el)
            if line:
                lines.append(line)
            continue
        if el.text and el.text.strip():
            lines.append(normalize_inline(el.text))
        stack.extend(reversed(children))
    return lines


class _OverBudget(Exception):
    """Raised from pypdf's operator visitor to stop extraction (pypdf re-raises it)."""


def render_pdf(
    body: bytes,
    *,
    max_pages: int = DEFAULT_MAX_PDF_PAGES,
    max_chars: int | None = None,
    time_budget_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[str | None, str, bool]:
    """The text layer of a PDF, ``--- page N ---`` before each page (N from 1), with its
    line and paragraph breaks (``pdftext.page_text``), and whether a budget (pages,
    ``max_chars`` of text, ``time_budget_s``) cut it short."""
    deadline = None if time_budget_s is None else clock() + time_budget_s
    left = max_chars
    over = False

    def watch(*_: Any) -> None:
        # Called by pypdf before every content-stream operator, also inside form XObjects.
        if deadline is not None and clock() > deadline:
            raise _OverBudget

    try:
        reader = PdfReader(io.BytesIO(body), strict=False)
        parts: list[str] = []
        for n, page in enumerate(reader.pages, start=1):
            if n > max_pages:
                parts.append(f"--- {len(reader.pages) - max_pages} more pages not rendered ---")
                over = True
                break
            try:
                text = page_text(page, watch)
            except _OverBudget:
                parts.append(f"--- page {n}: stopped, the PDF took too long to read ---")
                over = True
                break
            parts.append(f"--- page {n} ---\n{text}" if text else f"--- page {n} ---")
            if left is not None:
                left -= len(parts[-1])
                if left < 0:
                    over = True
                    break
        title = None
        meta = reader.metadata
        if meta is not None and meta.title:
            title = str(meta.title).strip() or None
    except _PDF_ERRORS as exc:
        raise UnsupportedContentType(
            f"the PDF could not be read: {type(exc).__name__}",
            hint="The file is damaged or encrypted; fetch another copy or another format.",
        ) from exc
    return title, "\n\n".join(parts), over
