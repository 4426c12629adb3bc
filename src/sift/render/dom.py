"""HTML parsing and the cleaning every render shares.

``parse_html`` turns UTF-8 bytes into an lxml tree with bounded cost: libxml2's HTML parser is
iterative, caps nesting depth at 2048 (deeper content is dropped) and never touches the
network. Since libxml2 2.14 its tokenizer follows HTML5; its tree builder does not, and three
of its differences lose visible text, so they are repaired to match what a browser builds:
content after ``</body>``/``</html>`` (a browser keeps it in the body; libxml2 drops it or
puts it outside ``<body>``), HTML inside an unclosed ``<svg>``/``<math>`` (a browser closes
the foreign element at the first HTML block; libxml2 leaves the rest of the page inside the
icon) and ``<image>`` (a browser reads ``<img>``; libxml2 opens a container).

``clean`` then removes everything that is never content in any format: scripts, styles,
templates, embedded objects, form controls and hidden elements. Removal keeps each removed
element's tail text, so no visible words are lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin

from lxml import etree

# Elements whose subtree is never visible text.
DROP_TAGS = frozenset(
    {
        "script",
        "style",
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


# HTML5 ignores these end tags (later content still goes into the body); libxml2 does not.
_BODY_END = re.compile(rb"</(?:body|html)\s*>", re.IGNORECASE)

# Start tags that end SVG/MathML foreign content in the HTML5 tree builder ("breakout").
_FOREIGN_BREAKOUT = frozenset(
    {
        *("b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt"),
        *("em", "embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li"),
        *("listing", "menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span"),
        *("strong", "strike", "sub", "sup", "table", "tt", "u", "ul", "var"),
    }
)
# Foreign elements whose content is HTML again (integration points).
_INTEGRATION_POINTS = frozenset(
    {"foreignobject", "desc", "title", "annotation-xml", "mi", "mo", "mn", "ms", "mtext"}
)


def parse_html(body_utf8: bytes) -> Any:
    """Parse UTF-8 HTML bytes; returns the root element, or None when nothing parses."""
    if not body_utf8.strip():
        return None
    parser = etree.HTMLParser(encoding="utf-8", **_PARSER_OPTS)
    try:
        root = etree.fromstring(_BODY_END.sub(b"", body_utf8), parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None
    if root is not None:
        _repair_foreign(root)
        _repair_image(root)
    return root


def _breakout(foreign: Any) -> Any:
    """The first HTML element that would have closed ``foreign`` in a browser, if any."""
    stack = list(reversed(foreign))
    while stack:
        el = stack.pop()
        tag = el.tag
        if not isinstance(tag, str):
            continue
        if tag in _FOREIGN_BREAKOUT:
            return el
        if tag not in _INTEGRATION_POINTS:
            stack.extend(reversed(el))
    return None


_SWALLOWED = etree.XPath(
    "//svg//*[" + " or ".join(f"self::{t}" for t in sorted(_FOREIGN_BREAKOUT)) + "][1]"
    "|//math//*[" + " or ".join(f"self::{t}" for t in sorted(_FOREIGN_BREAKOUT)) + "][1]"
)


def _repair_foreign(root: Any) -> None:
    """Move HTML swallowed by an unclosed ``<svg>``/``<math>`` out after it, in order."""
    if not _SWALLOWED(root):
        return  # the common case, decided in C: no HTML element inside any svg/math
    for foreign in list(root.iter("svg", "math")):
        first = _breakout(foreign)
        if first is None:
            continue
        moved: list[Any] = []
        node = first
        while node is not foreign:
            moved.extend([node, *node.itersiblings()])
            node = node.getparent()
        tail, foreign.tail = foreign.tail, None
        anchor = foreign
        for el in moved:
            anchor.addnext(el)  # lxml moves the element's tail with it
            anchor = el
        if tail:
            anchor.tail = (anchor.tail or "") + tail


def _repair_image(root: Any) -> None:
    """``<image>`` outside SVG is ``<img>`` to a browser: a void element, not a container."""
    for el in list(root.iter("image")):
        if any(a.tag == "svg" for a in el.iterancestors()):
            continue
        el.tag = "img"
        children = list(el)
        text, el.text = el.text, None
        anchor = el
        if text:
            el.tail = text + (el.tail or "")
        for child in children:
            anchor.addnext(child)
            anchor = child


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


_STRIP_TAGS = tuple(sorted(DROP_TAGS - {"button"}))
_MAY_HIDE = etree.XPath("descendant-or-self::*[@hidden or @aria-hidden or @style or @class]")


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
    if style and _hidden_style(style):
        return True
    cls = attrib.get("class")
    return bool(cls) and _hidden_class(cls)


# Pages repeat their class and style values: each distinct value is judged once per process.
@lru_cache(maxsize=8192)
def _hidden_class(value: str) -> bool:
    return any(name.lower() in HIDDEN_CLASSES for name in value.split())


@lru_cache(maxsize=4096)
def _hidden_style(value: str) -> bool:
    return _HIDDEN_STYLE.search(value) is not None


# A hidden element holding more than this share of the page's text is a pre-JavaScript wrapper
# (the page reveals it with a script), not hidden chrome: it is kept.
HIDDEN_WRAPPER_SHARE = 0.5
# Hidden elements with less text than this are never wrappers (spares counting the page).
HIDDEN_WRAPPER_MIN_CHARS = 100
# A button holding more text than this has swallowed content (an unclosed <button>).
BUTTON_MAX_CHARS = 200


def chars(el: Any) -> int:
    """Non-whitespace characters of the text under ``el`` (C-level string counts)."""
    n = 0
    for t in el.itertext():
        n += len(t) - t.count(" ") - t.count("\n") - t.count("\t") - t.count("\r")
    return n


def clean(root: Any) -> None:
    """Drop never-visible subtrees (scripts, styles, templates, hidden elements, controls).

    Two kinds of "invisible" markup are kept because they hold the page: a hidden wrapper
    (``hidden``, ``visibility:hidden``, ``class="hide"`` …) with most of the page's text,
    which a script reveals once the page loads, and ``<noscript>`` markup when it holds more
    text than everything else (forum and app pages that serve their content only there).
    A ``<button>`` holding a lot of text has swallowed the page (an unclosed tag), so it stays.
    """
    doomed: list[Any] = []
    hidden: list[Any] = []
    noscripts: list[Any] = []
    # Whole never-visible subtrees go first, in C (tails kept): the walk below then never
    # visits the thousands of elements inside icons and embedded documents.
    # (A button is judged by all the text it held, as before the strip.)
    big_buttons = {el for el in root.iter("button") if chars(el) > BUTTON_MAX_CHARS}
    etree.strip_elements(root, *_STRIP_TAGS, with_tail=False)
    # Comments, PIs and entities left by the parser, and the remaining control tags, then
    # the elements an attribute may hide: lxml picks each kind in C, in document order.
    doomed.extend(root.iter(etree.Comment, etree.ProcessingInstruction, etree.Entity))
    doomed.extend(el for el in root.iter(*DROP_TAGS) if el not in big_buttons)
    noscripts.extend(root.iter("noscript"))
    for el in _MAY_HIDE(root):
        if el.tag != "noscript" and el.tag not in DROP_TAGS and is_hidden(el):
            hidden.append(el)
    for el in doomed:
        # A doomed element inside an already removed one is simply detached with it.
        remove(el)
    if not hidden and not noscripts:
        return
    total = -1  # the page's text, counted only when a hidden element holds a lot
    dropped: set[Any] = set()
    removed = 0
    for el in hidden:
        if el in dropped:
            continue
        n = chars(el)
        if n > HIDDEN_WRAPPER_MIN_CHARS and total < 0:
            total = chars(root)
        if total >= 0 and n > HIDDEN_WRAPPER_SHARE * total:
            continue  # a pre-JavaScript wrapper around the content
        dropped.update(el.iter())
        removed += n
        remove(el)
    noscripts = [el for el in noscripts if el not in dropped]
    if noscripts:
        inside = sum(chars(el) for el in noscripts)
        if total < 0:  # counted now, after the removals: nothing to subtract
            total, removed = (chars(root) if inside else 0), 0
        keep = inside > total - removed - inside
        for el in noscripts:
            if keep:
                el.tag = "div"  # a fallback that holds the page: ordinary markup
            else:
                remove(el)


def base_href(root: Any) -> str | None:
    """The first ``<base href>`` of the document, if any."""
    for el in root.iter("base"):
        href = str(el.get("href") or "").strip()
        if href:
            return href
    return None


_NOT_LINKS = ("#", "javascript:", "mailto:", "tel:", "data:")


def links_of(root: Any, base_url: str) -> list[dict[str, str]]:
    """Every visible link under ``root`` as ``{text, url}`` (absolute), in document order,
    exact repeats dropped. A link without text is named by its ``aria-label``, ``title`` or
    image ``alt``."""
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for a in root.iter("a"):
        href = str(a.get("href") or "").strip()
        if not href or href.lower().startswith(_NOT_LINKS):
            continue
        try:
            url = urljoin(base_url, href)
        except ValueError:
            continue
        text = " ".join("".join(a.itertext()).split())
        if not text:
            text = str(a.get("aria-label") or a.get("title") or "").strip()
            if not text:
                alts = (str(img.get("alt") or "").strip() for img in a.iter("img"))
                text = next((t for t in alts if t), "")
        key = (text, url)
        if key not in seen:
            seen.add(key)
            out.append({"text": text, "url": url})
    return out


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
