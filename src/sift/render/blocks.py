"""Text blocks of a page and their features, for the learned block classifier.

A **block** is an element the emitter writes as a block (``markdown.BLOCK_TAGS``) that holds
visible text of its own: its text, the text of its inline descendants (links, emphasis …)
and the tails of its children, but not the text of nested blocks. Every visible character of
the page belongs to exactly one block, so keeping or dropping blocks never cuts a sentence.

Features come from the page itself, never its site: the block's text (length, words, link
share, punctuation, digits, capitals), its tag and the tags around it, its depth and position
in the page, how its parent and grandparent regions read (text, links, paragraph share), how
many siblings share its tag (cards, posts), the rules' own verdicts (inside the rules'
container, kept by the rules' emitter predicate, chrome, teaser card, kept-for-links), the
same few numbers for the blocks before and after it, and page-level context (total text,
link share, the rules' container share, declared discussion/product, a listing found).

``FEATURES`` names the columns; the shipped model carries the list it was trained on, and a
model whose list differs is not used.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from operator import itemgetter

from sift.render.extract import Selection, is_title_heading
from sift.render.markdown import BLOCK_TAGS
from sift.render.pagekind import PAGE_FEATURES, sibling_tags
from sift.render.pagetree import PageTree

_TAG_GROUPS: dict[str, str] = {
    "p": "p",
    "li": "li",
    "dd": "dl",
    "dt": "dl",
    "h1": "h1",
    "h2": "hx",
    "h3": "hx",
    "h4": "hx",
    "h5": "hx",
    "h6": "hx",
    "td": "td",
    "th": "td",
    "pre": "pre",
    "blockquote": "quote",
    "div": "div",
    "section": "div",
    "article": "div",
    "main": "div",
    "figcaption": "caption",
    "caption": "caption",
}
_TAG_COLUMNS = ("p", "li", "dl", "h1", "hx", "td", "pre", "quote", "div", "caption")
_REGION_TAGS = {
    "nav": "in_nav",
    "footer": "in_footer",
    "header": "in_header",
    "aside": "in_aside",
    "form": "in_form",
    "article": "in_article",
    "main": "in_main",
    "table": "in_table",
    "ul": "in_list",
    "ol": "in_list",
}
_REGION_COLUMNS = tuple(dict.fromkeys(_REGION_TAGS.values()))
_NEIGHBOUR = ("log_chars", "link_share", "rules_kept", "punct")

FEATURES: tuple[str, ...] = (
    "log_chars",
    "log_words",
    "link_share",
    "word_len",
    "punct",
    "sentence_end",
    "digits",
    "capitals",
    "position",
    "depth",
    *(f"tag_{t}" for t in _TAG_COLUMNS),
    *_REGION_COLUMNS,
    "title_heading",
    "same_tag_siblings",
    "siblings",
    "parent_log_chars",
    "parent_link_share",
    "parent_para_share",
    "grand_log_chars",
    "grand_link_share",
    "grand_para_share",
    "in_container",
    "before_container",
    "after_container",
    "rules_kept",
    "in_chrome",
    "in_card",
    "keep_links",
    *(f"prev_{f}" for f in _NEIGHBOUR),
    *(f"next_{f}" for f in _NEIGHBOUR),
    "page_log_chars",
    "page_link_share",
    "container_share",
    "page_blocks",
    "discussion",
    "product",
    "listing",
    *(f"page_{f}" for f in PAGE_FEATURES),
)

# The second stage reads the first stage's probabilities around each block: a block among
# content is content (reading order is coherent), one among chrome is chrome.
CONTEXT_FEATURES: tuple[str, ...] = (
    "p",
    "p_prev",
    "p_next",
    "p_window_2",
    "p_window_5",
    "p_window_15",
    "p_page",
    "kept_share",
    "log_chars",
    "link_share",
    "rules_kept",
    "position",
)
_NEIGHBOUR_COLUMNS = tuple(FEATURES.index(f) for f in _NEIGHBOUR)
_CONTEXT_COLUMNS = tuple(
    FEATURES.index(f) for f in ("log_chars", "link_share", "rules_kept", "position")
)

_TITLE_TAGS = ("h1", "h2")  # the tags is_title_heading can accept
_NOT_CAPITAL = frozenset("_abcdefghijklmnopqrstuvwxyz")
_TAG_ONE_HOT = {
    tag: tuple(float(group == col) for col in _TAG_COLUMNS) for tag, group in _TAG_GROUPS.items()
}
_NO_TAG = tuple(0.0 for _ in _TAG_COLUMNS)
# Region bit sets seen so far, as feature columns (at most 2**10 entries).
_REGION_FLAGS: dict[int, tuple[float, ...]] = {}
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"\w+")
_SENTENCE_END = (".", "!", "?", ":", "。", "；", "！", "？", '"', "”", ")")


@dataclass
class Blocks:
    """The blocks of one page, in document order: element indices into ``tree.els``, their
    text, and one feature row each (columns as ``FEATURES``)."""

    tree: PageTree
    ids: list[int]
    texts: list[str]
    rows: list[list[float]]
    owner: list[int]  # per element: the block its own text belongs to (itself or an ancestor)


def _texts(t: PageTree, blk: list[int]) -> tuple[dict[int, list[str]], list[int], list[int]]:
    """Per block: its text's parts; per element (read at blocks): the visible characters of
    the block's own text, and those inside links."""
    parts: dict[int, list[str]] = {}
    els, parent, own, in_link = t.els, t.parent, t.own, t.in_link
    bown = [0] * len(els)
    blink = [0] * len(els)
    # An element without visible characters of its own has neither visible text nor
    # children with visible tails: its text and its children's tails are not read.
    for i, el in enumerate(els):
        c = own[i]
        if c:
            b = blk[i]
            bown[b] += c
            if in_link[i]:
                blink[b] += c
            text = el.text
            if text:
                parts.setdefault(b, []).append(text)
        if i and own[parent[i]]:
            tail = el.tail
            if tail and not tail.isspace():
                parts.setdefault(blk[parent[i]], []).append(tail)
    return parts, bown, blink


@dataclass
class _Marks:
    """Per element, from one top-down pass: the block its own text belongs to (itself or an
    ancestor), region flags (bit per ``_REGION_COLUMNS``), block depth, in chrome, in a
    teaser card, inside the rules' container, kept by the rules' emitter."""

    blk: list[int]
    region: list[int]
    depth: list[int]
    chrome: list[bool]
    cards: list[bool]
    inside: list[bool]
    kept: list[bool]


def _marks(t: PageTree, sel: Selection, top: int) -> _Marks:
    """``_Marks`` of every element (``top``: the rules' container)."""
    n = len(t.els)
    bits = {col: 1 << k for k, col in enumerate(_REGION_COLUMNS)}
    blk = [0] * n
    region = [0] * n
    depth = [0] * n
    chrome = sel.boiler[:] if sel.boiler else [False] * n
    group = sel.cards
    cards = [False] * n
    cards[0] = 0 in group
    inside = [False] * n
    kept = [False] * n
    inside[top] = kept[top] = True
    skip, els, tags, parent = sel.skip, t.els, t.tags, t.parent
    for i in range(1, n):
        p = parent[i]
        tag = tags[i]
        if tag in BLOCK_TAGS:
            blk[i] = i
            depth[i] = depth[p] + 1
        else:
            blk[i] = blk[p]
            depth[i] = depth[p]
        flag = _REGION_TAGS.get(tag)
        region[i] = region[p] | (bits[flag] if flag else 0)
        if chrome[p]:
            chrome[i] = True
        cards[i] = i in group or (p >= 0 and cards[p])
        if p >= 0 and inside[p]:  # only below the container (it precedes its subtree)
            inside[i] = True
            kept[i] = kept[p] and not skip(els[i])
    return _Marks(blk, region, depth, chrome, cards, inside, kept)


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def page_blocks(
    sel: Selection,
    *,
    discussion: bool,
    product: bool,
    page_row: list[float],
    siblings: Counter[tuple[int, str]] | None = None,
) -> Blocks:
    """The page's blocks and their features, from what the rules measured (``sel``) and
    the page-type features of the page (``page_row``); ``siblings``: ``sibling_tags`` of
    the tree, when the caller has it."""
    t = sel.tree
    assert t is not None
    top = t.index.get(sel.container, 0)
    m = _marks(t, sel, top)
    blk, inside, kept, chrome, cards = m.blk, m.inside, m.kept, m.chrome, m.cards
    parts, bown, blink = _texts(t, blk)
    ids = [b for b in sorted(parts) if bown[b]]
    total0 = t.total[0] or 1
    page = [
        math.log1p(t.total[0]),
        _share(t.link[0], t.total[0]),
        _share(sel.chosen_chars, t.total[0]),
        math.log1p(len(ids)),
        float(discussion),
        float(product),
        float(sel.listing),
        *page_row,
    ]
    texts: list[str] = []
    rows: list[list[float]] = []
    up: dict[tuple[int, str], tuple[float, ...]] = {}
    same_tag = siblings if siblings is not None else sibling_tags(t)  # per (parent, tag)
    before = 0
    for b in ids:
        text = " ".join(parts[b])
        texts.append(text)
        row = _own_features(text, bown[b], blink[b], before / total0, m.depth[b], t.tags[b])
        row.extend(_context(t, b, m.region[b], sel.title_key, up, same_tag))
        row.extend(
            (
                float(inside[b]),
                float(b < top),
                float(b > top and not inside[b]),
                float(kept[b]),
                float(chrome[b]),
                float(cards[b]),
                float(bool(sel.keep_links) and sel.keep_links[b]),
            )
        )
        rows.append(row)
        before += bown[b]
    _add_neighbours(rows, page)
    return Blocks(t, ids, texts, rows, blk)


def _own_features(
    text: str, n_chars: int, n_link: int, position: float, depth: int, tag: str
) -> list[float]:
    words = _WORD.findall(text)
    n_words = len(words) or 1
    stripped = text.rstrip()
    # A word starts with a capital (any letter but a-z, not a digit or "_"): the same count
    # as r"\b[^\W\d_a-z]" over the text, without a second regex pass.
    capitals = sum(1 for w in words if w[0] not in _NOT_CAPITAL and not w[0].isdecimal())
    row = [
        math.log1p(n_chars),
        math.log1p(len(words)),
        n_link / n_chars,
        n_chars / n_words,
        sum(map(text.count, ".,;:!?")) / n_chars,
        float(stripped.endswith(_SENTENCE_END)),
        len(_DIGIT.findall(text)) / n_chars,
        capitals / n_words,
        position,
        float(min(depth, 30)),
    ]
    row.extend(_TAG_ONE_HOT.get(tag, _NO_TAG))
    return row


def _context(
    t: PageTree,
    b: int,
    region: int,
    title_key: str,
    up: dict[tuple[int, str], tuple[float, ...]],
    same_tag: Counter[tuple[int, str]],
) -> list[float]:
    flags = _REGION_FLAGS.get(region)
    if flags is None:
        flags = _REGION_FLAGS[region] = tuple(
            float(bool(region & (1 << k))) for k in range(len(_REGION_COLUMNS))
        )
    row = list(flags)
    tag = t.tags[b]
    title = bool(title_key) and tag in _TITLE_TAGS and is_title_heading(t.els[b], title_key)
    row.append(float(title))
    p = t.parent[b] if b > 0 else 0
    # What the parent and grandparent say is the same for every block of one tag under one
    # parent (list items, paragraphs): measured once per (parent, tag).
    key = (p if b > 0 else -1, tag)
    around = up.get(key)
    if around is None:
        around = up[key] = _around(t, b, p, same_tag[p, tag])
    row.extend(around)
    return row


def _around(t: PageTree, b: int, p: int, same_tag: int) -> tuple[float, ...]:
    if b > 0:
        siblings = len(t.els[p])
        same = same_tag if siblings < 200 else siblings
    else:
        siblings = same = 0
    out = [math.log1p(same), math.log1p(siblings)]
    g = t.parent[p] if p > 0 else p
    for j in (p, g):
        total = t.total[j]
        out.extend((math.log1p(total), _share(t.link[j], total), _share(t.para[j], total)))
    return tuple(out)


def _add_neighbours(rows: list[list[float]], page: list[float]) -> None:
    """Append the previous and next blocks' few numbers, then the page's, to every row."""
    edge = (0.0, 0.0, 0.0, 0.0)
    pick = itemgetter(*_NEIGHBOUR_COLUMNS)
    own = [pick(r) for r in rows]
    for k, row in enumerate(rows):
        row.extend(own[k - 1] if k > 0 else edge)
        row.extend(own[k + 1] if k + 1 < len(rows) else edge)
        row.extend(page)


def context_rows(rows: list[list[float]], probs: list[float]) -> list[list[float]]:
    """One ``CONTEXT_FEATURES`` row per block, from the first stage's ``probs``."""
    n = len(probs)
    if not n:
        return []
    lc = _CONTEXT_COLUMNS[0]
    sizes = [math.expm1(r[lc]) for r in rows]
    total = sum(sizes) or 1.0
    kept_share = sum(c for c, p in zip(sizes, probs, strict=True) if p >= 0.5) / total
    mean = sum(probs) / n
    prefix = [0.0]
    for p in probs:
        prefix.append(prefix[-1] + p)
    # Each window's mean of the other blocks' probabilities, per block (a list per width).
    windows = []
    for k in (2, 5, 15):
        ends = [(max(0, i - k), min(n, i + k + 1)) for i in range(n)]
        windows.append(
            [
                (prefix[b] - prefix[a] - p) / max(1, b - a - 1)
                for (a, b), p in zip(ends, probs, strict=True)
            ]
        )
    prev = [0.0, *probs[:-1]]
    after = [*probs[1:], 0.0]
    pick = itemgetter(*_CONTEXT_COLUMNS)
    return [
        [p, pr, nx, w2, w5, w15, mean, kept_share, *pick(row)]
        for p, pr, nx, w2, w5, w15, row in zip(probs, prev, after, *windows, rows, strict=True)
    ]
