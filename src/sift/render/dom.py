"""HTML parsing and the cleaning every render shares.

``parse_html`` turns UTF-8 bytes into an lxml tree with bounded cost: libxml2's HTML parser is
iterative, caps nesting depth at 2048 (deeper content is dropped) and never touches the
network. ``clean`` then removes everything that is never
content in any format: scripts, styles, templates, embedded objects, form controls and hidden
elements. Removal keeps each removed element's tail text, so no visible words are lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from lxml import etree

# Elements whose subtree is never visible text.
DROP_TAGS = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "math",
        "canvas",
        "iframe",
        "frame",
        "frameset",
        "object",
        "embed",
        "applet",
        "audio",
        "video",
        "source",
        "track",
        "map",
        "head",
        "link",
        "meta",
        "title",
        "base",
        "input",
        "select",
        "option",
        "optgroup",
        "textarea",
        "button",
        "datalist",
        "dialog",
        "param",
        "picture-source",
    }
)

# Raw class names that mean "not rendered" in every common CSS framework.
HIDDEN_CLASSES = frozenset(
    {
        "hidden",
        "hide",
        "d-none",
        "is-hidden",
        "invisible",
        "sr-only",
        "visually-hidden",
        "visuallyhidden",
        "screen-reader-text",
        "screen-reader-only",
        "offscreen",
        "u-hidden",
    }
)

_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)

_PARSER_OPTS: dict[str, Any] = {
    "remove_comments": True,
    "remove_pis": True,
    "no_network": True,
    "collect_ids": False,
    "default_doctype": False,
    # Lifts libxml2's 10 MB text-node limit (a 50 MB one-line page keeps its text); nesting
    # stays capped at 2048 levels, deeper content is dropped by the parser.
    "huge_tree": True,
}


def parse_html(body_utf8: bytes) -> Any:
    """Parse UTF-8 HTML bytes; returns the root element, or None when nothing parses."""
    if not body_utf8.strip():
        return None
    parser = etree.HTMLParser(encoding="utf-8", **_PARSER_OPTS)
    try:
        root = etree.fromstring(body_utf8, parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None
    return root


def flat_text(root: Any) -> str:
    """All text of ``root``, one line per text node; iterative, for trees too deep to walk."""
    lines = (" ".join(t.split()) for t in root.itertext())
    return "\n".join(line for line in lines if line)


def remove(el: Any) -> None:
    """Remove ``el`` from its parent, keeping its tail text in place."""
    parent = el.getparent()
    if parent is None:
        return
    tail = el.tail
    if tail:
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(el)


def is_hidden(el: Any) -> bool:
    """True when the element is declared invisible by attribute, inline style or class."""
    attrib = el.attrib
    if not attrib:
        return False
    if "hidden" in attrib:
        return True
    if attrib.get("aria-hidden") == "true":
        return True
    style = attrib.get("style")
    if style and _HIDDEN_STYLE.search(style):
        return True
    cls = attrib.get("class")
    if cls:
        for name in cls.split():
            if name.lower() in HIDDEN_CLASSES:
                return True
    return False


def clean(root: Any) -> None:
    """Drop never-visible subtrees (scripts, styles, templates, hidden elements, controls)."""
    doomed: list[Any] = []
    for el in root.iter():
        tag = el.tag
        if not isinstance(tag, str):
            doomed.append(el)  # comments, PIs, entities left by the parser
        elif tag in DROP_TAGS or is_hidden(el):
            doomed.append(el)
    for el in doomed:
        # A doomed element inside an already removed one is simply detached with it.
        remove(el)


def base_href(root: Any) -> str | None:
    """The first ``<base href>`` of the document, if any."""
    for el in root.iter("base"):
        href = str(el.get("href") or "").strip()
        if href:
            return href
    return None


def title_of(root: Any) -> str | None:
    """The document title: ``<title>``, else ``og:title``, else the first ``<h1>``."""
    for el in root.iter("title"):
        text = " ".join("".join(el.itertext()).split())
        if text:
            return text
        break
    for el in root.iter("meta"):
        if el.get("property") == "og:title" or el.get("name") == "twitter:title":
            content = " ".join((el.get("content") or "").split())
            if content:
                return content
    for el in root.iter("h1"):
        text = " ".join("".join(el.itertext()).split())
        if text:
            return text
    return None


def lang_of(root: Any) -> str | None:
    """The document language from ``<html lang>`` or ``content-language`` meta, lowercased."""
    lang = root.get("lang") or root.get("xml:lang")
    if not lang:
        for el in root.iter("meta"):
            if (el.get("http-equiv") or "").lower() == "content-language":
                lang = el.get("content")
                break
    if not lang:
        return None
    lang = lang.strip().split(",")[0].strip().replace("_", "-").lower()
    return lang[:35] or None


def text_len(parts: Iterable[str | None]) -> int:
    """Length of the visible words in ``parts`` (whitespace runs count as one)."""
    return sum(len(" ".join(p.split())) for p in parts if p)
