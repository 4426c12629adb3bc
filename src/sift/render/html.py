"""HTML → markdown, text or cleaned HTML: parse, clean, select, emit.

Order of work: parse (libxml2), note the title, language, ``<base>`` and script weight, drop
never-visible elements, apply the caller's ``exclude`` then ``selector``, pick the article
(``extract.select``) unless ``main_content`` is off, and emit. When the article pass keeps
almost nothing of a page that has plenty of text, the whole page is rendered instead and the
``thin_content`` warning says so; a page of scripts with next to no text gets
``js_required_suspected``.

Output is bounded by ``options.max_bytes``: the emitters stop past it and the result is cut
there, with the ``render_budget_exceeded`` warning.
"""

from __future__ import annotations

import copy
import gc
import re
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from lxml import etree

from sift.errors import BadRequest
from sift.render import dom, jsshell, metadata, pagetype
from sift.render.cap import cap
from sift.render.extract import is_title_heading, norm
from sift.render.learned import DEFAULT_MODEL, THIN_CHARS, THIN_FACTOR, choose, load_model
from sift.render.markdown import Emitter, escape_paragraph, normalize_inline
from sift.render.options import Rendered, RenderOptions
from sift.render.pagetree import chars

# Main content shorter than this, on a page with several times more text, is "thin".
# (learned.py applies the same test to the rules' pick before the model may replace it.)
THIN_CONTENT_CHARS = THIN_CHARS
THIN_PAGE_FACTOR = THIN_FACTOR
_KEEP_ATTRS = frozenset({"href", "src", "alt", "title", "colspan", "rowspan", "lang", "start"})


def compile_selector(selector: str) -> Any:
    """A compiled CSS selector; invalid ones raise ``BadRequest`` with a hint."""
    from cssselect import SelectorError
    from lxml.cssselect import CSSSelector

    try:
        return CSSSelector(selector)
    except (SelectorError, SyntaxError, ValueError) as exc:
        raise BadRequest(
            f"invalid CSS selector {selector!r}: {exc}",
            hint="Use a CSS3 selector such as 'article', 'div.content' or '#main p'.",
        ) from exc


@dataclass
class Page:
    """A parsed, cleaned page and what was read from it before cleaning."""

    root: Any
    body: Any
    title: str | None
    lang: str | None
    base_url: str
    js_shell: str | None  # why the visible text needs JavaScript (jsshell.REASONS), or None
    info: pagetype.PageInfo
    metadata: dict[str, Any]
    attrs: dom.Attrs  # every element's attributes as ``dom.clean`` read them


def prepare(body_utf8: bytes, *, url: str, excludes: list[Any] | None = None) -> Page | None:
    """Parse, read title, language, ``<base>``, scripts and declared types, then clean
    and apply ``excludes``. None for a body with no tree at all."""
    root = dom.parse_html(body_utf8)
    if root is None:
        return None
    base = dom.base_href(root)
    base_url = url
    if base:
        try:
            base_url = urljoin(url, base)
        except ValueError:
            base_url = url
    title, lang = dom.title_of(root), dom.lang_of(root)
    shell = jsshell.Reader(root)
    info = pagetype.page_info(root)
    meta = metadata.read(root, info, base_url=base_url, lang=lang)
    attrs = dom.clean(root)
    body = root.find("body")
    body = root if body is None else body
    js_shell = jsshell.verdict(shell.signals(body))  # the page as served, before `exclude`
    for sel in excludes or ():
        for el in sel(root):
            dom.remove(el)
    return Page(root, body, title, lang, base_url, js_shell, info, meta, attrs)


def render_html(
    body_utf8: bytes, *, url: str, options: RenderOptions, model: Any = DEFAULT_MODEL
) -> Rendered:
    """Render an HTML document (UTF-8 bytes) per ``options`` (format is not ``raw``).

    ``model``: the block classifier's ``Model`` (default: the shipped one; None: the rules
    alone).

    Python's cycle collector is paused meanwhile: a render allocates tens of thousands of
    short-lived objects (element proxies, attribute lists, feature rows) that hold no
    cycles, and each collection it triggers walks all of them (measured: a few percent of
    the render). Whatever cycles a render leaves are collected after it."""
    if not gc.isenabled():
        return _render_html(body_utf8, url=url, options=options, model=model)
    gc.disable()
    try:
        return _render_html(body_utf8, url=url, options=options, model=model)
    finally:
        gc.enable()


def _render_html(body_utf8: bytes, *, url: str, options: RenderOptions, model: Any) -> Rendered:
    # Compile selectors first: a bad selector is the caller's error whatever the body.
    excludes = [compile_selector(s) for s in options.exclude]
    chooser = compile_selector(options.selector) if options.selector else None
    page = prepare(body_utf8, url=url, excludes=excludes)
    if page is None:
        return Rendered(title=None, lang=None, content="", extractor="sift")
    warnings: list[str] = []
    links: list[dict[str, str]] | None = [] if options.links else None
    budget = _Budget(options.max_bytes)
    if chooser is not None:
        return _selected(page, chooser, options, links, budget, warnings)
    body, base_url = page.body, page.base_url
    container: Any = body
    skip = None
    extractor = "sift-page"
    page_chars, best_score = 0, 0.0
    kind: str | None = None
    if options.main_content:
        if model is DEFAULT_MODEL:
            model = load_model()
        chosen, kind = choose(
            body,
            title=page.title,
            info=page.info,
            base_url=base_url,
            model=model,
            attrs=page.attrs,
            url=url,
            meta=page.metadata,
        )
        container, skip, extractor = chosen.container, chosen.skip, "sift"
        page_chars, best_score = chosen.text_chars, chosen.score
    content = _emit(container, skip, options, base_url, links, budget)
    if options.main_content:
        kept = _visible_chars(content, options.format)
        no_prose = best_score <= 0 and page_chars > kept  # every subtree is mostly links
        thin = kept < THIN_CONTENT_CHARS and page_chars > THIN_PAGE_FACTOR * max(kept, 1)
        if thin or no_prose:
            # Too little survived: give the whole page rather than a fragment.
            warnings.append("thin_content")
            if links is not None:
                links.clear()
            budget = _Budget(options.max_bytes)
            content = _emit(body, None, options, base_url, links, budget)
            extractor = "sift-page"
        if options.format == "markdown" and extractor == "sift":
            content = _with_title_heading(content, body, container, page.title)
        if options.format != "html":
            content = _with_declared_facts(content, page.info, options.format)
    if links is not None:
        links = dom.links_of(body, base_url)  # every link of the page, not only the content's
    content = budget.finish(content, warnings)
    if page.js_shell is not None:
        warnings.append("js_required_suspected")
    return Rendered(
        page.title,
        page.lang,
        content,
        links or [],
        warnings,
        extractor,
        kind,
        page.metadata,
        js_shell=page.js_shell,
    )


def _selected(
    page: Page,
    chooser: Any,
    options: RenderOptions,
    links: list[dict[str, str]] | None,
    budget: _Budget,
    warnings: list[str],
) -> Rendered:
    """The result of a render with the caller's selector."""
    content = _render_selected(page, chooser, options, links, budget, warnings)
    if page.js_shell is not None:
        warnings.append("js_required_suspected")
    return Rendered(
        page.title,
        page.lang,
        content,
        links or [],
        warnings,
        "sift-selector",
        metadata=page.metadata,
        js_shell=page.js_shell,
    )


def _render_selected(
    page: Page,
    chooser: Any,
    options: RenderOptions,
    links: list[dict[str, str]] | None,
    budget: _Budget,
    warnings: list[str],
) -> str:
    """Every element the caller's selector matches, in full, in document order."""
    matched = [el for el in chooser(page.root) if el is not page.root]
    if not matched:
        warnings.append("selector_no_match")
    # A set, so finding nested matches is linear in matches x depth, not quadratic.
    matched_set = set(matched)
    top = [el for el in matched if not any(a in matched_set for a in el.iterancestors())]
    parts = []
    for el in top:
        if budget.left <= 0:
            break
        part = _emit(el, None, options, page.base_url, links, budget)
        if part:
            parts.append(part)
    content = ("\n" if options.format == "html" else "\n\n").join(parts)
    return budget.finish(content, warnings)


def _with_declared_facts(content: str, info: pagetype.PageInfo, fmt: str) -> str:
    """Add what the page declares about itself but does not show: a product's JSON-LD name,
    price and description when the visible text lacks them, and for a page with no visible
    text at all its description (the page is built by JavaScript; this is what it is about).
    """
    extra: list[str] = []
    if info.product:
        seen = _norm_words(content)
        extra = [f for f in pagetype.product_facts(info) if _norm_words(f) not in seen]
    if not content.strip() and info.description:
        extra.append(info.description)
    if not extra:
        return content
    if fmt == "markdown":
        extra = [escape_paragraph(e) for e in extra]
    return "\n\n".join(p for p in (content, *extra) if p)


def _with_title_heading(content: str, body: Any, container: Any, title: str | None) -> str:
    """Markdown opens with the page's ``h1`` when it belongs to the content: an ``h1`` that
    names the document (``is_title_heading``) before the chosen content (the article's
    header above its body) or inside it. Extraction leaves that heading out of the content
    (``Rendered.title`` carries the document title, often with the site's name appended);
    a markdown reader gets it back as the first heading (docs/rendering.md, "The h1")."""
    key = norm(title) if title else ""
    if not key or not content or not isinstance(container.tag, str):
        return content
    # In document order, the h1s up to the container, then the container's own (lxml picks
    # the two tags in C); an h1 after the content heads something else.
    for el in body.iter("h1", container.tag):
        if el is container:
            found = next((h for h in el.iter("h1") if is_title_heading(h, key)), None)
            return _prepend_heading(content, found)
        if el.tag == "h1" and is_title_heading(el, key):
            return _prepend_heading(content, el)
    return content


def _prepend_heading(content: str, h1: Any) -> str:
    if h1 is None:
        return content
    text = " ".join(normalize_inline("".join(h1.itertext())).split())
    heading = f"# {text}"
    if not text or content.startswith(heading):
        return content
    return f"{heading}\n\n{content}"


def _norm_words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


_MD_TARGET = re.compile(r"\]\([^)\s]*\)")
_TAG = re.compile(r"<[^>]*>")


def _visible_chars(content: str, fmt: str) -> int:
    """Characters a reader sees, whitespace left out (the unit of the page's own count,
    ``PageTree``): markdown link targets and HTML tags do not count."""
    if fmt == "markdown":
        content = _MD_TARGET.sub("]", content)
    elif fmt == "html":
        content = _TAG.sub("", content)
    return chars(content)


class _Budget:
    """What is left of the output budget (characters; the final cut is in UTF-8 bytes)."""

    def __init__(self, max_bytes: int | None) -> None:
        self.max_bytes = max_bytes
        self.left = sys.maxsize if max_bytes is None else max_bytes
        self.exhausted = False

    def spend(self, text: str, exhausted: bool) -> str:
        self.left -= len(text)
        self.exhausted = self.exhausted or exhausted or self.left < 0
        return text

    def finish(self, content: str, warnings: list[str]) -> str:
        """``content`` cut to the budget at a clean boundary; says so in ``warnings``."""
        if self.max_bytes is None:
            return content
        piece = cap(content, 0, self.max_bytes)
        if self.exhausted or piece.truncated:
            warnings.append("render_budget_exceeded")
        return piece.content


def _emit(
    container: Any,
    skip: Any,
    options: RenderOptions,
    base_url: str,
    links: list[dict[str, str]] | None,
    budget: _Budget,
) -> str:
    try:
        if options.format == "html":
            html, over = _clean_html(container, skip, base_url, links, budget.left)
            return budget.spend(html, over)
        em = Emitter(
            markdown=options.format == "markdown",
            base_url=base_url,
            skip=skip,
            links=links,
            max_chars=budget.left,
        )
        return budget.spend(em.render(container), em.exhausted)
    except RecursionError:
        # Nesting deeper than Python's stack (the parser allows 2048 levels): plain text.
        return budget.spend(dom.flat_text(container), False)


def _clean_html(
    container: Any,
    skip: Any,
    base_url: str,
    links: list[dict[str, str]] | None = None,
    max_chars: int = sys.maxsize,
) -> tuple[str, bool]:
    """The container as minimal HTML: skipped chrome removed, presentational attributes
    dropped, links and images made absolute. Also says whether ``max_chars`` ran out: then
    the rest of the links are dropped rather than made absolute (each can grow by the
    length of the base URL), so the copy never outgrows the page plus the budget."""
    doomed = [el for el in container.iter() if skip is not None and skip(el)]
    # Mark doomed nodes so they can be found again in the copy.
    for i, el in enumerate(doomed):
        el.set("data-sift-drop", str(i))
    try:
        clone = copy.deepcopy(container)
    finally:
        for el in doomed:
            el.attrib.pop("data-sift-drop", None)
    for el in [e for e in clone.iter() if e.get("data-sift-drop") is not None]:
        dom.remove(el)
    grown = 0
    for el in clone.iter():
        for name in [a for a in el.attrib if a not in _KEEP_ATTRS]:
            del el.attrib[name]
        for name in ("href", "src"):
            value = el.get(name)
            if value:
                if grown > max_chars or value.strip().lower().startswith(("javascript:", "data:")):
                    del el.attrib[name]
                    continue
                try:
                    absolute = urljoin(base_url, value.strip())
                    el.set(name, absolute)
                    grown += len(absolute)
                except ValueError:
                    del el.attrib[name]
        if links is not None and el.tag == "a" and el.get("href"):
            text = " ".join("".join(el.itertext()).split())
            if text:
                links.append({"text": text, "url": el.get("href") or ""})
    clone.tail = None
    html: str = etree.tostring(clone, method="html", encoding="unicode")
    return html.strip(), grown > max_chars
