"""Main-content selection: which subtree of a cleaned page is the article.

The page is read as a weighted text sequence. Every visible character gets a weight: text in
paragraph-like blocks (``p``, ``pre``, ``blockquote``, ``li``, ``td``, headings) counts +1,
other text +``loose_weight``, link text ``-link_penalty``, and text inside chrome (nav,
footer, share bars, comments … see ``patterns``) ``-boiler_penalty``. The article container is
the element whose subtree has the largest total weight: the tree analogue of a maximum-sum
segment (cf. Finn et al.'s Body Text Extraction), found in two linear passes.

Inside that container the emitter skips chrome subtrees, link-dominated blocks and the
headline (which ``Rendered.title`` already carries).

A chrome word on an element that holds most of the page's paragraph text is taken to be a
false alarm (``<div class="post has-header-image">``), so it does not sink the article; so is
a weak word the page puts on many blocks that hold most of its text (a naming scheme).

Pages that are not one article: a run of teaser cards holding the page's text is the content
(a listing); a winner among sibling ``<section>``s of similar weight gives way to their parent
(a landing page); a winning paragraph gives way to its parent (chrome beside it outweighed
its sibling paragraphs). Each rule is a ``Weights`` field, so it can be measured switched off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sift.render.markdown import BLOCK_TAGS
from sift.render.patterns import (
    COMMENT,
    NOT_BOILER,
    STRONG,
    WEAK,
    boiler_kind,
    chrome_word,
    is_content_hint,
)

PARA_TAGS = frozenset(
    {"p", "pre", "blockquote", "li", "td", "dd", "h2", "h3", "h4", "h5", "h6", "figcaption"}
)
# Block elements that are dropped from the article when links dominate them.
_TEASER_HEADINGS = frozenset({"h2", "h3", "h4", "h5", "h6"})
_LINKY_BLOCKS = frozenset(
    {"p", "div", "ul", "ol", "li", "section", "table", "tr", "td", "dl", "span", "h2", "h3", "h4"}
)


@dataclass(frozen=True)
class Weights:
    """Tunable weights of the selection; defaults are the measured best on public data."""

    loose_weight: float = 0.5
    link_penalty: float = 1.0
    boiler_penalty: float = 1.0
    hint_bonus: float = 0.0
    guard_share: float = 0.5
    link_density_max: float = 0.5
    teaser_max_chars: int = 400
    # A weak chrome word cannot remove an element with this much paragraph text (0: off).
    weak_keep_para: int = 1000
    # Headings (h2–h6) and what is inside them are never chrome by class.
    headings_content: bool = True
    # Inline elements inside running prose are never pruned.
    prose_inline: bool = True
    # Link density is judged per list (ul/ol), and lists of links to other sites are kept.
    list_density: bool = True
    # Paragraphs are dropped for links only above this link density.
    para_link_density_max: float = 0.5
    # Teaser cards sharing a parent are content when together they hold this share of the
    # page's text outside chrome (a listing, a listicle); 0: off.
    card_run_share: float = 0.5
    # A weak chrome word on three or more elements that together hold this share of the
    # page's text is the page's naming scheme for its blocks, not chrome; 0: off.
    scheme_share: float = 0.5
    # A winner that is one of several sibling <section>s, this many of them holding more
    # prose than links, gives way to their parent (a landing page's hero, features, FAQ);
    # 0: off.
    gather_sections: int = 3
    # A winning paragraph gives way to its parent (chrome in the parent is still skipped).
    lift_paragraph: bool = True


DEFAULT_WEIGHTS = Weights()


def _chars(text: str | None) -> int:
    """Non-whitespace characters of ``text`` (C-speed counts, no per-word objects)."""
    if not text or text.isspace():
        return 0
    return len(text) - text.count(" ") - text.count("\n") - text.count("\t") - text.count("\r")


@dataclass
class Selection:
    """The chosen container and the predicate that drops chrome inside it."""

    container: Any
    skip: Callable[[Any], bool]
    text_chars: int  # visible characters of the whole page
    chosen_chars: int  # visible characters in the container
    score: float = 0.0  # the container's weight: <= 0 when no subtree has more prose than links


def select(
    body: Any,
    *,
    title: str | None,
    weights: Weights | None = None,
    discussion: bool = False,
    host: str = "",
) -> Selection:
    """Find the article container under ``body`` (a cleaned tree).

    ``discussion`` (the page declares itself a forum thread or Q&A) makes posts marked as
    comments content. (Inferring it from comments holding most of the text was tried and
    dropped: it turns long comment sections under short articles into content.)
    ``host`` (the page's) tells lists of links to other sites (references) from site lists.
    """
    weights = weights or DEFAULT_WEIGHTS
    els = list(body.iter())
    n = len(els)
    index = {el: i for i, el in enumerate(els)}
    parent = [-1] * n
    for i in range(1, n):
        p = els[i].getparent()
        parent[i] = index.get(p, -1) if p is not None else -1

    # Pass 1 (top-down): context flags; own text per element.
    in_para = [False] * n
    in_link = [False] * n
    in_heading = [False] * n
    own = [0] * n
    for i, el in enumerate(els):
        tag = el.tag
        p = parent[i]
        if p >= 0:
            in_para[i] = in_para[p] or tag in PARA_TAGS
            in_link[i] = in_link[p] or tag == "a"
            in_heading[i] = in_heading[p] or tag in _TEASER_HEADINGS
        else:
            in_para[i] = tag in PARA_TAGS
            in_link[i] = tag == "a"
            in_heading[i] = tag in _TEASER_HEADINGS
        c = _chars(el.text)
        if c:
            own[i] += c
        if p >= 0 and el.tail:
            own[p] += _chars(el.tail)

    # Pass 2 (bottom-up): totals, link chars, paragraph chars.
    total = own[:]
    para = [own[i] if (in_para[i] and not in_link[i]) else 0 for i in range(n)]
    link = [own[i] if in_link[i] else 0 for i in range(n)]
    for i in range(n - 1, 0, -1):
        p = parent[i]
        if p >= 0:
            total[p] += total[i]
            para[p] += para[i]
            link[p] += link[i]

    # The guard measures plain (non-link) text: many articles have no <p> at all.
    plain = total[0] - link[0]
    guard = weights.guard_share * plain
    kinds = [boiler_kind(el) for el in els]
    boiler = [False] * n
    weak_keep = weights.weak_keep_para or total[0] + 1
    headings = weights.headings_content
    schemes = (
        _naming_schemes(els, kinds, parent, total, link, weights) if weights.scheme_share else ()
    )
    for i in range(n):
        kind = kinds[i]
        if kind == COMMENT:
            kind = NOT_BOILER if discussion else STRONG
        if kind == WEAK and (total[i] - link[i] > guard or para[i] >= weak_keep):
            continue  # a weak word on the element that holds the text: a false alarm
        if kind == WEAK and schemes and chrome_word(els[i]) in schemes:
            continue  # the page's name for its repeated content blocks
        if kind != NOT_BOILER and headings and in_heading[i] and els[i].tag != "header":
            continue  # section headings are content whatever their class
        if kind in (STRONG, WEAK):
            boiler[i] = True

    # Teaser cards (a linked headline plus a short blurb) are listings of other pages,
    # unless a run of them is what the page is: cards sharing a parent that hold most of
    # the text outside chrome (a listing, a listicle of venues).
    tops: set[int] = set()
    for i, el in enumerate(els):
        if el.tag in _TEASER_HEADINGS and total[i] and link[i] >= 0.8 * total[i]:
            j, top = i, -1
            while parent[j] > 0 and total[parent[j]] <= weights.teaser_max_chars:
                j = parent[j]
                top = j
            if top > 0:
                tops.add(top)
    runs: set[int] = set()
    if tops and weights.card_run_share:
        chrome = _outermost(boiler, parent)
        outside = total[0] - sum(total[i] for i in chrome)
        cards = _outermost([i in tops for i in range(n)], parent, chrome)
        runs = _card_runs(cards, parent, total, weights.card_run_share * outside)
    for top in tops:
        boiler[top] = True

    # Inline elements in running prose (text beside them in the same block) stay: a
    # sentence never loses words in the middle.
    prose = [False] * n
    if weights.prose_inline:
        for i in range(1, n):
            p = parent[i]
            if p >= 0 and in_para[p] and own[p] and els[i].tag not in BLOCK_TAGS:
                prose[i] = True
                boiler[i] = False

    # Pass 3: weighted score, bottom-up, with chrome subtrees counted as negative.
    lw = weights.loose_weight
    base = [0.0] * n
    for i in range(n):
        if in_link[i]:
            base[i] = -weights.link_penalty * own[i]
        else:
            base[i] = own[i] * (1.0 if in_para[i] else lw)
    hints = (
        [
            weights.hint_bonus * para[i] if weights.hint_bonus and is_content_hint(els[i]) else 0.0
            for i in range(n)
        ]
        if weights.hint_bonus
        else None
    )
    best, score = _pick(base, boiler, parent, total, weights.boiler_penalty, hints)
    keep_links = [False] * n
    listing = False  # a run of cards is the content: links are not a sign of a directory
    if runs:
        # A run of cards holding more text than the best prose block beside it holds
        # paragraphs is the page's content (a listing), not teasers around an article.
        run_chars = sum(total[i] for i in runs)
        if para[best] * 2 < run_chars or _inside(best, runs, parent):
            for i in runs:
                boiler[i] = False
            best, score = _pick(base, boiler, parent, total, weights.boiler_penalty, hints)
            # The content spans the cards and the best block (an intro above them).
            best = _common_ancestor([best, *runs], parent)
            listing = True
            # Cards are mostly link text: neither they nor what holds them are dropped
            # for it.
            for i in runs:
                j = i
                while j >= 0 and not keep_links[j]:
                    keep_links[j] = True
                    j = parent[j]
            in_card = [False] * n
            for i in range(1, n):
                if in_card[parent[i]] or parent[i] in runs:
                    in_card[i] = keep_links[i] = True
    weight = float(total[best]) if listing else score[best]
    if (
        weights.lift_paragraph
        and els[best].tag == "p"
        and best > 0
        and not boiler[parent[best]]
        and sum(1 for c in els[parent[best]] if c.tag == "p") > 1
    ):
        # One paragraph among sibling paragraphs is never the whole article: chrome inside
        # their parent (a long comment thread after the post) outweighed the others.
        best = parent[best]
    if weights.gather_sections and not listing:
        best = _gather_sections(best, els, index, parent, score, boiler, weights.gather_sections)
    container = els[best]

    title_key = _norm(title) if title else ""
    linky: dict[int, bool] = {}  # decided for the elements the emitter visits only

    def skip(el: Any) -> bool:
        i = index.get(el)
        if i is None:
            return False
        if boiler[i]:
            return True
        if not prose[i] and not keep_links[i]:
            dropped = linky.get(i)
            if dropped is None:
                dropped = linky[i] = _linky(el, total[i], link[i], weights, host)
            if dropped:
                return True
        if el.tag in ("h1", "h2") and title_key:
            text = _norm("".join(el.itertext()))
            if text and (text == title_key or (len(text) > 15 and text in title_key)):
                return True
        return False

    return Selection(container, skip, total[0], total[best], weight)


def _naming_schemes(
    els: list[Any],
    kinds: list[int],
    parent: list[int],
    total: list[int],
    link: list[int],
    weights: Weights,
) -> set[str]:
    """Weak chrome words that the page puts on three or more blocks holding together more
    than ``scheme_share`` of its text (``elementor-widget``, ``promo`` cards of a landing
    page): there the word names the page's building blocks, not its chrome."""
    n = len(els)
    word_of = [chrome_word(els[i]) if kinds[i] == WEAK else "" for i in range(n)]
    count: dict[str, int] = {}
    chars: dict[str, int] = {}
    # Outermost per word: an element inside another with the same word is not counted again.
    seen: list[frozenset[str]] = [frozenset()] * n
    for i in range(n):
        p = parent[i]
        above = seen[p] if p >= 0 else frozenset()
        word = word_of[i]
        if word and word not in above:
            count[word] = count.get(word, 0) + 1
            chars[word] = chars.get(word, 0) + total[i] - link[i]
            above = above | {word}
        seen[i] = above
    least = weights.scheme_share * (total[0] - link[0])
    return {w for w, c in chars.items() if c > least and count[w] >= 3}


def _gather_sections(
    best: int,
    els: list[Any],
    index: dict[Any, int],
    parent: list[int],
    score: list[float],
    boiler: list[bool],
    least: int,
) -> int:
    """The parent of the winner's ``<section>`` when ``least`` of its sibling sections
    (the winner's included) weigh more prose than links: the page is made of sections."""
    j = best
    for _ in range(3):  # the winner, or a block just inside its section
        if els[j].tag == "section":
            break
        j = parent[j]
        if j <= 0:
            return best
    if els[j].tag != "section":
        return best
    p = parent[j]
    if p < 0 or boiler[p]:
        return best
    good, others = 0, 0.0
    for child in els[p]:
        if child.tag == "section":
            i = index.get(child, -1)
            if i >= 0 and not boiler[i] and score[i] > 0:
                good += 1
                if i != j:
                    others += score[i]
    # The other sections together weigh at least half the winner's: parts of one page,
    # not an article among small blocks.
    return p if good >= least and others * 2 >= score[j] else best


def _pick(
    base: list[float],
    boiler: list[bool],
    parent: list[int],
    total: list[int],
    penalty: float,
    hints: list[float] | None,
) -> tuple[int, list[float]]:
    """The element with the largest subtree weight outside chrome, and every subtree's
    weight (a chrome subtree weighs minus its size)."""
    n = len(base)
    score = base[:]
    for i in range(n - 1, -1, -1):
        if boiler[i]:
            score[i] = -penalty * total[i]
        elif hints:
            score[i] += hints[i]
        p = parent[i]
        if p >= 0:
            score[p] += score[i]
    # Nothing inside chrome may be chosen, however well it scores on its own.
    in_boiler = boiler[:]
    for i in range(1, n):
        if in_boiler[parent[i]]:
            in_boiler[i] = True
    candidates = [i for i in range(n) if not in_boiler[i]] or [0]
    return max(candidates, key=score.__getitem__), score


def _common_ancestor(nodes: list[int], parent: list[int]) -> int:
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


def _inside(i: int, group: set[int], parent: list[int]) -> bool:
    while i >= 0:
        if i in group:
            return True
        i = parent[i]
    return False


def _card_runs(cards: set[int], parent: list[int], total: list[int], least: float) -> set[int]:
    """The cards of every run holding more than ``least`` characters. A run is an element
    made (80 %) of three or more cards; the cards of a run are its content."""
    n = len(parent)
    count = [0] * n
    chars = [0] * n
    for i in cards:
        count[i] = 1
        chars[i] = total[i]
    for i in range(n - 1, 0, -1):
        p = parent[i]
        if p >= 0 and count[i]:
            count[p] += count[i]
            chars[p] += chars[i]
    runs = [False] * n
    for i in range(n):
        if count[i] >= 3 and chars[i] >= 0.8 * total[i] and chars[i] > least:
            runs[i] = True
    kept = set()
    for i in cards:
        j = i
        while j >= 0 and not runs[j]:
            j = parent[j]
        if j >= 0:
            kept.add(i)
    return kept


def _outermost(flags: list[bool], parent: list[int], within: set[int] | None = None) -> set[int]:
    """Flagged elements with no flagged ancestor (nor one in ``within``); a parent always
    precedes its children in ``flags``."""
    inside = [False] * len(flags)
    found = set()
    for i, flag in enumerate(flags):
        p = parent[i]
        if (p >= 0 and inside[p]) or (within and i in within):
            inside[i] = True
        elif flag:
            inside[i] = True
            found.add(i)
    return found


def _linky(el: Any, total: int, link: int, weights: Weights, host: str) -> bool:
    """Whether a block is dropped from the article for being mostly links."""
    tag = el.tag
    if not total or tag not in _LINKY_BLOCKS:
        return False
    if not weights.list_density:
        return link > weights.link_density_max * total
    if tag == "li":
        return False  # decided for the whole list
    if tag == "p":
        return link > weights.para_link_density_max * total
    if link <= weights.link_density_max * total:
        return False
    if tag in ("ul", "ol") and host:
        # References and "see also" lists point elsewhere; site lists point home.
        hrefs = [str(a.get("href") or "") for a in el.iter("a")]
        away = sum(
            1 for h in hrefs if h.startswith(("http://", "https://", "//")) and host_of(h) != host
        )
        return away * 2 < len(hrefs)
    return True


def host_of(url: str) -> str:
    """The host of ``url`` without ``www.``, lower-cased; empty when it does not parse."""
    try:
        return urlsplit(url).netloc.lower().removeprefix("www.")
    except ValueError:
        return ""


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()
