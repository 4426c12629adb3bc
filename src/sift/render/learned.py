"""Main content chosen by the block classifier, on top of the rules.

The rules (``extract.select``) run first: their container, chrome marks, cards and emitter
verdicts become features of every text block (``blocks``). The first ensemble scores each
block; the second (``context``) reads those scores around each block (neighbours, windows,
the page's mean) and keeps the blocks above its threshold. The output is still one reading
order: the content is the deepest element holding every kept block, emitted in document
order, and the emitter skips exactly the subtrees that hold no kept block (so a kept
block's inline text is never cut, and a dropped block's words never appear unless a kept
block sits inside it). The document title's heading is left out as before
(``Rendered.title`` carries it).

Three gates send a page to the rules alone before the block model runs (each spares the
work after it): the quick article model over the cheap page features, the page-type model's
probability of an article, and the gain model's predicted improvement over the rules.

Without a usable model (or when it keeps nothing) the rules' selection is used as is.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from sift.render.blocks import CONTEXT_FEATURES, FEATURES, Blocks, context_rows, page_blocks
from sift.render.extract import Selection, host_of, is_title_heading, select
from sift.render.model import Model, load
from sift.render.pagekind import (
    PAGE_FEATURES,
    QUICK_FEATURES,
    classify,
    model_helps,
    page_features,
    quick_features,
    sibling_tags,
    surely_article,
)
from sift.render.pagetree import common_ancestor
from sift.render.pagetype import PageInfo

# The thin-content test of ``html.render_html`` (characters, page factor), applied to the
# rules' pick before the model may replace it.
THIN_CHARS = 200
THIN_FACTOR = 3


class _Default:
    """The shipped model (the default of ``render_html``'s ``model``)."""

    def __repr__(self) -> str:
        return "DEFAULT_MODEL"


DEFAULT_MODEL: Any = _Default()


# A page with less text than this is typed "other": a few lines say nothing of the page's
# kind (a two-line page read as a "forum" misleads more than it tells).
MIN_TYPED_CHARS = 500
_LOG_CHARS = QUICK_FEATURES.index("log_chars")  # the same column in PAGE_FEATURES
_FEW_CHARS = math.log1p(MIN_TYPED_CHARS)


@lru_cache(maxsize=1)
def load_model() -> Model | None:
    """The shipped model, checked against the features this code computes; loaded once per
    process; None (with a log warning) when unusable, and the rules render alone."""
    return load(
        {
            "blocks": FEATURES,
            "context": CONTEXT_FEATURES,
            "page_type": PAGE_FEATURES,
            "quick": QUICK_FEATURES,
            "gain": PAGE_FEATURES,
        }
    )


def choose(
    body: Any,
    *,
    title: str | None,
    info: PageInfo,
    base_url: str,
    model: Model | None,
    attrs: dict[Any, list[tuple[str, str]]] | None = None,
    url: str = "",
    meta: dict[str, Any] | None = None,
) -> tuple[Selection, str]:
    """The content of a cleaned page (the rules' selection, refined by ``model``) and the
    page's type (``other`` without a model). ``attrs``: what ``dom.clean`` read; ``url``
    and ``meta``: the page's address and metadata (the page type reads its path, and
    whether it names a date and an author)."""
    sel = select(body, title=title, discussion=info.discussion, host=host_of(base_url), attrs=attrs)
    if model is None:
        return sel, "other"
    quick = quick_features(info, sel, url, meta)
    few = quick[_LOG_CHARS] < _FEW_CHARS  # too little text to say what kind of page it is
    if surely_article(model, quick):
        return sel, "other" if few else "article"
    siblings = sibling_tags(sel.tree)  # read by the page and the block features
    row = page_features(body, info, sel, url, meta, quick, siblings)
    kind, rules_alone = classify(model, row)
    if few:
        kind = "other"
    ens = model.ensembles.get("blocks")
    # Where no part of the page holds more prose than links (a directory, a menu), the rules
    # give the whole page and say so (``thin_content``): the model does not pick a fragment.
    if ens is None or sel.tree is None or rules_alone or sel.score <= 0:
        return sel, kind
    if not model_helps(model, row):
        return sel, kind
    blocks = page_blocks(
        sel, discussion=info.discussion, product=info.product, page_row=row, siblings=siblings
    )
    probs = ens.probability_of_each(blocks.rows)
    context = model.ensembles.get("context")
    if context is not None:
        ens = context
        probs = ens.probability_of_each(context_rows(blocks.rows, probs))
    # Where the rules kept a block the model needs less to keep it than to add one they
    # left out: the two thresholds are tuned on cross-validated probabilities.
    rules = FEATURES.index("rules_kept")
    keep, add = ens.threshold, ens.add_threshold
    chosen = [
        p >= (keep if row[rules] > 0.5 else add) for p, row in zip(probs, blocks.rows, strict=True)
    ]
    if _links_only(sel, blocks.rows, chosen):
        return sel, kind
    return apply(sel, blocks, chosen), kind


def _links_only(sel: Selection, rows: list[list[float]], chosen: list[bool]) -> bool:
    """The rules found next to nothing (their pick is thin: the page goes out whole, with
    ``thin_content``) and what the model would add instead is mostly link text: a menu or
    a directory is not content, and the caller is told the page is thin."""
    if sel.chosen_chars >= THIN_CHARS or sel.text_chars <= THIN_FACTOR * max(sel.chosen_chars, 1):
        return False
    size, links = FEATURES.index("log_chars"), FEATURES.index("link_share")
    kept = [(math.expm1(r[size]), r[links]) for r, k in zip(rows, chosen, strict=True) if k]
    total = sum(c for c, _ in kept)
    return total > 0 and sum(c * share for c, share in kept) > 0.5 * total


def apply(sel: Selection, blocks: Blocks, keep: list[bool]) -> Selection:
    """The selection that emits exactly the kept blocks (the rules' one if none is kept)."""
    kept = [b for b, k in zip(blocks.ids, keep, strict=True) if k]
    t = blocks.tree
    if not kept:
        return sel
    n = len(t.els)
    holds = [False] * n  # the subtree holds a kept block
    for b in kept:
        j = b
        while j >= 0 and not holds[j]:
            holds[j] = True
            j = t.parent[j]
    kept_block = [False] * n
    for b in kept:
        kept_block[b] = True
    owner = blocks.owner
    index = t.index
    title_key = sel.title_key

    def skip(el: Any) -> bool:
        i = index.get(el)
        if i is None:
            return False
        if not holds[i] and not kept_block[owner[i]]:
            return True
        return bool(title_key) and is_title_heading(el, title_key)

    top = common_ancestor(kept, t.parent)
    chars = sum(t.own[i] for i in range(n) if kept_block[owner[i]])
    return Selection(
        t.els[top],
        skip,
        t.total[0],
        t.total[top],
        float(chars),
        t,
        sel.boiler,
        sel.cards,
        sel.keep_links,
        sel.listing,
        title_key,
    )
