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
from typing import Any, Literal

from lxml import etree

from sift.render.extract import Selection
from sift.render.model import Model
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
}
_COUNTED = ("h1", "h2", "h3", "li", "td", "pre", "code", "img", "time", "section", "article")
_CLASS_WORDS: dict[str, tuple[str, ...]] = {
    "cls_price": ("price", "cart", "basket", "sku", "checkout", "stock"),
    "cls_comment": ("comment", "reply", "thread", "post", "message", "topic", "forum"),
    "cls_docs": ("doc", "toc", "api", "highlight", "syntax", "sidebar", "markdown"),
    "cls_card": ("card", "grid", "tile", "item", "teaser", "result", "listing", "product"),
    "cls_hero": ("hero", "cta", "feature", "pricing", "testimonial", "banner", "landing"),
    "cls_article": ("article", "entry", "story", "byline", "author", "headline"),
}
_LETTERS = re.compile(r"[a-z]+")
_CLASSES = etree.XPath("//@class", smart_strings=False)
_CURRENCY_MARKS = ("$", "€", "£", "¥", "USD", "EUR", "GBP")
_CURRENCY = re.compile(r"[$€£¥]\s?\d|\d\s?(?:€|USD|EUR|GBP)\b")

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
)


def _declared(info: PageInfo) -> list[float]:
    return [float(bool(info.types & names)) for names in _DECLARED.values()]


def page_features(body: Any, info: PageInfo, sel: Selection) -> list[float]:
    """One row of ``PAGE_FEATURES`` for a cleaned page and the rules' selection of it."""
    t = sel.tree
    assert t is not None
    counts = dict.fromkeys(_COUNTED, 0)
    text_in = {"li": 0, "td": 0, "pre": 0}
    for i, el in enumerate(t.els):
        tag = el.tag
        if tag in counts:
            counts[tag] += 1
            if tag in text_in:
                text_in[tag] += t.own[i]
    # Class words: every letter run of every class attribute, each distinct run judged once.
    runs: dict[str, int] = {}
    for run in _LETTERS.findall(" ".join(_CLASSES(body)).lower()):
        runs[run] = runs.get(run, 0) + 1
    words = {
        name: sum(n for run, n in runs.items() if run.startswith(stems))
        for name, stems in _CLASS_WORDS.items()
    }
    total = t.total[0] or 1
    text = " ".join(body.itertext()) if t.total[0] < 2_000_000 else ""
    og = {x for x in info.types if x in ("article", "product", "website")}
    row = _declared(info)
    row += [float("article" in og), float("product" in og), float("website" in og)]
    row += [math.log1p(counts[tag]) for tag in _COUNTED]
    row += [math.log1p(words[name]) for name in _CLASS_WORDS]
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
        math.log1p(_currency(text)),
    ]
    return row


def _currency(text: str) -> int:
    """Currency amounts in ``text`` (the regex only runs when a symbol or code is there)."""
    if not any(mark in text for mark in _CURRENCY_MARKS):
        return 0
    return len(_CURRENCY.findall(text))


def page_type(model: Model | None, row: list[float]) -> str:
    """The classifier's type for a page-feature row; ``other`` when unsure or no model."""
    return classify(model, row)[0]


def classify(model: Model | None, row: list[float]) -> tuple[str, bool]:
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
