"""Limits on caller CSS selectors, checked before anything is fetched.

lxml runs a CSS selector as XPath inside libxml2, where its cost is out of sift's reach:
``:has()`` becomes a descendant search per candidate element (nested, a power of the page
size: ``div:has(div:has(div:has(span)))`` freezes a 2 KiB page for seconds), and every
combinator and pseudo-class adds a pass, and everything that looks at siblings (``+``, ``~``,
``:first-child``, ``:nth-child()``, ``:last-of-type`` …) counts siblings per element:
quadratic or worse in the number of siblings (``p:nth-last-child(2)`` over 40,000
paragraphs: 52 s; ``p + p`` over 4,000: 16 s). So a selector is parsed (cssselect) and
refused with a reason when it is too big or looks at siblings; what remains is linear or
close to it, and the render pool's wall-clock limit is the backstop. The limits are per
selector, plus one on the total size of ``selector`` and ``exclude`` together.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

# Per selector (one `selector`, or one `exclude` entry).
MAX_SELECTOR_CHARS = 1024
MAX_ALTERNATIVES = 8  # comma-separated selectors in one group
MAX_COMBINATORS = 8  # descendant, >, +, ~
MAX_PSEUDO_CLASSES = 4  # :not(), :nth-child(), :has(), :is(), …
# `:has()` in all selectors together, never one inside another.
MAX_HAS = 1
# `selector` plus every `exclude` entry.
MAX_TOTAL_CHARS = 2048

# One sentence for schemas and docs, so what OpenAPI and the MCP tools say is what is enforced.
LIMITS_TEXT = (
    f"Each selector: at most {MAX_SELECTOR_CHARS} characters, {MAX_ALTERNATIVES} "
    f"comma-separated parts, {MAX_COMBINATORS} combinators and {MAX_PSEUDO_CLASSES} "
    f"pseudo-classes; at most {MAX_HAS} :has() in selector and exclude together, never nested; "
    f"selector and exclude at most {MAX_TOTAL_CHARS} characters together; no sibling "
    "selectors ('+', '~', :first-child, :nth-child() …). Otherwise 422."
)

_SIBLING_COMBINATORS = frozenset({"+", "~"})
_SIBLING_PSEUDOS = frozenset(
    {"first-child", "last-child", "only-child", "first-of-type", "last-of-type", "only-of-type"}
)
_PSEUDO_CLASSES = (
    "Function",
    "Pseudo",
    "Negation",
    "Relation",
    "Matching",
    "SpecificityAdjustment",
)


def _children(node: Any) -> Iterator[Any]:
    """The sub-selectors of a cssselect parse node, whatever its kind."""
    for name in ("selector", "subselector", "parsed_tree"):
        child = getattr(node, name, None)
        if child is not None and not isinstance(child, str):
            yield child
    for name in ("selector_list", "selectors"):
        yield from getattr(node, name, None) or ()
    if type(node).__name__ == "Relation":
        # :has() keeps its argument as (combinator token, Selector) pairs.
        for arg in getattr(node, "arguments", None) or ():
            if isinstance(arg, tuple) and len(arg) == 2 and not isinstance(arg[1], str):
                yield arg[1]


def _sibling_pseudo(node: Any) -> bool:
    kind = type(node).__name__
    if kind == "Pseudo":
        return str(node.ident).lower() in _SIBLING_PSEUDOS
    return kind == "Function" and str(node.name).lower().startswith("nth-")


def _count(node: Any, counts: dict[str, int], in_has: bool) -> None:
    kind = type(node).__name__
    if kind == "CombinedSelector":
        counts["combinators"] += 1
        if node.combinator in _SIBLING_COMBINATORS:
            counts["siblings"] += 1
    if _sibling_pseudo(node):
        counts["siblings"] += 1
    if kind in _PSEUDO_CLASSES:
        counts["pseudo"] += 1
    if kind == "Relation":
        counts["has"] += 1
        if in_has:
            counts["nested_has"] += 1
        in_has = True
        # cssselect 1.3 keeps the combinator opening :has() on the node; 1.2 in arguments.
        if getattr(getattr(node, "combinator", None), "value", None) in _SIBLING_COMBINATORS:
            counts["siblings"] += 1
        for arg in getattr(node, "arguments", None) or ():
            combinator = getattr(arg[0], "value", None) if isinstance(arg, tuple) else None
            if combinator in _SIBLING_COMBINATORS:
                counts["siblings"] += 1
    for child in _children(node):
        _count(child, counts, in_has)


def selector_problems(selector: str) -> tuple[list[str], int]:
    """Why ``selector`` is refused (empty when it is fine), and how many ``:has()`` it uses."""
    from cssselect import SelectorError, parse

    if len(selector) > MAX_SELECTOR_CHARS:
        return [f"longer than {MAX_SELECTOR_CHARS} characters"], 0
    try:
        group = parse(selector)
    except (SelectorError, SyntaxError, ValueError, RecursionError) as exc:
        # cssselect 1.3 refuses while parsing two things the limits name (a :has() inside
        # :has(), a sibling combinator opening :has()): say which limit, not the parser's.
        named = _has_problems(selector)
        if named:
            return named, selector.lower().count(":has(")
        return [f"not a valid CSS selector ({exc})"], 0
    counts = {"combinators": 0, "pseudo": 0, "has": 0, "nested_has": 0, "siblings": 0}
    for sel in group:
        _count(sel, counts, False)
    problems = []
    if len(group) > MAX_ALTERNATIVES:
        problems.append(f"{len(group)} comma-separated selectors (at most {MAX_ALTERNATIVES})")
    if counts["combinators"] > MAX_COMBINATORS:
        problems.append(f"{counts['combinators']} combinators (at most {MAX_COMBINATORS})")
    if counts["pseudo"] > MAX_PSEUDO_CLASSES:
        problems.append(f"{counts['pseudo']} pseudo-classes (at most {MAX_PSEUDO_CLASSES})")
    if counts["siblings"]:
        problems.append(_SIBLINGS)
    if counts["nested_has"]:
        problems.append(_NESTED_HAS)
    return problems, counts["has"]


_SIBLINGS = (
    "looks at siblings ('+', '~', :first-child, :nth-child() and the like), which "
    "costs time quadratic in the number of siblings; select by tag, class, id, "
    "attribute, descendant or '>' instead"
)
_NESTED_HAS = ":has() inside :has() (its cost grows as a power of the page size)"


def _has_problems(selector: str) -> list[str]:
    """The :has() limits a selector breaks, read from its text (for when it does not parse)."""
    text = selector.lower()
    opens: list[bool] = []  # per open parenthesis: is it a :has(
    nested = sibling = False
    for i, ch in enumerate(text):
        if ch == "(":
            has = text.endswith(":has", 0, i)
            if has:
                nested = nested or any(opens)
                sibling = sibling or text[i + 1 :].lstrip()[:1] in ("+", "~")
            opens.append(has)
        elif ch == ")" and opens:
            opens.pop()
    return [p for p, hit in ((_SIBLINGS, sibling), (_NESTED_HAS, nested)) if hit]


def check_selectors(selector: str | None, exclude: Iterable[str]) -> list[str]:
    """Every reason to refuse this ``selector`` and ``exclude`` list, as option messages."""
    problems: list[str] = []
    named = [("selector", selector)] if selector else []
    named += [(f"exclude[{i}]", s) for i, s in enumerate(exclude)]
    total = sum(len(s) for _, s in named)
    if total > MAX_TOTAL_CHARS:
        problems.append(
            f"selector and exclude: {total} characters together (at most {MAX_TOTAL_CHARS})"
        )
    has = 0
    for name, sel in named:
        found, n_has = selector_problems(sel)
        has += n_has
        problems.extend(f"{name}: {p}" for p in found)
    if has > MAX_HAS:
        problems.append(
            f"selector and exclude: {has} :has() in all (at most {MAX_HAS}; each one searches "
            "below every candidate element)"
        )
    return problems
