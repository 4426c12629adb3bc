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
_BREAKOUT_TAGS = tuple(sorted(_FOREIGN_BREAKOUT))


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
        # One walk in C finds both kinds of element to repair (each walk costs a page).
        found = list(root.iter("svg", "math", "image"))
        if found:
            _repair_foreign([el for el in found if el.tag != "image"])
            _repair_image([el for el in found if el.tag == "image"])
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


def _repair_foreign(found: list[Any]) -> None:
    """Move HTML swallowed by an unclosed ``<svg>``/``<math>`` (``found``, every one of the
    page in document order) out after it, in order."""
    # The common case, decided in C: no HTML element inside any svg/math (lxml looks for
    # the breakout tags inside each one, without a Python step per node).
    swallowing = [f for f in found if next(f.iter(*_BREAKOUT_TAGS), None) is not None]
    for foreign in swallowing:
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


def _repair_image(found: list[Any]) -> None:
    """``<image>`` outside SVG is ``<img>`` to a browser: a void element, not a container
    (``found``: every ``<image>`` of the page)."""
    for el in found:
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
_STRIP_NODES = (etree.Comment, etree.ProcessingInstruction, etree.Entity, *_STRIP_TAGS)
# Elements never judged hidden: removed anyway, or (noscript) judged on their own.
_NOT_HIDDEN = DROP_TAGS | {"noscript"}
# Every element's attributes (``el.items()``) for the elements that have any, in document
# order, as ``clean`` read them (elements it removed included).
Attrs = dict[Any, list[tuple[str, str]]]


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


def _hides(items: list[tuple[str, str]]) -> bool:
    """``is_hidden`` from an element's attribute list."""
    for name, value in items:
        if name == "class":
            if _hidden_class(value):
                return True
        elif name == "style":
            if _hidden_style(value):
                return True
        elif name == "hidden" or (name == "aria-hidden" and value == "true"):
            return True
    return False


# Pages repeat their class and style values: each distinct value is judged once per process.
# Every name in HIDDEN_CLASSES holds one of these: a value without any is decided by a few
# substring searches in C (most class values are new to a page, so this path is common).
_HIDDEN_PARTS = re.compile("hid|none|invisible|sr-only|screen-reader|offscreen")


@lru_cache(maxsize=8192)
def _hidden_class(value: str) -> bool:
    low = value.lower()
    if _HIDDEN_PARTS.search(low) is None:
        return False
    return any(name in HIDDEN_CLASSES for name in low.split())


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


_TEXT_OF = etree.XPath("string()", smart_strings=False)


def chars(el: Any) -> int:
    """Non-whitespace characters of the text under ``el`` (joined and counted in C)."""
    t: str = _TEXT_OF(el)
    return len(t) - t.count(" ") - t.count("\n") - t.count("\t") - t.count("\r")


def clean(root: Any) -> Attrs:
    """Drop never-visible subtrees (scripts, styles, templates, hidden elements, controls).

    Two kinds of "invisible" markup are kept because they hold the page: a hidden wrapper
    (``hidden``, ``visibility:hidden``, ``class="hide"`` …) with most of the page's text,
    which a script reveals once the page loads, and ``<noscript>`` markup when it holds more
    text than everything else (forum and app pages that serve their content only there).
    A ``<button>`` holding a lot of text has swallowed the page (an unclosed tag), so it stays.

    Returns the attributes it read (``Attrs``), for the chrome marks and page features.
    """
    # Whole never-visible subtrees go first, in C (tails kept): the walk below then never
    # visits the thousands of elements inside icons and embedded documents. Comments, PIs
    # and entities left by the parser go with them.
    # (A button is judged by all the text it held, as before the strip.)
    big_buttons = {el for el in root.iter("button") if chars(el) > BUTTON_MAX_CHARS}
    etree.strip_elements(root, *_STRIP_NODES, with_tail=False)
    # The remaining control tags and <noscript>: lxml picks both in one walk, in C.
    doomed: list[Any] = []
    noscripts: list[Any] = []
    for el in root.iter("button", "noscript"):
        if el.tag == "noscript":
            noscripts.append(el)
        elif el not in big_buttons:
            doomed.append(el)
    # One walk reads every element's attributes once (each lxml read costs about a Python
    # call): the hidden elements come from it, and chrome marks and page features reuse it.
    attrs: Attrs = {}
    for el in root.iter():
        items = el.items()
        if items:
            attrs[el] = items
    hidden = [el for el, items in attrs.items() if _hides(items) and el.tag not in _NOT_HIDDEN]
    for el in doomed:
        # A doomed element inside an already removed one is simply detached with it.
        remove(el)
    if not hidden and not noscripts:
        return attrs
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
    return attrs


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


def text_len(parts: Iterable[str | None], enough: int | None = None) -> int:
    """Length of the visible words in ``parts`` (whitespace runs count as one); with
    ``enough``, counting stops once it is reached (the result is then at least ``enough``)."""
    if enough is None:
        return sum(map(len, map(" ".join, map(str.split, filter(None, parts)))))
    n = 0
    for p in parts:
        if p:
            n += len(" ".join(p.split()))
            if n >= enough:
                break
    return n
