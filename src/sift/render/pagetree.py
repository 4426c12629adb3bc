"""A cleaned page as flat arrays: one linear pass measures every element's text.

``PageTree.of(body)`` numbers the elements in document order (a parent always precedes its
children) and records, per element, its parent, its own visible characters (its text and
its children's tails), and bottom-up sums: all text, text in paragraph-like blocks outside
links, and link text. Main-content selection (``extract``) and the block features
(``blocks``) both read these arrays, so the page is walked once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PARA_TAGS = frozenset(
    {"p", "pre", "blockquote", "li", "td", "dd", "h2", "h3", "h4", "h5", "h6", "figcaption"}
)
HEADING_TAGS = frozenset({"h2", "h3", "h4", "h5", "h6"})


def chars(text: str | None) -> int:
    """Non-whitespace characters of ``text`` (C-speed counts, no per-word objects)."""
    if not text or text.isspace():
        return 0
    return len(text) - text.count(" ") - text.count("\n") - text.count("\t") - text.count("\r")


@dataclass
class PageTree:
    """Per-element arrays of one cleaned tree, indexed in document order (root 0)."""

    els: list[Any]
    tags: list[Any]  # els[i].tag, read once
    items: list[list[tuple[str, str]]]  # els[i].items(), read once ([] without attributes)
    index: dict[Any, int]
    parent: list[int]
    own: list[int]  # own visible characters: text plus children's tails
    total: list[int]  # the subtree's visible characters
    para: list[int]  # ... inside paragraph-like blocks and outside links
    link: list[int]  # ... inside links
    in_para: list[bool]
    in_link: list[bool]
    in_heading: list[bool]

    @classmethod
    def of(cls, body: Any, attrs: dict[Any, list[tuple[str, str]]] | None = None) -> PageTree:
        """The arrays of ``body``'s subtree; ``attrs``: the attributes ``dom.clean`` read
        (every element's that has any), else they are read here."""
        els = list(body.iter())
        n = len(els)
        index = {el: i for i, el in enumerate(els)}
        tags = [el.tag for el in els]
        if attrs is None:
            items = [el.items() for el in els]
        else:
            none: list[tuple[str, str]] = []
            items = [attrs.get(el, none) for el in els]
        parent = [-1] * n
        for i in range(1, n):
            p = els[i].getparent()
            parent[i] = index.get(p, -1) if p is not None else -1
        # Top-down: context flags; own text per element.
        in_para = [False] * n
        in_link = [False] * n
        in_heading = [False] * n
        own = [0] * n
        for i, el in enumerate(els):
            tag = tags[i]
            p = parent[i]
            if p >= 0:
                in_para[i] = in_para[p] or tag in PARA_TAGS
                in_link[i] = in_link[p] or tag == "a"
                in_heading[i] = in_heading[p] or tag in HEADING_TAGS
            else:
                in_para[i] = tag in PARA_TAGS
                in_link[i] = tag == "a"
                in_heading[i] = tag in HEADING_TAGS
            # chars() inlined: this loop runs once per element of every page.
            text = el.text
            if text and not text.isspace():
                own[i] += (
                    len(text)
                    - text.count(" ")
                    - text.count("\n")
                    - text.count("\t")
                    - text.count("\r")
                )
            if p >= 0:
                tail = el.tail
                if tail and not tail.isspace():
                    own[p] += (
                        len(tail)
                        - tail.count(" ")
                        - tail.count("\n")
                        - tail.count("\t")
                        - tail.count("\r")
                    )
        # Bottom-up: totals, paragraph chars, link chars.
        total = own[:]
        para = [own[i] if (in_para[i] and not in_link[i]) else 0 for i in range(n)]
        link = [own[i] if in_link[i] else 0 for i in range(n)]
        for i in range(n - 1, 0, -1):
            p = parent[i]
            if p >= 0:
                total[p] += total[i]
                para[p] += para[i]
                link[p] += link[i]
        return cls(
            els, tags, items, index, parent, own, total, para, link, in_para, in_link, in_heading
        )


def common_ancestor(nodes: list[int], parent: list[int]) -> int:
    """The deepest element holding all ``nodes`` (indices of one tree, root 0)."""
    path = []
    j = nodes[0]
    while j >= 0:
        path.append(j)
        j = parent[j]
    common = set(path)
    for node in nodes[1:]:
        j = node
        while j not in common:
            j = parent[j]
        # Everything below j on the first path is no longer shared.
        k = path.index(j)
        path = path[k:]
        common = set(path)
    return path[0]


def inside(i: int, group: set[int], parent: list[int]) -> bool:
    """Whether ``i`` or one of its ancestors is in ``group``."""
    while i >= 0:
        if i in group:
            return True
        i = parent[i]
    return False


def outermost(flags: list[bool], parent: list[int], within: set[int] | None = None) -> set[int]:
    """Flagged elements with no flagged ancestor (nor one in ``within``); a parent always
    precedes its children in ``flags``."""
    under = [False] * len(flags)
    found = set()
    for i, flag in enumerate(flags):
        p = parent[i]
        if (p >= 0 and under[p]) or (within and i in within):
            under[i] = True
        elif flag:
            under[i] = True
            found.add(i)
    return found


def spread_down(flags: list[bool], parent: list[int]) -> list[bool]:
    """``flags`` extended to every descendant of a flagged element."""
    out = flags[:]
    for i in range(1, len(out)):
        p = parent[i]
        if p >= 0 and out[p]:
            out[i] = True
    return out
