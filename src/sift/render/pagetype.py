"""What kind of page this is, from what the page says about itself.

Read before cleaning (scripts are still in the tree): the ``@type`` of every JSON-LD object
(``<script type="application/ld+json">``, ``@graph`` and ``mainEntity`` included), the
``itemtype`` of microdata and the OpenGraph ``og:type``. Never the URL or the site: the same
markup means the same thing on any host.

The kinds that change extraction:

- ``discussion`` — a forum thread or Q&A page (``DiscussionForumPosting``, ``QAPage``,
  ``Question``): its posts are the content even where their markup says "comment";
- ``product`` — a product page (``Product``, ``ProductGroup``, ``og:type=product``): the
  JSON-LD name, price and description are added when the visible page lacks them.

Bounded: at most ``MAX_JSONLD_BYTES`` of JSON-LD per script and ``MAX_JSONLD_SCRIPTS`` scripts
are parsed; objects are walked iteratively with a node budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

MAX_JSONLD_BYTES = 512 * 1024
MAX_JSONLD_SCRIPTS = 32
MAX_JSONLD_NODES = 5000

_DISCUSSION = frozenset({"discussionforumposting", "qapage"})
_PRODUCT = frozenset({"product", "productgroup", "individualproduct", "productmodel"})


_ITEMTYPES = etree.XPath("//@itemtype")


@dataclass
class PageInfo:
    """Declared types (lower-cased, without schema.org prefix) and the JSON-LD objects."""

    types: frozenset[str] = frozenset()
    objects: list[dict[str, Any]] = field(default_factory=list)
    description: str = ""  # og:description or <meta name=description>
    # Controls as served (cleaning removes them): forms, fields, buttons.
    forms: int = 0
    inputs: int = 0
    buttons: int = 0

    @property
    def discussion(self) -> bool:
        return bool(self.types & _DISCUSSION)

    @property
    def product(self) -> bool:
        return bool(self.types & _PRODUCT)

    def products(self) -> list[dict[str, Any]]:
        """The JSON-LD objects typed as products, in document order."""
        return [o for o in self.objects if _types_of(o) & _PRODUCT]


def _short(value: Any) -> str:
    text = str(value).strip()
    return text.rsplit("/", 1)[-1].rsplit("#", 1)[-1].lower()


def _types_of(obj: dict[str, Any]) -> set[str]:
    raw = obj.get("@type")
    values = raw if isinstance(raw, list) else [raw]
    return {_short(v) for v in values if isinstance(v, str)}


def _walk(data: Any, out: list[dict[str, Any]]) -> None:
    """Every dict that carries an ``@type``, depth-first, within the node budget."""
    stack = [data]
    seen = 0
    while stack and seen < MAX_JSONLD_NODES:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            if "@type" in node:
                out.append(node)
            stack.extend(reversed([v for v in node.values() if isinstance(v, dict | list)]))
        elif isinstance(node, list):
            stack.extend(reversed(node))


def page_info(root: Any) -> PageInfo:
    """Types the page declares (JSON-LD, microdata, OpenGraph) and its JSON-LD objects."""
    objects: list[dict[str, Any]] = []
    scripts = 0
    og_types: list[str] = []
    description = ""
    controls = {"form": 0, "input": 0, "button": 0}
    # One walk of the tree for every tag read here (scripts, metas, controls).
    for el in root.iter(_INFO_TAGS):
        tag = el.tag
        if tag == "script":
            if scripts <= MAX_JSONLD_SCRIPTS and _is_jsonld(el):
                scripts += 1
                if scripts <= MAX_JSONLD_SCRIPTS:
                    _read_jsonld(el.text or "", objects)
        elif tag == "meta":
            prop = el.get("property") or el.get("name") or ""
            if prop == "og:type":
                og_types.append(_short(el.get("content") or ""))
            elif prop in _DESCRIPTIONS and not description:
                description = " ".join((el.get("content") or "").split())
        else:
            controls["input" if tag in ("select", "textarea") else tag] += 1
    types: set[str] = set()
    for obj in objects:
        types |= _types_of(obj)
    types.update(og_types)  # in the order the separate walks added them
    for itemtype in _ITEMTYPES(root):
        types.update(_short(t) for t in str(itemtype).split())
    types.discard("")
    return PageInfo(
        frozenset(types),
        objects,
        description,
        controls["form"],
        controls["input"],
        controls["button"],
    )


_INFO_TAGS = ("script", "meta", "form", "input", "select", "textarea", "button")
_DESCRIPTIONS = ("og:description", "description", "twitter:description")


def _is_jsonld(el: Any) -> bool:
    return (el.get("type") or "").strip().lower() == "application/ld+json"


def _read_jsonld(text: str, objects: list[dict[str, Any]]) -> None:
    """The ``@type`` objects of one JSON-LD script (within the size bound) into ``objects``."""
    if not text.strip() or len(text) > MAX_JSONLD_BYTES:
        return
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return
    _walk(data, objects)


def _text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("name") or value.get("@value") or ""
    if isinstance(value, list):
        value = " ".join(_text(v) for v in value[:20])
    return " ".join(str(value).split()) if isinstance(value, str | int | float) else ""


def _price(offers: Any) -> str:
    """``19.99 USD`` from an ``offers`` value (an Offer, AggregateOffer or a list of them)."""
    first = offers[0] if isinstance(offers, list) and offers else offers
    if not isinstance(first, dict):
        return ""
    price = _text(first.get("price") or first.get("lowPrice") or "")
    if not price:
        spec = first.get("priceSpecification")
        if isinstance(spec, list) and spec:
            spec = spec[0]
        if isinstance(spec, dict):
            price = _text(spec.get("price") or "")
            first = {**first, **spec}
    currency = _text(first.get("priceCurrency") or "")
    return f"{price} {currency}".strip() if price else ""


def product_facts(info: PageInfo) -> list[str]:
    """Name, brand, price and description of the page's first JSON-LD product, as lines."""
    for obj in info.products():
        facts = [
            _text(obj.get("name")),
            _text(obj.get("brand")),
            _price(obj.get("offers")),
            _text(obj.get("description")),
        ]
        return [f for f in facts if f]
    return []
