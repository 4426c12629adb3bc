"""``render()``: one body in, one ``Rendered`` out, chosen by content type.

Dispatch: HTML (``text/html``, ``application/xhtml+xml``, or an unlabelled body that looks
like HTML) → ``html.render_html``; ``text/plain`` and ``text/markdown`` pass through; JSON is
pretty-printed; XML, RSS and Atom become readable text; PDF becomes text with page markers.
Other types raise ``UnsupportedContentType`` — as does a body labelled as text that is in
fact binary (NUL bytes or mostly control characters), which would otherwise come out as noise.
"""

from __future__ import annotations

import html as html_lib
from dataclasses import replace
from typing import Any

from sift.errors import UnsupportedContentType
from sift.fetch.charset import header_charset
from sift.render import nonhtml
from sift.render.cap import cap
from sift.render.decode import decode, utf8_of
from sift.render.html import compile_selector, render_html
from sift.render.learned import DEFAULT_MODEL
from sift.render.options import Rendered, RenderOptions

# How much of the body is inspected to call it binary.
SNIFF_BYTES = 4096
# Share of control characters above which a "text" body is taken to be binary.
BINARY_CONTROL_SHARE = 0.10

# Share of the render's time limit a PDF's text extraction may use before it stops and keeps
# what it has (the render pool kills the whole render at the limit itself).
PDF_TIME_SHARE = 0.5

# C0 controls other than tab, LF, VT, FF, CR; and DEL.
_CONTROL_BYTES = bytes([*range(0, 9), *range(14, 32), 127])

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/vnd.wap.xhtml+xml"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
_JSON_TYPES = frozenset({"application/json", "text/json", "application/ld+json"})
_XML_TYPES = frozenset(
    {
        "application/xml",
        "text/xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/rdf+xml",
    }
)
_UNLABELLED = frozenset({"", "application/octet-stream", "binary/octet-stream", "unknown/unknown"})


def media_type(content_type: str) -> str:
    """``text/html; charset=utf-8`` → ``text/html``."""
    return content_type.split(";", 1)[0].strip().lower()


def looks_binary(body: bytes) -> bool:
    """True when the first bytes hold NULs or many control characters (not text in any
    of the encodings sift decodes; UTF-16 is recognised by its BOM and excluded)."""
    head = body[:SNIFF_BYTES]
    if not head or head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    if b"\x00" in head:
        return True
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return controls > BINARY_CONTROL_SHARE * len(head)


def _sniff_kind(body: bytes) -> str | None:
    head = body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "pdf"
    if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head or b"<head" in head:
        return "html"
    if head.startswith((b"<?xml", b"<rss", b"<feed")):
        return "xml"
    if head.startswith((b"{", b"[")):
        return "json"
    return None


def _kind_of(mtype: str, body: bytes) -> str:
    if mtype in _HTML_TYPES:
        return "html"
    if mtype == "application/pdf":
        return "pdf"
    if mtype in _JSON_TYPES or mtype.endswith("+json"):
        return "json"
    if mtype in _XML_TYPES or mtype.endswith("+xml"):
        return "xml"
    if mtype in _TEXT_TYPES:
        return "text"
    if mtype in _UNLABELLED:
        sniffed = _sniff_kind(body)
        if sniffed:
            return sniffed
        if not looks_binary(body):
            return "text"
    elif mtype.startswith("text/"):
        return "text"
    raise UnsupportedContentType(f"sift does not render {mtype or 'unlabelled binary'} bodies")


def render(
    body: bytes,
    *,
    content_type: str,
    url: str,
    options: RenderOptions,
    charset: str | None = None,
    model: Any = DEFAULT_MODEL,
) -> Rendered:
    """Render ``body`` (as fetched from ``url``) per ``options``.

    ``charset`` is the one the fetcher determined (HTTP header), if any; else the
    ``charset=`` parameter of ``content_type``; otherwise it is detected. Raises
    ``UnsupportedContentType`` for binaries and ``BadRequest`` for invalid selectors; any
    other input, however malformed, yields a ``Rendered``. ``model`` is the block
    classifier for HTML (default: the shipped one; None: the rules alone).
    """
    for sel in (*options.exclude, *([options.selector] if options.selector else [])):
        compile_selector(sel)
    mtype = media_type(content_type)
    kind = _kind_of(mtype, body)
    if kind == "pdf":
        if options.format == "raw":
            raise UnsupportedContentType(
                "a PDF has no raw text form",
                hint="Ask for format=text or markdown to get the PDF's text.",
            )
        title, content, over = nonhtml.render_pdf(
            body,
            max_chars=options.max_bytes,
            time_budget_s=None if options.timeout_s is None else options.timeout_s * PDF_TIME_SHARE,
        )
        return _wrap(title, content, options, ["render_budget_exceeded"] if over else [], "pypdf")
    if kind != "text" and looks_binary(body):
        raise UnsupportedContentType(
            f"the body is labelled {mtype} but is binary",
            hint="The server sent binary data; fetch a text, HTML, JSON, XML or PDF resource.",
        )
    if kind == "text" and looks_binary(body):
        raise UnsupportedContentType(f"the body is labelled {mtype or 'text'} but is binary")
    declared = charset or header_charset(content_type)
    if kind == "html" and options.format != "raw":
        # The parser reads UTF-8 bytes: valid UTF-8 goes as is, without a decoded copy.
        return render_html(utf8_of(body, declared), url=url, options=options, model=model)
    text, _codec = decode(body, declared)
    if options.format == "raw":
        return _wrap(None, text, replace(options, format="text"), [], "raw")
    if kind == "json":
        content, warnings = nonhtml.render_json(text, options.max_bytes)
        return _wrap(None, content, options, warnings, "json")
    if kind == "xml":
        title, content = nonhtml.render_xml(text.encode("utf-8", errors="replace"))
        return _wrap(title, content, options, [], "xml")
    return _wrap(None, text, options, [], "text")


def _wrap(
    title: str | None, content: str, options: RenderOptions, warnings: list[str], name: str
) -> Rendered:
    """Wrap a non-HTML render (``<pre>`` for format html) and hold it to the output budget."""
    if options.format == "html":
        content = f"<pre>{html_lib.escape(content)}</pre>" if content else ""
    if options.max_bytes is not None and len(content) > options.max_bytes // 4:
        piece = cap(content, 0, options.max_bytes)
        if piece.truncated:
            content = piece.content
            if "render_budget_exceeded" not in warnings:
                warnings = [*warnings, "render_budget_exceeded"]
    return Rendered(title=title, lang=None, content=content, warnings=warnings, extractor=name)
