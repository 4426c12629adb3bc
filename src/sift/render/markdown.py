"""One tree walk that turns a cleaned lxml subtree into markdown or plain text.

The walk renders block elements into a list of blocks (strings joined by one blank line) and
inline elements into a flat stream of text. Inline elements that wrap blocks (an ``<a>``
around ``<div>``s) cut the stream with a paragraph sentinel, so no text is lost or glued
together. ``skip`` lets the extractor leave out subtrees (chrome) without copying the tree.

Markdown follows CommonMark + GFM: ATX headings, ``*em*``/``**strong**``, absolute links and
images (``data:`` images dropped), fenced code with the language, pipe tables for data
tables, ``>`` blockquotes and nested lists indented to the parent item's content column.
Text mode writes the same blocks without markup (list items keep a ``- `` bullet, table
cells are tab separated).

Bounded output: ``max_chars`` is a budget for everything the walk emits (text, link and
image URLs, table cells); past it the walk stops and ``exhausted`` is set. Tables are never
padded (GFM fills short rows itself), and lists and blockquotes nest visibly only
``MAX_NEST`` deep (deeper ones are written flat), so output stays linear in the input.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import urljoin

_BREAK = "\x00"  # paragraph break inside an inline stream
_NEWLINE = "\x01"  # hard line break (<br>) inside an inline stream
_WS = re.compile(r"[ \t\n\r\f\v\u00a0\u200b]+")
# Only the whitespace that needs rewriting: runs, and any single non-space blank.
_WS_ODD = re.compile(r"[ \t\n\r\f\v\u00a0\u200b]{2,}|[\t\n\r\f\v\u00a0\u200b]")
_BIG_TEXT_CHARS = 65536
_SPLIT_BREAK = re.compile(r"\s*\x00\s*")
_MD_ESCAPE = re.compile(r"([\\`*\[\]])")
_LINE_START = re.compile(r"^(#{1,6}\s|[-+*]\s|\d{1,9}[.)]\s|>|={3,}|-{3,})")
_LANG = re.compile(r"(?:^|\s)(?:language|lang|highlight|brush:?)-?([A-Za-z0-9_+#.-]+)")

BLOCK_TAGS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "center",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "html",
        "li",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "caption",
        "legend",
        "noscript",
    }
)
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_IMG_SRC_ATTRS = ("src", "data-src", "data-lazy-src", "data-original", "data-url")
# Lists and blockquotes deeper than this are written without more indentation or "> "
# (each level would otherwise repeat its prefix on every line below it: quadratic output).
MAX_NEST = 8


def normalize_inline(text: str) -> str:
    """Collapse whitespace runs to one space and turn hard-break sentinels into newlines."""
    if len(text) > _BIG_TEXT_CHARS:
        # str.split is linear C code; the regex engine is ~10x slower on huge inputs.
        text = " ".join(text.replace("\u200b", " ").split())
    else:
        text = _WS_ODD.sub(" ", text).strip()
    if _NEWLINE in text:
        text = "\n".join(part.strip() for part in text.split(_NEWLINE))
        text = text.strip("\n")
        text = re.sub(r"\n{2,}", "\n", text)
    return text


class Emitter:
    """Renders a subtree to markdown (``markdown=True``) or plain text.

    ``base_url`` resolves relative links and images; ``skip(el)`` returning True leaves an
    element (and its subtree, but not its tail) out; ``links`` collects ``{text, url}`` for
    every rendered link when not None.
    """

    def __init__(
        self,
        *,
        markdown: bool,
        base_url: str,
        skip: Callable[[Any], bool] | None = None,
        links: list[dict[str, str]] | None = None,
        drop_tags: Collection[str] = (),
        max_chars: int | None = None,
    ) -> None:
        self.markdown = markdown
        self.base_url = base_url
        self.skip = skip
        self.links = links
        self.drop_tags = drop_tags
        self._left = sys.maxsize if max_chars is None else max_chars
        self._nest = 0

    @property
    def exhausted(self) -> bool:
        """True once the output budget ran out (the output then ends early)."""
        return self._left <= 0

    def _spend(self, n: int) -> None:
        self._left -= n

    def _esc(self, text: str) -> str:
        self._left -= len(text)
        return _md_escape(text) if self.markdown else text

    # ---- public -------------------------------------------------------------------------

    def render(self, el: Any) -> str:
        """The subtree's blocks joined by blank lines; no leading/trailing blank lines."""
        blocks = self._blocks(el, include_self=True)
        return "\n\n".join(b for b in blocks if b)

    # ---- blocks -------------------------------------------------------------------------

    def _blocks(self, el: Any, *, include_self: bool = False) -> list[str]:
        tag = el.tag
        if include_self and tag not in BLOCK_TAGS:
            return self._paragraphs(self._inline(el))
        handler = _BLOCK_HANDLERS.get(tag) if include_self else None
        if handler is not None:
            return handler(self, el)
        return self._children_blocks(el)

    def _children_blocks(self, el: Any) -> list[str]:
        out: list[str] = []
        stream: list[str] = []
        if el.text:
            stream.append(self._esc(el.text))
        skip = self.skip
        for child in el:
            if self._left <= 0:
                break
            tag = child.tag
            if not isinstance(tag, str) or tag in self.drop_tags or (skip and skip(child)):
                if child.tail:
                    stream.append(self._esc(child.tail))
                continue
            if tag in BLOCK_TAGS:
                if stream:
                    out.extend(self._paragraphs("".join(stream)))
                    stream = []
                handler = _BLOCK_HANDLERS.get(tag)
                out.extend(handler(self, child) if handler else self._children_blocks(child))
            else:
                stream.append(self._inline(child))
            if child.tail:
                stream.append(self._esc(child.tail))
        if stream:
            out.extend(self._paragraphs("".join(stream)))
        return out

    def _paragraphs(self, stream: str) -> list[str]:
        out = []
        for part in _SPLIT_BREAK.split(stream) if _BREAK in stream else (stream,):
            text = normalize_inline(part)
            if text:
                if self.markdown:
                    text = _escape_line_starts(text)
                out.append(text)
        return out

    def _heading(self, el: Any) -> list[str]:
        text = " ".join(normalize_inline(self._inline_children(el).replace(_BREAK, " ")).split())
        if not text:
            return []
        if self.markdown:
            return ["#" * HEADINGS[el.tag] + " " + text]
        return [text]

    def _list(self, el: Any) -> list[str]:
        ordered = el.tag == "ol"
        n = 1
        if ordered:
            try:
                n = int(el.get("start") or 1)
            except ValueError:
                n = 1
        skip = self.skip
        children = [c for c in el if isinstance(c.tag, str) and not (skip and skip(c))]
        self._nest += 1
        try:
            if self._nest > MAX_NEST:
                # Too deep to indent: the items' blocks, flat, in order.
                return [b for c in children for b in self._blocks(c, include_self=True) if b]
            items: list[str] = []
            for child in children:
                if self._left <= 0:
                    break
                if child.tag == "li":
                    blocks = self._children_blocks(child)
                elif child.tag in ("ul", "ol"):
                    # Invalid but common: a nested list directly inside the list.
                    blocks = self._list(child)
                    if items and blocks:
                        items[-1] += "\n" + _indent("\n\n".join(blocks), "  ")
                        continue
                else:
                    blocks = self._blocks(child, include_self=True)
                blocks = [b for b in blocks if b]
                if not blocks:
                    continue
                marker = f"{n}. " if ordered and self.markdown else "- "  # text: no numbers
                n += 1
                body = "\n".join(blocks) if len(blocks) > 1 else blocks[0]
                pad = " " * len(marker)
                items.append(marker + _indent(body, pad, first=False))
        finally:
            self._nest -= 1
        return ["\n".join(items)] if items else []

    def _pre(self, el: Any) -> list[str]:
        code = "".join(self._pre_text(el))
        code = code.strip("\n")
        if not code.strip():
            return []
        if not self.markdown:
            return [code]
        lang = _code_lang(el)
        fence = "```"
        while fence in code:
            fence += "`"
        return [f"{fence}{lang}\n{code}\n{fence}"]

    def _pre_text(self, el: Any) -> list[str]:
        parts: list[str] = []
        if el.text:
            parts.append(el.text)
            self._spend(len(el.text))
        for child in el:
            if self._left <= 0:
                break
            if isinstance(child.tag, str) and child.tag not in self.drop_tags:
                if child.tag == "br":
                    parts.append("\n")
                else:
                    parts.extend(self._pre_text(child))
            if child.tail:
                parts.append(child.tail)
                self._spend(len(child.tail))
        return parts

    def _blockquote(self, el: Any) -> list[str]:
        self._nest += 1
        try:
            inner = [b for b in self._children_blocks(el) if b]
        finally:
            self._nest -= 1
        if not inner:
            return []
        if not self.markdown or self._nest >= MAX_NEST:
            return inner
        text = "\n\n".join(inner)
        return ["\n".join(("> " + line) if line else ">" for line in text.split("\n"))]

    def _hr(self, el: Any) -> list[str]:
        return ["---"] if self.markdown else []

    def _table(self, el: Any) -> list[str]:
        rows = _table_rows(el)
        if not rows or not _is_data_table(el, rows):
            return self._children_blocks(el)
        grid: list[list[str]] = []
        for row in rows:
            if self._left <= 0:
                break
            cells = []
            for cell in row:
                text = self._inline_children(cell).replace(_BREAK, " ").replace(_NEWLINE, " ")
                text = normalize_inline(text)
                cells.append(text.replace("|", "\\|") if self.markdown else text)
            grid.append(cells)
        if not any(any(c for c in r) for r in grid):
            return []
        # Short rows are filled out to the widest one only while the filling is no bigger
        # than the table itself: one very wide row over many short ones would otherwise
        # multiply (GFM fills short body rows itself; the header row is always filled).
        width = max(len(r) for r in grid)
        missing = sum(width - len(r) for r in grid)
        for r in grid if missing <= sum(len(r) for r in grid) else grid[:1]:
            r.extend([""] * (width - len(r)))
        self._spend(6 * width)
        if not self.markdown:
            return ["\n".join("\t".join(r).rstrip() for r in grid)]
        lines = ["| " + " | ".join(grid[0]) + " |", "|" + " --- |" * width]
        lines.extend("| " + " | ".join(r) + " |" for r in grid[1:])
        return ["\n".join(lines)]

    # ---- inline -------------------------------------------------------------------------

    def _inline(self, el: Any) -> str:
        tag = el.tag
        if tag == "br":
            return _NEWLINE
        if tag == "img":
            return self._img(el)
        if tag in BLOCK_TAGS:
            # A block inside an inline context (invalid HTML, or <a> wrapping <div>s).
            return _BREAK + _BREAK.join(self._blocks(el, include_self=True)) + _BREAK
        inner = self._inline_children(el)
        if not self.markdown:
            return inner
        if tag == "a":
            return self._link(el, inner)
        if tag in ("em", "i", "cite", "dfn", "var"):
            return _wrap(inner, "*")
        if tag in ("strong", "b"):
            return _wrap(inner, "**")
        if tag in ("code", "kbd", "samp", "tt"):
            text = _WS.sub(" ", inner.replace(_BREAK, " ").replace(_NEWLINE, " "))
            if not text.strip():
                return text
            tick = "``" if "`" in text else "`"
            return f"{tick}{text.strip()}{tick}"
        return inner

    def _inline_children(self, el: Any) -> str:
        parts: list[str] = []
        if el.text:
            parts.append(self._esc(el.text))
        skip = self.skip
        for child in el:
            if self._left <= 0:
                break
            tag = child.tag
            if isinstance(tag, str) and tag not in self.drop_tags and not (skip and skip(child)):
                parts.append(self._inline(child))
            if child.tail:
                parts.append(self._esc(child.tail))
        return "".join(parts)

    def _link(self, el: Any, inner: str) -> str:
        href = (el.get("href") or "").strip()
        text = inner
        if not href or href.startswith(("#", "javascript:", "mailto:", "tel:", "data:")):
            return text
        if _BREAK in text or not text.strip():
            return text
        url = self._absolute(href)
        self._spend(len(url))
        if self.links is not None:
            self.links.append({"text": normalize_inline(text.replace("\\", "")), "url": url})
        lead = text[: len(text) - len(text.lstrip())]
        trail = text[len(text.rstrip()) :]
        url = url.replace(" ", "%20").replace(")", "%29").replace("(", "%28")
        return f"{lead}[{text.strip()}]({url}){trail}"

    def _img(self, el: Any) -> str:
        if not self.markdown:
            return ""
        src = ""
        for attr in _IMG_SRC_ATTRS:
            value = (el.get(attr) or "").strip()
            if value and not value.startswith("data:"):
                src = value
                break
        if not src:
            return ""
        alt = normalize_inline(el.get("alt") or "").replace("[", "").replace("]", "")
        self._spend(len(alt) + len(src) + len(self.base_url))
        url = self._absolute(src).replace(" ", "%20").replace(")", "%29").replace("(", "%28")
        return f" ![{alt}]({url}) "

    def _absolute(self, href: str) -> str:
        try:
            return urljoin(self.base_url, href)
        except ValueError:
            return href


def _wrap(inner: str, mark: str) -> str:
    if _BREAK in inner:
        return inner
    core = inner.strip()
    if not core or not _WS.sub("", core.replace(_NEWLINE, "")):
        return inner
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()) :]
    return f"{lead}{mark}{core}{mark}{trail}"


def _indent(text: str, pad: str, *, first: bool = True) -> str:
    lines = text.split("\n")
    out = [lines[0] if not first else (pad + lines[0] if lines[0] else "")]
    out.extend(pad + line if line else "" for line in lines[1:])
    return "\n".join(out)


def escape_paragraph(text: str) -> str:
    """Plain text as one markdown paragraph: markup characters and line starts escaped."""
    return _escape_line_starts(_md_escape(text))


def _md_escape(text: str) -> str:
    """``text`` with the characters markdown would read as markup backslash-escaped. Most
    text holds none of them: five substring tests in C decide that before any regex."""
    if "*" in text or "[" in text or "]" in text or "`" in text or "\\" in text:
        return _MD_ESCAPE.sub(r"\\\1", text)
    return text


def _escape_line_starts(text: str) -> str:
    """Keep paragraph text from turning into headings, list items or quotes."""
    if "\n" not in text:
        return "\\" + text if _LINE_START.match(text) else text
    return "\n".join("\\" + ln if _LINE_START.match(ln) else ln for ln in text.split("\n"))


def _code_lang(el: Any) -> str:
    for node in (el, *el.iter("code")):
        cls = node.get("class") or ""
        m = _LANG.search(cls)
        if m:
            return m.group(1).lower()
        lang = str(node.get("data-lang") or node.get("data-language") or "").strip()
        if lang:
            return lang.lower()
    return ""


def _table_rows(table: Any) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for child in table:
        if child.tag == "tr":
            rows.append([c for c in child if c.tag in ("td", "th")])
        elif child.tag in ("thead", "tbody", "tfoot"):
            for tr in child:
                if tr.tag == "tr":
                    rows.append([c for c in tr if c.tag in ("td", "th")])
    return [r for r in rows if r]


_LAYOUT_INSIDE = ("table", "p", "div", "ul", "ol", "pre", "blockquote", "h1", "h2", "h3")


def _is_data_table(table: Any, rows: list[list[Any]]) -> bool:
    """A table of short cells; layout tables (blocks or tables inside cells) are not."""
    if table.get("role") == "presentation":
        return False
    for row in rows:
        for cell in row:
            for sub in cell.iter(*_LAYOUT_INSIDE):
                if sub is not cell:
                    return False
    return max(len(r) for r in rows) >= 2


_BLOCK_HANDLERS: dict[str, Callable[[Emitter, Any], list[str]]] = {
    **{h: Emitter._heading for h in HEADINGS},
    "ul": Emitter._list,
    "ol": Emitter._list,
    "dir": Emitter._list,
    "pre": Emitter._pre,
    "blockquote": Emitter._blockquote,
    "hr": Emitter._hr,
    "table": Emitter._table,
}
