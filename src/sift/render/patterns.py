"""The vocabulary that tells page chrome from content.

Decisions are made from an element's tag, ARIA role and the words of its ``class`` and ``id``.
Class and id values are split into lowercase words at every non-alphanumeric character and at
camelCase humps, so ``relatedArticles``, ``related-articles`` and ``related_articles`` all
yield the word ``related``. Words are matched by prefix against ``_BOILER_PREFIXES`` (so
``comments``, ``commentlist`` match ``comment``) after the exceptions in ``_NOT_BOILER``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# Tags that hold chrome in every layout we know of.
BOILER_TAGS = frozenset({"nav", "footer", "aside", "header", "menu"})

BOILER_ROLES = frozenset(
    {
        "navigation",
        "banner",
        "contentinfo",
        "complementary",
        "search",
        "menu",
        "menubar",
        "dialog",
        "alertdialog",
        "toolbar",
        "tablist",
    }
)

# Reader comments: however much text they hold, they are not the article.
_STRONG_PREFIXES = ("comment", "disqus", "respond", "reply", "replies")

_BOILER_PREFIXES = (
    "nav",
    "menu",
    "footer",
    "sidebar",
    "share",
    "sharing",
    "social",
    "related",
    "comment",
    "breadcrumb",
    "cookie",
    "consent",
    "gdpr",
    "newsletter",
    "subscri",
    "promo",
    "advert",
    "sponsor",
    "banner",
    "popup",
    "modal",
    "overlay",
    "pagination",
    "pager",
    "widget",
    "outbrain",
    "taboola",
    "disqus",
    "recommend",
    "trending",
    "popular",
    "byline",
    "author",
    "dateline",
    "timestamp",
    "signup",
    "login",
    "toolbar",
    "masthead",
    "skiplink",
    "tagcloud",
    "taglist",
    "follow",
    "rating",
    "copyright",
    "masthead",
    "headline",
    "kicker",
)

_BOILER_WORDS = frozenset(
    {
        "ad",
        "ads",
        "adv",
        "advert",
        "adslot",
        "adunit",
        "aside",
        "header",
        "meta",
        "date",
        "time",
        "tag",
        "tags",
        "more",
        "also",
        "next",
        "prev",
        "previous",
        "print",
        "email",
        "rss",
        "bio",
        "cta",
        "dropdown",
        "crumbs",
        "topics",
        "keywords",
        "jump",
        "skip",
        "teaser",
        "listing",
        "title",
        "caption",
        "credit",
        "credits",
        "disclaimer",
        "alert",
        "toc",
    }
)

# Words that start like boilerplate but name content.
_NOT_BOILER = frozenset(
    {
        "commentary",
        "navigable",
        "menuitem",
        "authored",
        "shared",
        "titles",
    }
)

_CONTENT_WORDS = frozenset(
    {
        "article",
        "articlebody",
        "content",
        "entry",
        "post",
        "story",
        "body",
        "text",
        "main",
        "blog",
        "prose",
        "richtext",
    }
)

_SPLIT = re.compile(r"[^a-z0-9]+")
_HUMPS = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@lru_cache(maxsize=8192)
def words_of(value: str) -> tuple[str, ...]:
    """Lowercase words of a class/id value (camelCase and punctuation split)."""
    return tuple(w for w in _SPLIT.split(_HUMPS.sub(" ", value).lower()) if w)


# The first three letters of every prefix: most words are told apart by one set lookup
# before a scan of the prefix tuples (pages bring new class values all the time, so this
# cold path is what a page pays).
_STRONG_HEADS = frozenset(p[:3] for p in _STRONG_PREFIXES)
_BOILER_HEADS = frozenset(p[:3] for p in _BOILER_PREFIXES)


@lru_cache(maxsize=16384)
def _value_boiler_kind(value: str) -> int:
    low = value.lower()
    if low != value:  # camelCase humps are word breaks (words_of)
        low = _HUMPS.sub(" ", value).lower()
    kind = NOT_BOILER
    content = False
    for word in _SPLIT.split(low):
        if not word or word in _NOT_BOILER:
            continue
        if word in _CONTENT_WORDS:
            content = True
        elif word[:3] in _STRONG_HEADS and word.startswith(_STRONG_PREFIXES):
            kind = COMMENT
        elif kind == NOT_BOILER and (
            word in _BOILER_WORDS
            or (word[:3] in _BOILER_HEADS and word.startswith(_BOILER_PREFIXES))
        ):
            kind = WEAK
    # "content-with-sidebar", "comment-body": a content word makes any chrome word doubtful.
    return min(kind, WEAK) if content else kind


@lru_cache(maxsize=8192)
def _value_is_content(value: str) -> bool:
    return any(w in _CONTENT_WORDS for w in words_of(value))


# COMMENT is STRONG on an article page; on a discussion page (a thread) the posts it marks
# are the content.
NOT_BOILER, WEAK, STRONG, COMMENT = 0, 1, 2, 3


@lru_cache(maxsize=8192)
def _value_chrome_word(value: str) -> str:
    for word in words_of(value):
        if word in _NOT_BOILER or word in _CONTENT_WORDS:
            continue
        if word in _BOILER_WORDS or word.startswith(_BOILER_PREFIXES):
            return word
    return ""


def chrome_word(items: list[tuple[str, str]]) -> str:
    """The first chrome word of an element's class (else id), from its attribute list
    (``el.items()``), or ``""``: the name a page gives its repeated blocks (``promo``,
    ``widget``) when it gives it to many."""
    cls = ident = None
    for name, value in items:
        if name == "class":
            cls = value
        elif name == "id":
            ident = value
    word = _value_chrome_word(cls) if cls else ""
    if not word and ident:
        word = _value_chrome_word(ident)
    return word


def boiler_kind(el: Any) -> int:
    """How surely the element's tag, role, class or id names page chrome.

    ``STRONG`` (nav, footer, comments, share bars …) always holds; ``WEAK`` (header, meta,
    date, tags …) words also turn up in the class lists of article containers, so the
    extractor overrides them when the element holds most of the page's text.
    """
    tag = el.tag
    if tag in BOILER_TAGS:
        return WEAK if tag == "header" else STRONG
    if tag in ("body", "html"):
        return NOT_BOILER  # their classes describe the page type, not a region
    attrib = el.attrib
    if not attrib:
        return NOT_BOILER
    return _attrs_kind(attrib.get("role"), attrib.get("class"), attrib.get("id"))


def boiler_kinds(tags: list[Any], items: list[list[tuple[str, str]]]) -> list[int]:
    """``boiler_kind`` of every element, from its tag and attribute list (``PageTree``'s
    ``tags`` and ``items``, read once per page). Each distinct (role, class, id) is judged
    once per page."""
    kinds = [NOT_BOILER] * len(tags)
    seen: dict[tuple[str | None, str | None, str | None], int] = {}
    for i, attrs in enumerate(items):
        tag = tags[i]
        if tag in _TAG_DECIDED:
            if tag in BOILER_TAGS:
                kinds[i] = WEAK if tag == "header" else STRONG
            continue
        if not attrs:
            continue
        role = cls = ident = None
        for name, value in attrs:
            if name == "class":
                cls = value
            elif name == "id":
                ident = value
            elif name == "role":
                role = value
        key = (role, cls, ident)
        kind = seen.get(key)
        if kind is None:
            kind = seen[key] = _attrs_kind(role, cls, ident)
        kinds[i] = kind
    return kinds


# boiler_kind decides these by their tag alone.
_TAG_DECIDED = BOILER_TAGS | {"body", "html"}


def _attrs_kind(role: str | None, cls: str | None, ident: str | None) -> int:
    """``boiler_kind`` of an element whose tag says nothing, from its role, class and id."""
    if role and role.lower() in BOILER_ROLES:
        return STRONG
    kind = NOT_BOILER
    if cls:
        kind = _value_boiler_kind(cls)
        if kind >= STRONG:
            return kind
    if ident:
        kind = max(kind, _value_boiler_kind(ident))
    return kind


def is_boiler(el: Any) -> bool:
    """True when the element's tag, role, class or id names page chrome (weak or strong)."""
    return boiler_kind(el) != NOT_BOILER


def is_content_hint(el: Any) -> bool:
    """True when the element declares itself the article (tag, microdata, class or id)."""
    if el.tag in ("article", "main"):
        return True
    attrib = el.attrib
    if not attrib:
        return False
    prop = attrib.get("itemprop")
    if prop and prop in ("articleBody", "text", "reviewBody"):
        return True
    return bool(attrib.get("role") == "main")
