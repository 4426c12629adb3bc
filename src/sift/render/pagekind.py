"""The page's type: article, forum, product, listing, collection, service, documentation, other.

A small tree ensemble (``learned.load_model().ensembles["page_type"]``, trained on WCXB's labels by
``bench/train_extract.py``) reads one row of page-level features: the types the page
declares (JSON-LD ``@type``, microdata, ``og:type``), its structure (how many headings,
list items, table cells, code blocks, images, ``<time>``s, teaser cards, sections), how its
text reads (total, link share, paragraph share, share in lists, tables and code, sentence
endings, currency amounts) and class/id words that name page parts (``price``, ``cart``,
``comment``, ``reply``, ``toc``, ``card`` …). Never the URL or the site.

``other`` is the answer when the best class is less likely than ``OTHER_BELOW``, and when
there is no model.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Any, Literal

from lxml import etree

from sift.render.extract import Selection
from sift.render.pagetype import PageInfo

PageType = Literal[
    "article", "forum", "product", "listing", "collection", "service", "documentation", "other"
]
PAGE_TYPES: tuple[str, ...] = (
    "article",
    "forum",
    "product",
    "listing",
    "collection",
    "service",
    "documentation",
)
OTHER_BELOW = 0.4

_DECLARED: dict[str, frozenset[str]] = {
    "decl_article": frozenset(
        {"article", "newsarticle", "blogposting", "reportagenewsarticle", "analysisnewsarticle"}
    ),
    "decl_forum": frozenset(
        {"discussionforumposting", "qapage", "question", "answer", "comment", "socialmediaposting"}
    ),
    "decl_product": frozenset(
        {"product", "productgroup", "offer", "aggregateoffer", "individualproduct"}
    ),
    "decl_list": frozenset(
        {"itemlist", "collectionpage", "searchresultspage", "offercatalog", "listitem"}
    ),
    "decl_service": frozenset(
        {"service", "organization", "localbusiness", "corporation", "softwareapplication"}
    ),
    "decl_docs": frozenset({"techarticle", "apireference", "softwaresourcecode", "howto"}),
    "decl_faq": frozenset({"faqpage"}),
    "decl_website": frozenset({"website", "webpage"}),
    "decl_review": frozenset({"review", "aggregaterating", "rating"}),
    "decl_person": frozenset({"person", "profilepage"}),
    "decl_breadcrumb": frozenset({"breadcrumblist"}),
    "decl_event": frozenset({"event", "recipe", "course", "jobposting", "place"}),
}
_COUNTED = (
    "h1",
    "h2",
    "h3",
    "h4",
    "p",
    "a",
    "ul",
    "li",
    "dl",
    "table",
    "td",
    "pre",
    "code",
    "img",
    "time",
    "section",
    "article",
    "blockquote",
    "figure",
)
_CLASS_WORDS: dict[str, tuple[str, ...]] = {
    "cls_price": ("price", "cart", "basket", "sku", "checkout", "stock"),
    "cls_comment": ("comment", "reply", "thread", "post", "message", "topic", "forum"),
    "cls_docs": ("doc", "toc", "api", "highlight", "syntax", "sidebar", "markdown"),
    "cls_card": ("card", "grid", "tile", "item", "teaser", "result", "listing", "product"),
    "cls_hero": ("hero", "cta", "feature", "pricing", "testimonial", "banner", "landing"),
    "cls_article": ("article", "entry", "story", "byline", "author", "headline"),
    "cls_rating": ("rating", "review", "star", "score", "vote"),
    "cls_avatar": ("avatar", "user", "profile", "member", "signature", "quote"),
    "cls_filter": ("filter", "facet", "sort", "pagination", "pager", "paging", "search"),
    "cls_nav": ("nav", "menu", "breadcrumb", "footer", "header"),
    "cls_contact": ("contact", "address", "phone", "hours", "team", "about", "service"),
}
_STEMS = tuple(tuple(stem.encode() for stem in stems) for stems in _CLASS_WORDS.values())
_PLAIN = etree.XPath("string()", smart_strings=False)
_CURRENCY_MARKS = ("$", "€", "£", "¥", "USD", "EUR", "GBP")
# A currency sign before a number, or a number before a sign or code. Written to start with
# one character class (the branch chosen by a lookbehind), so the regex engine skips to
# candidates in C; the matches are those of r"[$€£¥]\s?\d|\d\s?(?:€|USD|EUR|GBP)\b".
_CURRENCY = re.compile(r"[$€£¥\d](?:(?<=[$€£¥])\s?\d|(?<=\d)\s?(?:€|USD|EUR|GBP)\b)")

PAGE_FEATURES: tuple[str, ...] = (
    *_DECLARED,
    "og_article",
    "og_product",
    "og_website",
    *(f"n_{t}" for t in _COUNTED),
    *_CLASS_WORDS,
    "log_chars",
    "link_share",
    "para_share",
    "li_share",
    "td_share",
    "pre_share",
    "container_share",
    "listing",
    "cards",
    "currency",
    "log_types",
)


def _declared(info: PageInfo) -> list[float]:
    return [float(bool(info.types & names)) for names in _DECLARED.values()]


def page_features(body: Any, info: PageInfo, sel: Selection) -> list[float]:
    """One row of ``PAGE_FEATURES`` for a cleaned page and the rules' selection of it."""
    t = sel.tree
    assert t is not None
    # Tags counted over the tree's own list (read once by ``PageTree``), in C.
    tally = Counter(t.tags)
    counts = {tag: tally[tag] for tag in _COUNTED}
    text_in = {"li": 0, "td": 0, "pre": 0}
    own = t.own
    for i, tag in enumerate(t.tags):
        if tag in text_in:
            text_in[tag] += own[i]
    # Class words: the letter runs of the class attributes that start with a group's stems
    # (runs counted in C; each distinct run judged once per process).
    words = [0] * len(_CLASS_WORDS)
    for run, n in Counter(_letter_runs(_class_text(body, t))).items():
        for k in _run_groups(run):
            words[k] += n
    total = t.total[0] or 1
    og = {x for x in info.types if x in ("article", "product", "website")}
    row = _declared(info)
    row += [float("article" in og), float("product" in og), float("website" in og)]
    row += [math.log1p(counts[tag]) for tag in _COUNTED]
    row += [math.log1p(w) for w in words]
    row += [
        math.log1p(t.total[0]),
        t.link[0] / total,
        t.para[0] / total,
        text_in["li"] / total,
        text_in["td"] / total,
        text_in["pre"] / total,
        sel.chosen_chars / total,
        float(sel.listing),
        math.log1p(len(sel.cards)),
        math.log1p(_currency(body) if t.total[0] < 2_000_000 else 0),
        math.log1p(len(info.types)),
    ]
    return row


# [a-z] runs found in C: every byte but a-z becomes a space (non-ASCII bytes included, as
# the regex [a-z]+ never matches them), then bytes.split.
_RUN_BYTES = bytes(c if 97 <= c <= 122 else 32 for c in range(256))


def _letter_runs(text: str) -> list[bytes]:
    """The [a-z]+ runs of ``text`` lower-cased, as bytes."""
    return text.lower().encode("utf-8", "surrogatepass").translate(_RUN_BYTES).split()


def _class_text(body: Any, t: Any) -> str:
    """The class values of the page (the tree's, read once by ``PageTree``, and the root's
    above ``body``), joined by spaces."""
    values = [v for items in t.items if items for name, v in items if name == "class"]
    above = body.getparent()
    while above is not None:  # <html>'s class (a page type, like <body>'s)
        cls = above.get("class")
        if cls is not None:
            values.insert(0, cls)
        above = above.getparent()
    return " ".join(values)


@lru_cache(maxsize=16384)
def _run_groups(run: bytes) -> tuple[int, ...]:
    """The ``_CLASS_WORDS`` groups (by position) with a stem that starts ``run``."""
    return tuple(k for k, stems in enumerate(_STEMS) if run.startswith(stems))


def _currency(body: Any) -> int:
    """Currency amounts in the page's text (its text nodes joined in C; the regex only runs
    when a symbol or code is there)."""
    plain = _PLAIN(body)
    if not any(mark in plain for mark in _CURRENCY_MARKS):
        return 0
    return len(_CURRENCY.findall(plain))


def page_type(model: Any, row: list[float]) -> str:  # model: a model.Model (it imports us)
    """The classifier's type for a page-feature row; ``other`` when unsure or no model."""
    return classify(model, row)[0]


def classify(model: Any, row: list[float]) -> tuple[str, bool]:
    """The page's type, and whether it is so surely an article that the rules decide its
    content alone (the model's ``rules_above``: measured, the rules are as good there and
    cost a fraction of the block model)."""
    ens = model.ensembles.get("page_type") if model is not None else None
    if ens is None:
        return "other", False
    probs = ens.probabilities(row)
    k = probs.index(max(probs))
    kind = ens.classes[k] if probs[k] >= OTHER_BELOW else "other"
    article = ens.classes.index("article") if "article" in ens.classes else -1
    return kind, article >= 0 and probs[article] >= ens.rules_above
