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
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sift.render.markdown import BLOCK_TAGS
from sift.render.pagetree import (
    HEADING_TAGS,
    PageTree,
    common_ancestor,
    inside,
    outermost,
)
from sift.render.patterns import (
    COMMENT,
    NOT_BOILER,
    STRONG,
    WEAK,
    boiler_kinds,
    is_content_hint,
)

# Block elements that are dropped from the article when links dominate them.
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


@dataclass
class Selection:
    """The chosen container and the predicate that drops chrome inside it.

    The rest is what the rules saw, for the block features (``blocks``): the measured tree,
    the chrome marks, the teaser cards, and the elements kept whatever their links.
    """

    container: Any
    skip: Callable[[Any], bool]
    text_chars: int  # visible characters of the whole page
    chosen_chars: int  # visible characters in the container
    score: float = 0.0  # the container's weight: <= 0 when no subtree has more prose than links
    tree: PageTree | None = None
    boiler: list[bool] = field(default_factory=list)
    cards: set[int] = field(default_factory=set)
    keep_links: list[bool] = field(default_factory=list)
    listing: bool = False
    title_key: str = ""


def select(
    body: Any,
    *,
    title: str | None,
    weights: Weights | None = None,
    discussion: bool = False,
    host: str = "",
    attrs: dict[Any, list[tuple[str, str]]] | None = None,
) -> Selection:
    """Find the article container under ``body`` (a cleaned tree).

    ``discussion`` (the page declares itself a forum thread or Q&A) makes posts marked as
    comments content. (Inferring it from comments holding most of the text was tried and
    dropped: it turns long comment sections under short articles into content.)
    ``host`` (the page's) tells lists of links to other sites (references) from site lists.
    ``attrs``: the attributes ``dom.clean`` read (read again here without them).
    """
    weights = weights or DEFAULT_WEIGHTS
    t = PageTree.of(body, attrs)
    n = len(t.els)
    boiler = _chrome(t, weights, discussion)
    tops, runs = _teasers(t, weights, boiler)
    for top in tops:
        boiler[top] = True
    prose = _prose_inline(t, boiler) if weights.prose_inline else [False] * n
    base = [
        -weights.link_penalty * t.own[i]
        if t.in_link[i]
        else t.own[i] * (1.0 if t.in_para[i] else weights.loose_weight)
        for i in range(n)
    ]
    hints = (
        [weights.hint_bonus * t.para[i] if is_content_hint(t.els[i]) else 0.0 for i in range(n)]
        if weights.hint_bonus
        else None
    )
    best, score = _pick(base, boiler, t.parent, t.total, weights.boiler_penalty, hints)
    keep_links = [False] * n
    listing = False  # a run of cards is the content: links are not a sign of a directory
    # A run of cards holding more text than the best prose block beside it holds
    # paragraphs is the page's content (a listing), not teasers around an article.
    if runs and (t.para[best] * 2 < sum(t.total[i] for i in runs) or inside(best, runs, t.parent)):
        for i in runs:
            boiler[i] = False
        best, score = _pick(base, boiler, t.parent, t.total, weights.boiler_penalty, hints)
        # The content spans the cards and the best block (an intro above them).
        best = common_ancestor([best, *runs], t.parent)
        listing = True
        _keep_cards(t, runs, keep_links)
    weight = float(t.total[best]) if listing else score[best]
    best = _widen(best, t, weights, boiler, score, listing)
    title_key = norm(title) if title else ""
    skip = _skipper(t, weights, boiler, prose, keep_links, title_key, host)
    return Selection(
        t.els[best],
        skip,
        t.total[0],
        t.total[best],
        weight,
        t,
        boiler,
        tops,
        keep_links,
        listing,
        title_key,
    )


def _chrome(t: PageTree, weights: Weights, discussion: bool) -> list[bool]:
    """Chrome marks by tag, role and class words, with the false alarms taken back."""
    n = len(t.els)
    total, link = t.total, t.link
    # The guard measures plain (non-link) text: many articles have no <p> at all.
    guard = weights.guard_share * (total[0] - link[0])
    kinds, words = boiler_kinds(t.tags, t.items)
    boiler = [False] * n
    weak_keep = weights.weak_keep_para or total[0] + 1
    headings = weights.headings_content
    schemes = _naming_schemes(t, kinds, words, weights) if weights.scheme_share else {}
    for i in [i for i, kind in enumerate(kinds) if kind]:  # NOT_BOILER is 0: most elements
        kind = kinds[i]
        if kind == COMMENT:
            kind = NOT_BOILER if discussion else STRONG
        if kind == WEAK and (total[i] - link[i] > guard or t.para[i] >= weak_keep):
            continue  # a weak word on the element that holds the text: a false alarm
        if kind == WEAK and i in schemes:
            continue  # the page's name for its repeated content blocks
        if kind != NOT_BOILER and headings and t.in_heading[i] and t.tags[i] != "header":
            continue  # section headings are content whatever their class
        if kind in (STRONG, WEAK):
            boiler[i] = True
    return boiler


def _teasers(t: PageTree, weights: Weights, boiler: list[bool]) -> tuple[set[int], set[int]]:
    """Teaser cards (a linked headline plus a short blurb: listings of other pages), and
    the cards of runs that are what the page is: cards sharing a parent that hold most of
    the text outside chrome (a listing, a listicle of venues)."""
    total, link, parent = t.total, t.link, t.parent
    tops: set[int] = set()
    for i, tag in enumerate(t.tags):  # the tags read once: each el.tag builds a new str
        if tag in HEADING_TAGS and total[i] and link[i] >= 0.8 * total[i]:
            j, top = i, -1
            while parent[j] > 0 and total[parent[j]] <= weights.teaser_max_chars:
                j = parent[j]
                top = j
            if top > 0:
                tops.add(top)
    runs: set[int] = set()
    if tops and weights.card_run_share:
        chrome = outermost(boiler, parent)
        outside = total[0] - sum(total[i] for i in chrome)
        cards = outermost([i in tops for i in range(len(t.els))], parent, chrome)
        runs = _card_runs(cards, parent, total, weights.card_run_share * outside)
    return tops, runs


def _prose_inline(t: PageTree, boiler: list[bool]) -> list[bool]:
    """Inline elements in running prose (text beside them in the same block): never
    chrome, so a sentence never loses words in the middle."""
    prose = [False] * len(t.els)
    for i in range(1, len(t.els)):
        p = t.parent[i]
        if p >= 0 and t.in_para[p] and t.own[p] and t.tags[i] not in BLOCK_TAGS:
            prose[i] = True
            boiler[i] = False
    return prose


def _keep_cards(t: PageTree, runs: set[int], keep_links: list[bool]) -> None:
    """Cards are mostly link text: neither they nor what holds them are dropped for it."""
    for i in runs:
        j = i
        while j >= 0 and not keep_links[j]:
            keep_links[j] = True
            j = t.parent[j]
    in_card = [False] * len(t.els)
    for i in range(1, len(t.els)):
        p = t.parent[i]
        if in_card[p] or p in runs:
            in_card[i] = keep_links[i] = True


def _widen(
    best: int, t: PageTree, weights: Weights, boiler: list[bool], score: list[float], listing: bool
) -> int:
    """The winner widened to its parent when it is one paragraph among several, or one
    section of a page made of sections."""
    els, parent = t.els, t.parent
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
        best = _gather_sections(best, els, t.index, parent, score, boiler, weights.gather_sections)
    return best


def _skipper(
    t: PageTree,
    weights: Weights,
    boiler: list[bool],
    prose: list[bool],
    keep_links: list[bool],
    title_key: str,
    host: str,
) -> Callable[[Any], bool]:
    """The emitter's predicate: chrome, link-dominated blocks, the title's heading."""
    index, total, link = t.index, t.total, t.link
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
        return bool(title_key) and is_title_heading(el, title_key)

    return skip


def is_title_heading(el: Any, title_key: str) -> bool:
    """An ``h1``/``h2`` equal to (or inside) the normalised document title."""
    if el.tag in ("h1", "h2"):
        text = norm("".join(el.itertext()))
        if text and (text == title_key or (len(text) > 15 and text in title_key)):
            return True
    return False


def linky_block(el: Any, total: int, link: int, host: str) -> bool:
    """The rules' verdict on a block for being mostly links, with the default weights."""
    return _linky(el, total, link, DEFAULT_WEIGHTS, host)


def _naming_schemes(
    t: PageTree, kinds: list[int], words: dict[int, str], weights: Weights
) -> dict[int, str]:
    """Weak chrome words that the page puts on three or more blocks holding together more
    than ``scheme_share`` of its text (``elementor-widget``, ``promo`` cards of a landing
    page): there the word names the page's building blocks, not its chrome. Returns the
    elements that carry such a word (index -> word)."""
    total, link, parent = t.total, t.link, t.parent
    word_of = {i: w for i, w in words.items() if kinds[i] == WEAK}
    count: dict[str, int] = {}
    chars: dict[str, int] = {}
    for i, word in word_of.items():
        # Outermost per word: an element inside another with the same word is not counted.
        j = parent[i]
        while j >= 0 and word_of.get(j) != word:
            j = parent[j]
        if j < 0:
            count[word] = count.get(word, 0) + 1
            chars[word] = chars.get(word, 0) + total[i] - link[i]
    least = weights.scheme_share * (total[0] - link[0])
    schemes = {w for w, c in chars.items() if c > least and count[w] >= 3}
    return {i: w for i, w in word_of.items() if w in schemes}


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


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()
