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

from lxml import etree

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


@lru_cache(maxsize=8192)
def _value_boiler_kind(value: str) -> int:
    kind = NOT_BOILER
    content = False
    for word in words_of(value):
        if word in _NOT_BOILER:
            continue
        if word in _CONTENT_WORDS:
            content = True
        elif word.startswith(_STRONG_PREFIXES):
            kind = COMMENT
        elif kind == NOT_BOILER and (word in _BOILER_WORDS or word.startswith(_BOILER_PREFIXES)):
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


def chrome_word(el: Any) -> str:
    """The first chrome word of the element's class (else id), or ``""``: the name a page
    gives its repeated blocks (``promo``, ``widget``) when it gives it to many."""
    cls = el.get("class")
    word = _value_chrome_word(cls) if cls else ""
    if not word:
        ident = el.get("id")
        word = _value_chrome_word(ident) if ident else ""
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
    role = attrib.get("role")
    if role and role.lower() in BOILER_ROLES:
        return STRONG
    kind = NOT_BOILER
    cls = attrib.get("class")
    if cls:
        kind = _value_boiler_kind(cls)
        if kind >= STRONG:
            return kind
    ident = attrib.get("id")
    if ident:
        kind = max(kind, _value_boiler_kind(ident))
    return kind


_NAMED = etree.XPath("descendant-or-self::*[@class or @id or @role]")


def boiler_kinds(root: Any, els: list[Any], index: dict[Any, int]) -> list[int]:
    """``boiler_kind`` of every element of ``els`` (``root``'s subtree in document order,
    ``index`` their positions). Only elements with a chrome tag, a class, id or role can
    be chrome: lxml finds those in C, and the rest are never judged one by one."""
    kinds = [NOT_BOILER] * len(els)
    for el in root.iter(*BOILER_TAGS):
        kinds[index[el]] = boiler_kind(el)
    for el in _NAMED(root):
        i = index.get(el)
        if i is not None:
            kinds[i] = boiler_kind(el)
    return kinds


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
