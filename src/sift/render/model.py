"""The shipped gradient-boosted models, as plain arrays, and their evaluation.

``extract_model.json`` (package data, written by ``bench/train_extract.py``) holds one or more
tree ensembles exported from LightGBM: per tree, flat arrays of split feature, threshold,
left and right child (a negative child ``~k`` is leaf ``k``) and leaf values. Serving needs no
ML library: at load time each ensemble becomes one small Python function of nested
comparisons (compiled from the validated numbers only), which scores a feature row in a few
microseconds.

The file also carries what it was trained on: ``render_version`` (a model for another
``RENDER_VERSION`` is not used), ``features`` per ensemble (must equal the code's list),
``data_sha256`` of the training sets and the cross-validation scores.

``load()`` never raises: a missing, damaged or mismatched file gives ``None`` and one log
warning, and rendering falls back to the rules.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from sift.render.options import RENDER_VERSION

log = logging.getLogger("sift.render")

MODEL_FILE = "extract_model.json"
FORMAT = "sift-gbdt-1"
# Bounds on what a model file may hold, so a damaged one cannot make a huge function.
MAX_TREES = 2000
MAX_NODES = 400_000

Scorer = Callable[[Sequence[float]], float]


@dataclass
class Ensemble:
    """One tree ensemble: ``raw(row)`` is the sum of its trees' leaves for one class."""

    features: tuple[str, ...]
    classes: tuple[str, ...]  # one name for a binary model; one per class for multiclass
    scorers: list[Scorer]
    threshold: float = 0.5
    add_threshold: float = 0.5  # (context) for blocks the rules left out
    # (page_type) at or above this probability of "article" the rules decide alone
    rules_above: float = 2.0
    meta: dict[str, Any] = field(default_factory=dict)

    def raw(self, row: Sequence[float]) -> float:
        """The sum of the trees' leaves for one row (a regression model's prediction)."""
        return self.scorers[0](row)

    def probability(self, row: Sequence[float]) -> float:
        """A binary model's probability of the positive class."""
        z = self.scorers[0](row)
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def probability_of_each(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """``probability`` of every row (one call: the scorer and ``exp`` bound once)."""
        score, exp = self.scorers[0], math.exp
        return [1.0 / (1.0 + exp(-z)) if z > -700 else 0.0 for z in map(score, rows)]

    def probabilities(self, row: Sequence[float]) -> list[float]:
        """A multiclass model's softmax probabilities, in ``classes`` order."""
        raw = [s(row) for s in self.scorers]
        top = max(raw)
        exps = [math.exp(r - top) for r in raw]
        total = sum(exps)
        return [e / total for e in exps]

    def classify(self, row: Sequence[float]) -> tuple[str, float]:
        """A multiclass model's best class and its probability."""
        probs = self.probabilities(row)
        k = probs.index(max(probs))
        return self.classes[k], probs[k]


@dataclass
class Model:
    """Every ensemble of the model file, by name (``blocks``, ``context``, ``page_type``)."""

    ensembles: dict[str, Ensemble]
    meta: dict[str, Any]


def _expr(tree: dict[str, Any], node: int, n_features: int, depth: int = 0) -> str:
    """The tree below ``node`` as a nested conditional expression over ``x0``, ``x1`` …"""
    if depth > 64:
        raise ValueError("tree too deep")
    if node < 0:
        return repr(float(tree["value"][~node]))
    f = int(tree["feature"][node])
    if not 0 <= f < n_features:
        raise ValueError("split feature out of range")
    thr = float(tree["threshold"][node])
    if math.isnan(thr):
        raise ValueError("NaN threshold")
    left = _expr(tree, int(tree["left"][node]), n_features, depth + 1)
    right = _expr(tree, int(tree["right"][node]), n_features, depth + 1)
    return f"(({left}) if x{f} <= {thr!r} else ({right}))"


def compile_trees(trees: list[dict[str, Any]], n_features: int, name: str) -> Scorer:
    """One function summing ``trees`` (each ``{feature, threshold, left, right, value}``;
    a tree of one leaf has empty split arrays)."""
    terms = []
    for tree in trees:
        if not tree["feature"]:
            terms.append(repr(float(tree["value"][0])))
        else:
            terms.append(_expr(tree, 0, n_features))
    body = " + ".join(terms) if terms else "0.0"
    # The row is unpacked into locals once: a local is read faster than an indexed item.
    names = ", ".join(f"x{i}" for i in range(n_features))
    unpack = f"    ({names},) = row\n" if n_features else ""
    source = f"def score(row):\n{unpack}    return {body}\n"
    namespace: dict[str, Any] = {}
    # Safe to execute: every token above is a number from int()/float() of the file.
    exec(compile(source, f"<sift model {name}>", "exec"), {"__builtins__": {}}, namespace)
    scorer: Scorer = namespace["score"]
    return scorer


def parse(data: dict[str, Any], features: dict[str, tuple[str, ...]]) -> Model:
    """A ``Model`` from a model file's JSON, checked against the code's feature lists.
    Raises ValueError when the file does not fit this code."""
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
    if data.get("render_version") != RENDER_VERSION:
        raise ValueError(f"trained for RENDER_VERSION {data.get('render_version')}")
    ensembles: dict[str, Ensemble] = {}
    nodes = 0
    for name, spec in dict(data["ensembles"]).items():
        names = tuple(str(f) for f in spec["features"])
        if name in features and names != features[name]:
            raise ValueError(f"{name}: feature list differs from the code's")
        per_class = spec["trees"]
        if sum(len(trees) for trees in per_class) > MAX_TREES:
            raise ValueError(f"{name}: too many trees")
        nodes += sum(len(t["value"]) for trees in per_class for t in trees)
        if nodes > MAX_NODES:
            raise ValueError("too many nodes")
        scorers = [compile_trees(trees, len(names), name) for trees in per_class]
        classes = tuple(str(c) for c in spec.get("classes") or [name])
        threshold = float(spec.get("threshold", 0.5))
        add = float(spec.get("add_threshold", threshold))
        rules_above = float(spec.get("rules_above", 2.0))
        ensembles[name] = Ensemble(names, classes, scorers, threshold, add, rules_above)
    return Model(ensembles, {k: v for k, v in data.items() if k != "ensembles"})


def read(text: str, features: dict[str, tuple[str, ...]]) -> Model | None:
    """``parse`` of a model file's text; None (and a log warning) when it does not fit."""
    try:
        return parse(json.loads(text), features)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, SyntaxError) as exc:
        log.warning("extraction model not used (%s); falling back to the rules", exc)
        return None


def load(features: dict[str, tuple[str, ...]]) -> Model | None:
    """The shipped model, checked against the code's ``features`` (ensemble name -> feature
    names); None (with a warning) when unusable. Callers cache it (``learned.load_model``):
    the feature lists live with the code that computes them, above this module."""
    try:
        text = resources.files("sift.render").joinpath(MODEL_FILE).read_text("utf-8")
    except OSError as exc:
        log.warning("extraction model not found (%s); falling back to the rules", exc)
        return None
    return read(text, features)
