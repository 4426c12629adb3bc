"""The page's type: article, forum, product, listing, collection, service, documentation, other.

A small tree ensemble (``learned.load_model().ensembles["page_type"]``, trained on WCXB's labels by
``bench/train_extract.py``) reads one row of page-level features: the types the page
declares (JSON-LD ``@type``, microdata, ``og:type``) and whether its metadata names a date
and an author, its structure (how many headings, list items, table cells, code blocks,
images, ``<time>``s, teaser cards, sections, forms and buttons; repeated sibling structures,
paragraph lengths, heading density), how its text reads (total, link share, paragraph share,
share in lists, tables and code, sentence endings, digits, currency amounts, words that mark
a kind of page, pronoun rates), class words that name page parts (``price``, ``cart``,
``comment``, ``reply``, ``toc``, ``card`` …) and the shape and words of the URL's path.
Never the URL's host or the site.

The row opens with its cheap columns (``QUICK_FEATURES``): a small binary model (``quick``)
reads only those, and a page it calls an article surely enough is typed ``article`` without
the rest of the row (``surely_article``).

``other`` is the answer when the best class is less likely than ``OTHER_BELOW``, and when
there is no model.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from itertools import compress, repeat
from operator import eq
from typing import Any, Literal
from urllib.parse import urlsplit

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

# Words of the URL's path (its letter runs) that name a kind of page, by group; a run counts
# when it is one of the words, or starts with one of four letters or more. General words
# only, never a site's name (the host is never read).
_PATH_WORDS: dict[str, tuple[str, ...]] = {
    "url_docs": (
        *("doc", "docs", "documentation", "api", "reference", "guide", "manual", "tutorial"),
        *("learn", "wiki", "help", "support", "kb", "howto", "faq", "developer", "sdk"),
    ),
    "url_product": ("product", "shop", "store", "item", "buy", "dp", "sku", "catalog", "p"),
    "url_list": (
        *("category", "categories", "cat", "tag", "tags", "search", "archive", "list"),
        *("collection", "browse", "c", "page", "all", "index", "directory", "results"),
    ),
    "url_forum": (
        *("forum", "thread", "topic", "t", "question", "discuss", "community", "board"),
        *("viewtopic", "showthread", "answers", "comments", "r"),
    ),
    "url_article": (
        *("news", "blog", "article", "story", "stories", "post", "press", "opinion"),
        *("insights", "magazine", "journal", "review", "reviews", "features"),
    ),
    "url_service": (
        *("service", "solution", "pricing", "plans", "about", "contact", "company"),
        *("platform", "industries", "enterprise", "hire", "agency", "consulting", "careers"),
        *("team", "locations", "booking", "quote", "demo"),
    ),
}
_PATH_STEMS = tuple(
    (frozenset(w for w in words if len(w) < 4), tuple(w for w in words if len(w) >= 4))
    for words in _PATH_WORDS.values()
)
_PATH_RUN = re.compile(r"[a-z]+")
_PATH_DATE = re.compile(r"(?:^|/)(?:19|20)\d\d(?:/|-|$)")
_PATH_EXT = re.compile(r"\.(?:s?html?|php|aspx?|jsp)$")

# Words of the visible text that mark a kind of page (counted among its words).
_TEXT_WORDS: dict[str, tuple[str, ...]] = {
    "text_article": (
        *("min", "read", "published", "updated", "posted", "written", "editor", "share"),
        *("reporter", "correspondent", "according", "said"),
    ),
    "text_forum": (
        *("replies", "reply", "views", "ago", "joined", "members", "thread", "quote"),
        *("upvote", "answered", "asked", "posts", "moderator"),
    ),
    "text_product": (
        *("cart", "stock", "shipping", "sku", "quantity", "reviews", "wishlist", "checkout"),
        *("delivery", "returns", "warranty", "price", "sale"),
    ),
    "text_service": (
        *("contact", "consultation", "quote", "pricing", "testimonials", "clients"),
        *("team", "services", "solutions", "trusted", "expert", "experts", "started"),
    ),
    "text_docs": (
        *("parameters", "returns", "example", "install", "usage", "syntax", "function"),
        *("arguments", "configuration", "default", "command", "version", "api"),
    ),
}
_VOICE = {
    "voice_we": ("we", "our", "us", "we're", "we've"),
    "voice_you": ("you", "your", "you're", "yours"),
    "voice_i": ("i", "my", "me", "i'm", "i've"),
}
_TEXT_BYTES = tuple(tuple(w.encode() for w in ws) for ws in _TEXT_WORDS.values())
_VOICE_BYTES = tuple(tuple(w.encode() for w in ws) for ws in _VOICE.values())
# Words for the pronoun counts: runs of a-z and apostrophes (other bytes become spaces).
_WORD_BYTES = bytes(c if 97 <= c <= 122 or c == 39 else 32 for c in range(256))
# How much of the text is read for phrases and pronouns (enough to say how a page speaks).
_TEXT_SAMPLE_CHARS = 20_000

# The quick features: cheap to read (declared types, metadata, tag counts, the arrays the
# rules measured, the URL's path). A page a small model calls an article from these alone,
# with high confidence, is typed an article and the rules decide its content: the rest of the
# row (class words, the page's text, its structure) is never computed for it.
QUICK_FEATURES: tuple[str, ...] = (
    *_DECLARED,
    "og_article",
    "og_product",
    "og_website",
    *(f"n_{t}" for t in _COUNTED),
    "log_chars",
    "link_share",
    "para_share",
    "container_share",
    "listing",
    "cards",
    "log_types",
    # the URL's path (never its host)
    "path_depth",
    "path_root",
    "path_date",
    "path_number",
    "path_ext",
    "path_query",
    "slug_words",
    *_PATH_WORDS,
    # controls (before cleaning) and what the page says about itself
    "forms",
    "inputs",
    "buttons",
    "meta_published",
    "meta_modified",
    "meta_author",
)
PAGE_FEATURES: tuple[str, ...] = (
    *QUICK_FEATURES,
    *_CLASS_WORDS,
    "li_share",
    "td_share",
    "pre_share",
    "currency",
    # structure and prose
    "repeat_max",
    "repeat_runs",
    "p_mean",
    "long_p_share",
    "heading_density",
    "container_link_share",
    "sentence_density",
    "digit_share",
    # how its text speaks
    *_TEXT_WORDS,
    *_VOICE,
)


def _declared(info: PageInfo) -> list[float]:
    return [float(bool(info.types & names)) for names in _DECLARED.values()]


def quick_features(
    info: PageInfo,
    sel: Selection,
    url: str = "",
    meta: dict[str, Any] | None = None,
) -> list[float]:
    """One row of ``QUICK_FEATURES`` for a cleaned page and the rules' selection of it;
    ``url``: the page's (only its path and query are read); ``meta``: its metadata."""
    t = sel.tree
    assert t is not None
    tally = Counter(t.tags)  # tags counted over the tree's own list, in C
    total = t.total[0] or 1
    og = {x for x in info.types if x in ("article", "product", "website")}
    row = _declared(info)
    row += [float("article" in og), float("product" in og), float("website" in og)]
    row += [math.log1p(tally[tag]) for tag in _COUNTED]
    row += [
        math.log1p(t.total[0]),
        t.link[0] / total,
        t.para[0] / total,
        sel.chosen_chars / total,
        float(sel.listing),
        math.log1p(len(sel.cards)),
        math.log1p(len(info.types)),
    ]
    row += _path_features(url)
    row += [math.log1p(info.forms), math.log1p(info.inputs), math.log1p(info.buttons)]
    meta = meta or {}
    row += [float("published" in meta), float("modified" in meta), float("author" in meta)]
    return row


def page_features(
    body: Any,
    info: PageInfo,
    sel: Selection,
    url: str = "",
    meta: dict[str, Any] | None = None,
    quick: list[float] | None = None,
    siblings: Counter[tuple[int, str]] | None = None,
) -> list[float]:
    """One row of ``PAGE_FEATURES``: ``quick`` (``quick_features`` of the same page, computed
    here when not given), then class words, text shares, structure and speech.
    ``siblings``: ``sibling_tags`` of the tree, when the caller has it."""
    t = sel.tree
    assert t is not None
    row = quick[:] if quick is not None else quick_features(info, sel, url, meta)
    counts = {tag: t.tags.count(tag) for tag in ("h2", "h3", "h4", "p")}  # in C
    text_in = {tag: sum(compress(t.own, _is_tag(t.tags, tag))) for tag in ("li", "td", "pre")}
    # Class words: the letter runs of the class attributes that start with a group's stems
    # (values counted in C; each distinct value judged once per process).
    words = [0] * len(_CLASS_WORDS)
    for value, n in _class_values(body, t).items():
        for k in _value_groups(value):
            words[k] += n
    total = t.total[0] or 1
    row += [math.log1p(w) for w in words]
    row += [text_in["li"] / total, text_in["td"] / total, text_in["pre"] / total]
    plain: str = _PLAIN(body) if t.total[0] < 2_000_000 else ""
    row.append(math.log1p(_currency(plain)))
    row += _structure(t, counts, sel, plain, siblings)
    row += _speech(plain[:_TEXT_SAMPLE_CHARS])
    return row


def _is_tag(tags: list[Any], tag: str) -> Iterator[bool]:
    """Per element: its tag is ``tag`` (compared in C; a comment's tag is no string)."""
    return map(eq, tags, repeat(tag))


def sibling_tags(t: Any) -> Counter[tuple[int, str]]:
    """How many children of each parent have each tag, per (parent, tag) (counted in C)."""
    return Counter(zip(t.parent, t.tags, strict=True))


def _speech(sample: str) -> list[float]:
    """Counts of the ``_TEXT_WORDS`` groups' words and pronouns per 1,000 words
    (``_VOICE``) in a sample of the page's text (split and counted in C)."""
    low = sample.lower().encode("utf-8", "surrogatepass")
    words = Counter(low.translate(_WORD_BYTES).split())
    n = sum(words.values()) or 1
    out = [math.log1p(sum(words[w] for w in group)) for group in _TEXT_BYTES]
    out += [1000 * sum(words[w] for w in voice) / n for voice in _VOICE_BYTES]
    return out


def _path_features(url: str) -> list[float]:
    """The URL path's shape and words (``_PATH_WORDS``); the host is never read."""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = urlsplit("")
    path = parts.path.lower()
    segments = [s for s in path.split("/") if s]
    last = segments[-1] if segments else ""
    groups = [0] * len(_PATH_WORDS)
    for run in _PATH_RUN.findall(path):
        for k, (short, long_) in enumerate(_PATH_STEMS):
            if run in short or run.startswith(long_):
                groups[k] += 1
    return [
        math.log1p(len(segments)),
        float(not segments),
        float(_PATH_DATE.search(path) is not None),
        float(any(s.isdigit() for s in segments)),
        float(_PATH_EXT.search(path) is not None),
        float(bool(parts.query)),
        math.log1p(len([w for w in re.split(r"[-_.+]", last) if w.isalpha()])),
        *(math.log1p(g) for g in groups),
    ]


def _structure(
    t: Any,
    counts: dict[str, int],
    sel: Selection,
    plain: str,
    siblings: Counter[tuple[int, str]] | None = None,
) -> list[float]:
    """Repeated sibling structures (cards, rows, posts: children of one parent with the same
    tag), paragraph lengths, heading density, the rules' container's link share, and how
    the text reads (sentences, digits)."""
    tags, total = t.tags, t.total
    same = siblings if siblings is not None else sibling_tags(t)
    runs = sum(1 for n in same.values() if n >= 4)
    top = max(same.values(), default=0)
    p_sizes = list(compress(total, _is_tag(tags, "p")))
    long_p = sum(n for n in p_sizes if n >= 150)
    whole = t.total[0] or 1
    box = t.index.get(sel.container, 0)
    chars = len(plain) or 1
    ends = plain.count(". ") + plain.count("? ") + plain.count("! ")
    digits = sum(map(plain.count, "0123456789"))
    return [
        math.log1p(top),
        math.log1p(runs),
        math.log1p(sum(p_sizes) / len(p_sizes)) if p_sizes else 0.0,
        long_p / whole,
        (counts["h2"] + counts["h3"] + counts["h4"]) / (counts["p"] + 1),
        t.link[box] / t.total[box] if t.total[box] else 0.0,
        1000 * ends / chars,
        digits / chars,
    ]


# [a-z] runs found in C: every byte but a-z becomes a space (non-ASCII bytes included, as
# the regex [a-z]+ never matches them), then bytes.split.
_RUN_BYTES = bytes(c if 97 <= c <= 122 else 32 for c in range(256))


def _letter_runs(text: str) -> list[bytes]:
    """The [a-z]+ runs of ``text`` lower-cased, as bytes."""
    return text.lower().encode("utf-8", "surrogatepass").translate(_RUN_BYTES).split()


def _class_values(body: Any, t: Any) -> Counter[str]:
    """The page's class values and how often each is used (the tree's, read once by
    ``PageTree``, and the root's above ``body``)."""
    values = Counter([v for items in t.items if items for name, v in items if name == "class"])
    above = body.getparent()
    while above is not None:  # <html>'s class (a page type, like <body>'s)
        cls = above.get("class")
        if cls is not None:
            values[cls] += 1
        above = above.getparent()
    return values


@lru_cache(maxsize=16384)
def _value_groups(value: str) -> tuple[int, ...]:
    """The ``_CLASS_WORDS`` groups (by position) of each letter run of a class value that
    starts with one of its stems (a group once per such run)."""
    return tuple(k for run in _letter_runs(value) for k in _run_groups(run))


@lru_cache(maxsize=16384)
def _run_groups(run: bytes) -> tuple[int, ...]:
    """The ``_CLASS_WORDS`` groups (by position) with a stem that starts ``run``."""
    return tuple(k for k, stems in enumerate(_STEMS) if run.startswith(stems))


def _currency(plain: str) -> int:
    """Currency amounts in the page's text (its text nodes joined in C; the regex only runs
    when a symbol or code is there)."""
    if not any(mark in plain for mark in _CURRENCY_MARKS):
        return 0
    return len(_CURRENCY.findall(plain))


def page_type(model: Any, row: list[float]) -> str:  # model: a model.Model (it imports us)
    """The classifier's type for a page-feature row; ``other`` when unsure or no model."""
    return classify(model, row)[0]


def surely_article(model: Any, quick: list[float]) -> bool:
    """Whether the quick model (``QUICK_FEATURES``) calls the page an article so surely
    (its ``rules_above``, chosen in training) that the page is typed an article and the
    rules decide its content alone, without the rest of the page's features."""
    ens = model.ensembles.get("quick") if model is not None else None
    return ens is not None and ens.probability(quick) >= ens.rules_above


def model_helps(model: Any, row: list[float]) -> bool:
    """Whether the block model is predicted to improve on the rules' pick for a page of this
    ``PAGE_FEATURES`` row by more than the gain model's ``threshold`` (word F1; chosen in
    training): where it is not, the rules decide alone and the page costs no block model.
    True without a gain model."""
    ens = model.ensembles.get("gain") if model is not None else None
    return ens is None or ens.raw(row) > ens.threshold


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
