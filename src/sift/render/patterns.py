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
def _value_verdict(value: str) -> tuple[int, str]:
    """How surely a class/id value names chrome (``NOT_BOILER`` … ``COMMENT``), and its
    first chrome word (``""``: none) — the name a page may give its repeated blocks."""
    low = value.lower()
    if low != value:  # camelCase humps are word breaks (words_of)
        low = _HUMPS.sub(" ", value).lower()
    kind = NOT_BOILER
    content = False
    first = ""
    for word in _SPLIT.split(low):
        if not word or word in _NOT_BOILER:
            continue
        if word in _CONTENT_WORDS:
            content = True
            continue
        if word[:3] in _STRONG_HEADS and word.startswith(_STRONG_PREFIXES):
            kind = COMMENT
        if (not first or kind == NOT_BOILER) and _is_boiler_word(word):
            first = first or word
            if kind == NOT_BOILER:
                kind = WEAK
    # "content-with-sidebar", "comment-body": a content word makes any chrome word doubtful.
    return (min(kind, WEAK) if content else kind), first


def _is_boiler_word(word: str) -> bool:
    return word in _BOILER_WORDS or (
        word[:3] in _BOILER_HEADS and word.startswith(_BOILER_PREFIXES)
    )


def _value_boiler_kind(value: str) -> int:
    return _value_verdict(value)[0]


@lru_cache(maxsize=8192)
def _value_is_content(value: str) -> bool:
    return any(w in _CONTENT_WORDS for w in words_of(value))


# COMMENT is STRONG on an article page; on a discussion page (a thread) the posts it marks
# are the content.
NOT_BOILER, WEAK, STRONG, COMMENT = 0, 1, 2, 3


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


def boiler_kinds(
    tags: list[Any], items: list[list[tuple[str, str]]]
) -> tuple[list[int], dict[int, str]]:
    """``boiler_kind`` of every element, from its tag and attribute list (``PageTree``'s
    ``tags`` and ``items``, read once per page), and the elements' chrome words (the first
    chrome word of the class, else of the id: the name a page gives its repeated blocks
    when it gives it to many). Each distinct (role, class, id) is judged once per page."""
    kinds = [NOT_BOILER] * len(tags)
    words: dict[int, str] = {}
    seen: dict[tuple[str | None, str | None, str | None], tuple[int, str]] = {}
    for i, attrs in enumerate(items):
        tag = tags[i]
        if not attrs:
            if tag in BOILER_TAGS:
                kinds[i] = WEAK if tag == "header" else STRONG
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
        verdict = seen.get(key)
        if verdict is None:
            verdict = seen[key] = _attrs_verdict(role, cls, ident)
        if verdict[1]:
            words[i] = verdict[1]
        if tag in _TAG_DECIDED:
            if tag in BOILER_TAGS:
                kinds[i] = WEAK if tag == "header" else STRONG
            continue
        kinds[i] = verdict[0]
    return kinds, words


# boiler_kind decides these by their tag alone.
_TAG_DECIDED = BOILER_TAGS | {"body", "html"}


def _attrs_verdict(role: str | None, cls: str | None, ident: str | None) -> tuple[int, str]:
    """``boiler_kind`` of an element whose tag says nothing, from its role, class and id,
    and its chrome word."""
    kind, word = _value_verdict(cls) if cls else (NOT_BOILER, "")
    if not word and ident:
        word = _value_verdict(ident)[1]
    if role and role.lower() in BOILER_ROLES:
        return STRONG, word
    if kind >= STRONG:
        return kind, word
    if ident:
        kind = max(kind, _value_verdict(ident)[0])
    return kind, word


def _attrs_kind(role: str | None, cls: str | None, ident: str | None) -> int:
    """``boiler_kind`` of an element whose tag says nothing, from its role, class and id."""
    return _attrs_verdict(role, cls, ident)[0]


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
