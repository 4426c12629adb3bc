"""Labels, scores, thresholds and gates of the extraction model (out-of-fold figures).

``bench/train_extract.py`` cross-validates the block model, then calls these: the keep/add
thresholds, the article gate, the quick gate and the gain gate, each on the same objective
(the mean of the two sets' word F1 of the kept blocks' text, each set weighing the same).

Data: the out-of-fold figures ``bench/train_extract.py`` computes from the sets
bench/data.py gets.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from extract import word_f1
from sift.render.blocks import FEATURES

LABEL_SHARE = 0.5
_WORD = re.compile(r"\w+")
# How much of the objective the quick gate may cost (of the page-type accuracy: nothing).
QUICK_SLACK = 0.002
# How much of the objective the gain gate may cost (it spares the block model's CPU).
GAIN_SLACK = 0.001


@dataclass
class PageRows:
    """One page's block rows, labels and texts, and its page-type row."""

    key: str
    set_name: str
    site: str
    kind: str
    truth: str
    rows: list[list[float]]
    labels: list[int]
    texts: list[str]
    page_row: list[float]


def kept_text(
    p: PageRows, probs: list[float], keep_above: float, add_above: float, rules: bool = False
) -> str:
    """The text of the blocks kept: above ``keep_above`` where the rules kept the block,
    above ``add_above`` where they did not; with ``rules``, the rules' blocks."""
    rk = FEATURES.index("rules_kept")
    if rules:
        return " ".join(t for t, row in zip(p.texts, p.rows, strict=True) if row[rk] > 0.5)
    return " ".join(
        t
        for t, row, s in zip(p.texts, p.rows, probs, strict=True)
        if s >= (keep_above if row[rk] > 0.5 else add_above)
    )


def _by_set_mean(pages: list[PageRows], text_of: Any) -> float:
    by_set: dict[str, list[float]] = {}
    for p in pages:
        by_set.setdefault(p.set_name, []).append(word_f1(text_of(p), p.truth))
    return sum(sum(v) / len(v) for v in by_set.values()) / len(by_set)


def tune_gate(
    pages: list[PageRows],
    oof: dict[str, list[float]],
    article: dict[str, float],
    keep_above: float,
    add_above: float,
) -> float:
    """The probability of ``article`` at or above which the rules decide alone: the best of a
    few on the same objective as the thresholds (2.0: never)."""
    best = (-1.0, 2.0)
    for gate in (2.0, 0.95, 0.9, 0.8, 0.7, 0.6):
        score = _by_set_mean(
            pages,
            lambda p, g=gate: kept_text(p, oof[p.key], keep_above, add_above, article[p.key] >= g),
        )
        if score > best[0] + 1e-9:
            best = (score, gate)
    return best[1]


def page_gains(
    pages: list[PageRows], oof: dict[str, list[float]], keep_above: float, add_above: float
) -> dict[str, float]:
    """Per page: word F1 of the blocks the model keeps minus that of the rules' blocks."""
    return {
        p.key: word_f1(kept_text(p, oof[p.key], keep_above, add_above), p.truth)
        - word_f1(kept_text(p, oof[p.key], keep_above, add_above, True), p.truth)
        for p in pages
    }


def tune_gain(
    pages: list[PageRows],
    oof: dict[str, list[float]],
    gated: dict[str, bool],
    predicted: dict[str, float],
    keep_above: float,
    add_above: float,
) -> float:
    """The predicted gain at or below which the rules decide alone: the highest of a few
    (the fewest pages sent to the block model) that costs at most ``GAIN_SLACK`` of the
    thresholds' objective (-1.0: every page the other gates let through)."""

    def score(tau: float) -> float:
        def text_of(p: PageRows) -> str:
            rules = gated[p.key] or predicted[p.key] <= tau
            return kept_text(p, oof[p.key], keep_above, add_above, rules)

        return _by_set_mean(pages, text_of)

    base = score(-1.0)
    best = -1.0
    for tau in (0.0, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02):
        if score(tau) < base - GAIN_SLACK:
            break
        best = tau
    return best


def tune_quick(
    pages: list[PageRows],
    oof: dict[str, list[float]],
    gate: tuple[dict[str, float], float],
    quick: dict[str, float],
    type_oof: dict[str, str],
    keep_above: float,
    add_above: float,
) -> float:
    """The quick model's probability at or above which a page is typed an article and the
    rules decide alone, without the full page features: the lowest of a few (the most
    pages spared) that costs at most ``QUICK_SLACK`` of the thresholds' objective and
    nothing of the page-type accuracy on WCXB (2.0: never)."""
    article, rules_above = gate
    typed = [p for p in pages if p.set_name == "wcxb"]

    def scores(q: float) -> tuple[float, float]:
        def text_of(p: PageRows) -> str:
            rules = quick[p.key] >= q or article[p.key] >= rules_above
            return kept_text(p, oof[p.key], keep_above, add_above, rules)

        right = sum(
            1 for p in typed if ("article" if quick[p.key] >= q else type_oof[p.key]) == p.kind
        )
        return _by_set_mean(pages, text_of), right / max(1, len(typed))

    base = scores(2.0)
    best = 2.0
    for q in (0.99, 0.98, 0.97, 0.95, 0.9, 0.85, 0.8):
        objective, accuracy = scores(q)
        if objective < base[0] - QUICK_SLACK or accuracy < base[1]:
            break
        best = q
    return best


def tune_thresholds(pages: list[PageRows], oof: dict[str, list[float]]) -> tuple[float, float]:
    """The two thresholds that maximise the mean of the sets' word F1 of kept text (each set
    weighs the same, whatever its size), on out-of-fold probabilities; ties go to the
    first, so the choice is deterministic."""
    best = (-1.0, 0.5, 0.5)
    for keep_above in (0.2, 0.3, 0.4, 0.5):
        for add_above in (0.5, 0.55, 0.6, 0.65, 0.7, 0.8):
            by_set: dict[str, list[float]] = {}
            for p in pages:
                text = kept_text(p, oof[p.key], keep_above, add_above)
                by_set.setdefault(p.set_name, []).append(word_f1(text, p.truth))
            score = sum(sum(v) / len(v) for v in by_set.values()) / len(by_set)
            if score > best[0] + 1e-9:
                best = (score, keep_above, add_above)
    return best[1], best[2]


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def label_blocks(texts: list[str], truth: str) -> list[int]:
    """1 for a block whose word bigrams (single words for one-word blocks) are mostly in
    the ground truth, else 0."""
    words = _tokens(truth)
    unigrams = set(words)
    bigrams = set(itertools.pairwise(words))
    out = []
    for text in texts:
        toks = _tokens(text)
        if len(toks) >= 2:
            pairs = list(itertools.pairwise(toks))
            share = sum(1 for p in pairs if p in bigrams) / len(pairs)
        elif toks:
            share = 1.0 if toks[0] in unigrams else 0.0
        else:
            share = 0.0
        out.append(1 if share >= LABEL_SHARE else 0)
    return out


def auc(scores: list[float], labels: list[int]) -> float:
    pairs = sorted(zip(scores, labels, strict=True))
    pos = sum(labels)
    neg = len(labels) - pos
    if not pos or not neg:
        return 0.0
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        avg = (i + j + 1) / 2
        rank_sum += avg * sum(label for _, label in pairs[i:j])
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)
