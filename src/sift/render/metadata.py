"""What a page says about itself: description, author, dates, site, canonical URL, image,
language, keywords.

Read before cleaning (``<head>`` and scripts are still there), in this order of trust, the
first source that has a field wins:

1. JSON-LD objects (``pagetype.PageInfo.objects``: ``@graph`` and nested objects included);
   the main entity first (an ``Article``/``Product``/… over ``WebSite``/``Organization``);
2. OpenGraph and Twitter cards (``og:*``, ``article:*``, ``twitter:*``);
3. other ``<meta>`` names (``description``, ``author``, ``keywords``, Dublin Core,
   ``citation_*``, ``parsely-*``, ``date``/``pubdate``), ``<link rel=canonical>``,
   ``<html lang>``;
4. microdata (``itemprop`` ``author``, ``datePublished``, ``dateModified``, ``description``,
   ``image``);
5. the visible page: a ``<time datetime>`` (published) and a byline (``rel=author`` link,
   an element whose class names a byline or author).

Absent fields are omitted, never guessed: a date that does not parse is left out. Values are
plain text (tags stripped, entities decoded, whitespace collapsed), bounded (``MAX_CHARS``
per value, ``MAX_DESCRIPTION_CHARS`` for the description, ``MAX_KEYWORDS`` keywords,
``MAX_AUTHORS`` authors), URLs absolute (``http``/``https`` only). Dates are ISO 8601:
``YYYY-MM-DD`` when only the day is known, else ``YYYY-MM-DDTHH:MM:SS`` with the offset
when the page gives one.
"""

from __future__ import annotations

import html
import re
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urljoin

from lxml import etree

from sift.render.pagetype import PageInfo

MAX_CHARS = 300
MAX_DESCRIPTION_CHARS = 1000
MAX_KEYWORDS = 20
MAX_AUTHORS = 5
MAX_ELEMENTS = 200  # microdata, <time> and byline elements read at most

FIELDS = (
    "description",
    "author",
    "published",
    "modified",
    "site_name",
    "canonical_url",
    "image",
    "lang",
    "keywords",
)
Metadata = dict[str, Any]

_TAGS = re.compile(r"<[^>]{0,2000}>")
_ISO = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2}))?)?")
_MAIN_TYPES = ("article", "posting", "product", "recipe", "event", "question", "page", "howto")
_META: dict[str, tuple[str, ...]] = {
    "description": ("og:description", "twitter:description", "description", "dc.description"),
    "author": (
        "article:author",
        "author",
        "dc.creator",
        "citation_author",
        "parsely-author",
        "sailthru.author",
        "twitter:creator",
    ),
    "published": (
        "article:published_time",
        "og:published_time",
        "datepublished",
        "dc.date",
        "dc.date.issued",
        "dcterms.created",
        "dcterms.date",
        "citation_publication_date",
        "citation_date",
        "parsely-pub-date",
        "sailthru.date",
        "pubdate",
        "publish_date",
        "date",
    ),
    "modified": ("article:modified_time", "og:updated_time", "dcterms.modified", "last-modified"),
    "site_name": ("og:site_name", "application-name", "twitter:site"),
    "image": ("og:image", "og:image:url", "og:image:secure_url", "twitter:image"),
    "canonical_url": ("og:url",),
    "keywords": ("keywords", "news_keywords", "article:tag"),
}
_LD_KEYS = {
    "description": ("description",),
    "author": ("author", "creator"),
    "published": ("datePublished", "dateCreated", "uploadDate"),
    "modified": ("dateModified",),
    "image": ("image", "thumbnailUrl"),
    "keywords": ("keywords",),
    "canonical_url": ("url", "mainEntityOfPage"),
}
_MICRODATA = {
    "author": "author",
    "datePublished": "published",
    "dateModified": "modified",
    "description": "description",
    "image": "image",
}
# What microdata and the visible page can add; once known, those walks are skipped.
_DEEP_FIELDS = frozenset({"author", "published", "modified", "description", "image"})
_URL_FIELDS = frozenset({"canonical_url", "image"})
_DATE_FIELDS = frozenset({"published", "modified"})
# Found through the attribute axis (libxml2 tests each attribute once rather than every
# element's), in document order; at most so many per parent element (a bound for pages that
# repeat them thousands of times).
_BYLINE = etree.XPath(
    "//@class[contains(., 'author') or contains(., 'byline')]/..|//@rel[.='author']/.."
)
_BYLINES_PER_PARENT = 50
_ITEMPROPS = etree.XPath("//@itemprop/..")
_ITEMPROPS_PER_PARENT = 200


def _capped(els: list[Any], per_parent: int) -> list[Any]:
    """``els`` (document order) with at most ``per_parent`` children of one parent."""
    count: dict[Any, int] = {}
    out = []
    for el in els:
        parent = el.getparent()
        n = count[parent] = count.get(parent, 0) + 1
        if n <= per_parent:
            out.append(el)
    return out


def plain(value: str, limit: int = MAX_CHARS) -> str:
    """``value`` as bounded plain text: tags stripped, entities decoded, spaces collapsed."""
    text = " ".join(html.unescape(_TAGS.sub(" ", value[: limit * 4])).split())
    if len(text) > limit:
        text = text[: limit - 1].rsplit(" ", 1)[0] + "…"
    return text


def iso_date(value: str) -> str | None:
    """``value`` as ISO 8601 (see the module docstring), or None when it does not parse."""
    text = value.strip()[:64]
    if not text:
        return None
    m = re.match(
        r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2}))?)?", text
    )
    if m:
        try:
            day = datetime(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
        if not m[4]:
            return day.date().isoformat()
        rest = text[m.end() :].lstrip(".0123456789")
        stamp = f"{day.date().isoformat()}T{int(m[4]):02d}:{m[5]}:{m[6] or '00'}"
        tz = re.match(r"\s*(Z|[+-]\d{2}:?\d{2})", rest)
        if tz:
            zone = tz[1]
            stamp += "+00:00" if zone == "Z" else f"{zone[:3]}:{zone[-2:]}"
        return stamp
    try:
        return parsedate_to_datetime(text).isoformat()
    except (TypeError, ValueError, IndexError):
        pass
    for fmt in ("%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%B %d %Y"):
        try:
            return datetime.strptime(text, fmt).date().isoformat()
        except ValueError:
            continue
    return None


def _names(value: Any) -> list[str]:
    """Author-like JSON-LD values (a string, a Person, a list of them) as names."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items[:MAX_AUTHORS]:
        if isinstance(item, dict):
            item = item.get("name") or ""
        if isinstance(item, str) and plain(item):
            out.append(plain(item))
    return out


def _ld_value(key: str, value: Any) -> Any:
    if key == "author":
        names = _names(value)
        return ", ".join(dict.fromkeys(names)) if names else None
    if isinstance(value, list):
        if key == "keywords":
            return [k for v in value[:MAX_KEYWORDS] if isinstance(v, str) for k in _split_kw(v)]
        value = value[0] if value else None
    if isinstance(value, dict):
        value = value.get("url") or value.get("@id") or value.get("name")
    return value if isinstance(value, str) else None


def _split_kw(value: str) -> list[str]:
    return [plain(k, 100) for k in value.split(",") if plain(k, 100)]


def _from_json_ld(objects: list[dict[str, Any]]) -> Metadata:
    def rank(obj: dict[str, Any]) -> int:
        raw = obj.get("@type")
        types = " ".join(t for t in (raw if isinstance(raw, list) else [raw]) if isinstance(t, str))
        return 0 if any(m in types.lower() for m in _MAIN_TYPES) else 1

    found: Metadata = {}
    for obj in sorted(objects[:50], key=rank):  # stable: document order within a rank
        main = rank(obj) == 0
        for field, keys in _LD_KEYS.items():
            if field == "canonical_url" and not main:
                continue  # an image's or a publisher's url is not the page's
            for key in keys:
                if field not in found and key in obj:
                    value = _ld_value(field, obj[key])
                    if value:
                        found[field] = value
        publisher = obj.get("publisher")
        if "site_name" not in found and isinstance(publisher, dict):
            name = publisher.get("name")
            if isinstance(name, str) and plain(name):
                found["site_name"] = name
    return found


def _from_meta(root: Any) -> Metadata:
    by_name: dict[str, str] = {}
    for el in root.iter("meta"):
        name = (el.get("property") or el.get("name") or el.get("itemprop") or "").lower()
        content = el.get("content")
        if name and content and name not in by_name:
            by_name[name] = content
    found: Metadata = {}
    for field, names in _META.items():
        for name in names:
            if name in by_name and (field not in _DATE_FIELDS or iso_date(by_name[name])):
                found[field] = by_name[name]
                break
    for el in root.iter("link"):
        rel = (el.get("rel") or "").lower().split()
        if "canonical" in rel and el.get("href"):
            found["canonical_url"] = el.get("href")  # the link outranks og:url
            break
    return found


def _from_microdata(root: Any) -> Metadata:
    found: Metadata = {}
    for el in _capped(_ITEMPROPS(root), _ITEMPROPS_PER_PARENT):
        field = _MICRODATA.get(el.get("itemprop") or "")
        if not field or field in found:
            continue
        value = el.get("content") or el.get("datetime") or el.get("src") or el.get("href")
        if not value or field in ("author", "description"):
            value = el.get("content") or " ".join(el.itertext())
        if value and value.strip():
            found[field] = value
    return found


def _from_page(root: Any, known: Metadata) -> Metadata:
    """A ``<time datetime>`` and a byline, each looked for only when ``known`` (what the
    sources above found) lacks its field: a value found here would lose to it anyway, and
    the byline search tests every class attribute of the page (the most costly read of
    the metadata)."""
    found: Metadata = {}
    for el in () if "published" in known else root.iter("time"):
        stamp = el.get("datetime")
        if stamp and iso_date(stamp):
            found["published"] = stamp
            break
    for el in () if "author" in known else _capped(_BYLINE(root), _BYLINES_PER_PARENT):
        text = plain(" ".join(el.itertext()), 120)
        text = re.sub(r"^(?:by|von|par|por|door|di)\s+", "", text, flags=re.IGNORECASE)
        if 2 < len(text) <= 80 and len(text.split()) <= 8:
            found["author"] = text
            break
    return found


def read(root: Any, info: PageInfo, *, base_url: str, lang: str | None) -> Metadata:
    """The page's metadata (see the module docstring), from an uncleaned tree."""
    merged = _from_json_ld(info.objects)
    for field, value in _from_meta(root).items():
        merged.setdefault(field, value)
    # The walks over the body only run for fields still missing.
    if not merged.keys() >= _DEEP_FIELDS:
        for field, value in _from_microdata(root).items():
            merged.setdefault(field, value)
    if not merged.keys() >= {"author", "published"}:
        for field, value in _from_page(root, merged).items():
            merged.setdefault(field, value)
    if lang:
        merged["lang"] = lang
    return _normalise(merged, base_url)


def _normalise(raw: Metadata, base_url: str) -> Metadata:
    out: Metadata = {}
    for field in FIELDS:
        value = raw.get(field)
        if not value:
            continue
        if field == "keywords":
            words = value if isinstance(value, list) else _split_kw(str(value))
            kept = list(dict.fromkeys(plain(str(w), 100) for w in words))[:MAX_KEYWORDS]
            if kept:
                out[field] = kept
            continue
        text = str(value)
        if field in _DATE_FIELDS:
            stamp = iso_date(text)
            if stamp:
                out[field] = stamp
        elif field in _URL_FIELDS:
            url = _absolute(text, base_url)
            if url:
                out[field] = url
        else:
            limit = MAX_DESCRIPTION_CHARS if field == "description" else MAX_CHARS
            text = plain(text, limit)
            if text:
                out[field] = text
    return out


def _absolute(value: str, base_url: str) -> str | None:
    try:
        url = urljoin(base_url, value.strip())
    except ValueError:
        return None
    if not url.startswith(("http://", "https://")) or len(url) > 2048:
        return None
    return url
