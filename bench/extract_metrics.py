"""The extraction benchmark's metrics: scrapinghub's shingle precision/recall/F1 and WCXB's
word F1 (``bench/extract.py`` says how each is computed and averaged).

Data: none of its own; the sets are read by ``bench/extract.py`` (bench/data.py says
where they come from).
"""

from __future__ import annotations

import re
from collections import Counter

_SHINGLE_TOKEN = re.compile(r"\w+", re.UNICODE)
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")


# ---- scrapinghub's shingle metric -------------------------------------------------------------


def shingles(text: str, n: int = 4) -> Counter[tuple[str, ...]]:
    tokens = _SHINGLE_TOKEN.findall(text or "")
    grams = (tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)))
    return Counter(g for g in grams if g)


def tp_fp_fn(true: str, pred: str) -> tuple[float, float, float]:
    t, p = shingles(true), shingles(pred)
    tp = float(sum((t & p).values()))
    fp = float(sum((p - t).values()))
    fn = float(sum((t - p).values()))
    s = tp + fp + fn
    return (tp / s, fp / s, fn / s) if s > 0 else (tp, fp, fn)


def _precision(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fp == 0:
        return 0.0
    return tp / (tp + fp)


def _recall(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fn == 0:
        return 0.0
    return tp / (tp + fn)


def metrics(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    ps = [_precision(*r) for r in rows if r[0] + r[1] > 0]
    rs = [_recall(*r) for r in rows if r[0] + r[2] > 0]
    p = sum(ps) / len(ps) if ps else 0.0
    r = sum(rs) / len(rs) if rs else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


# ---- WCXB's word metric -------------------------------------------------------------------


def word_f1(pred: str, true: str) -> float:
    """WCXB's per-page F1 over lower-cased ``\\w+`` word multisets."""
    ref = _SHINGLE_TOKEN.findall(true.lower()) if true else []
    got = _SHINGLE_TOKEN.findall(pred.lower()) if pred else []
    if not ref:
        return 1.0 if not got else 0.0
    if not got:
        return 0.0
    overlap = sum((Counter(got) & Counter(ref)).values())
    if not overlap:
        return 0.0
    p, r = overlap / len(got), overlap / len(ref)
    return 2 * p * r / (p + r)


def strip_markdown_targets(md: str) -> str:
    """Markdown with link targets and image paths removed (their visible text kept)."""
    return _MD_LINK.sub(r"\1", _MD_IMAGE.sub("", md))
