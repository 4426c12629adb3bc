"""Markdown from fetched pages, rendered to HTML that is safe to show in the console.

A fetched page is hostile input: its text can hold ``<script>``, ``onerror=`` or
``javascript:`` links that survive the page → markdown conversion as literal text. Two
independent layers keep it inert:

1. markdown-it-py renders with raw HTML *disabled* (CommonMark otherwise passes ``<tags>``
   through), so HTML written in the markdown comes out as escaped text; it also refuses
   ``javascript:``/``vbscript:``/``data:`` link targets.
2. nh3 (the Ammonia sanitiser) then keeps only an allow-list of tags and attributes of
   the result: no scripts, no event handlers, no styles, no images (an image would make
   the operator's browser contact the page's hosts), links only to http(s)/mailto —
   relative ones resolved against the page's URL, opened in a new tab without a referrer.

The console's Content-Security-Policy (``console/security.py``) is the third layer: even
markup that got through could not run a script.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token

# What a page's markdown may become: text structure, tables, code and links. No img.
ALLOWED_TAGS: Final = frozenset(nh3.ALLOWED_TAGS) - {"img", "area", "map"}
ALLOWED_ATTRIBUTES: Final[dict[str, set[str]]] = {
    "a": {"href", "title"},
    "ol": {"start"},
    "th": {"colspan", "rowspan", "align"},
    "td": {"colspan", "rowspan", "align"},
}
URL_SCHEMES: Final = {"http", "https", "mailto"}


def _image_as_link(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """``![alt](src)`` → a link to the image, labelled with its alt text."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    return f'<a href="{escapeHtml(src)}">[image: {escapeHtml(alt)}]</a>'


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")
    md.add_render_rule("image", _image_as_link)
    return md


_MD: Final = _parser()


def render_markdown(text: str, base_url: str | None = None) -> str:
    """Sanitised HTML for ``text``. ``base_url`` (the page's final URL) resolves relative
    links; without a usable one they are dropped."""
    html = _MD.render(text)
    relative: Any = "deny"
    if base_url and urlsplit(base_url).scheme in ("http", "https"):
        relative = ("rewrite_with_base", base_url)
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags={"script", "style"},
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        url_relative=relative,
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
