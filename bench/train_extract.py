"""Train the block classifier and the page-type classifier; write the shipped model file.

Reproducible: the shared sets (``bench/extract.py`` finds them), a fixed site-to-fold
assignment, LightGBM on one thread with ``deterministic=True`` and fixed seeds, and a
canonical JSON dump, so two runs on the same data write the same bytes.

Steps: every page of both sets is decoded, parsed, cleaned and run through the rules exactly
as ``render`` does; each text block gets its feature row (``sift.render.blocks``) and a label
(share of its word bigrams found in the page's ground truth, >= ``LABEL_SHARE``: content).
Grouped k-fold cross-validation (grouped by site: no page is scored by a model that saw its
site) gives block-level and page-level scores; the final model is trained on everything and
exported as plain arrays to ``src/sift/render/extract_model.json`` with the training-data
hash, the feature lists, the CV scores and ``RENDER_VERSION``.

    .venv/bin/python bench/train_extract.py [--folds 5] [--out PATH] [--limit N]
        [--folds-out PATH]

``--folds-out`` also writes the k fold models (each trained without its fold's sites), so
``bench/extract.py --cv`` scores every page with a model that never saw its site.
``--limit N`` keeps the first N pages of each set (the determinism test uses it).

Data: the scrapinghub and WCXB dev sets, found by bench/data.py (`extraction_set`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data import extraction_set
from extract import SETS, Page, fold_of, load_set, site_of, word_f1
from extract_tuning import (
    LABEL_SHARE,
    PageRows,
    auc,
    kept_text,
    label_blocks,
    page_gains,
    tune_gain,
    tune_gate,
    tune_quick,
    tune_thresholds,
)
from sift.render.blocks import CONTEXT_FEATURES, FEATURES, context_rows
from sift.render.decode import decode
from sift.render.extract import host_of, select
from sift.render.html import prepare
from sift.render.model import FORMAT
from sift.render.options import RENDER_VERSION
from sift.render.pagekind import PAGE_FEATURES, PAGE_TYPES, QUICK_FEATURES, page_features

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src/sift/render/extract_model.json"
SEED = 7

BLOCK_PARAMS: dict[str, Any] = {
    "objective": "binary",
    "learning_rate": 0.1,
    "num_leaves": 15,
    "max_depth": 6,
    "min_data_in_leaf": 40,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "seed": SEED,
    "verbosity": -1,
}
BLOCK_ROUNDS = 120
PAGE_PARAMS: dict[str, Any] = {
    **BLOCK_PARAMS,
    "objective": "multiclass",
    "learning_rate": 0.1,
    "num_class": len(PAGE_TYPES),
    "num_leaves": 7,
    "max_depth": 4,
    "min_data_in_leaf": 10,
}
PAGE_ROUNDS = 80
# The quick article model: a page it calls an article surely enough skips the rest.
QUICK_PARAMS: dict[str, Any] = {**PAGE_PARAMS, "objective": "binary"}
del QUICK_PARAMS["num_class"]
QUICK_ROUNDS = 60
# The gain model: how much the block model improves on the rules' pick of a page (word F1
# of the kept text, out of fold), from its page row.
GAIN_PARAMS: dict[str, Any] = {
    **BLOCK_PARAMS,
    "objective": "regression",
    "learning_rate": 0.05,
    "num_leaves": 7,
    "max_depth": 3,
    "min_data_in_leaf": 20,
}
GAIN_ROUNDS = 100
CONTEXT_PARAMS: dict[str, Any] = {**BLOCK_PARAMS, "num_leaves": 15, "max_depth": 5}
CONTEXT_ROUNDS = 60


def featurize(page: Page, set_name: str) -> PageRows | None:
    from sift.render.blocks import page_blocks

    text, _codec = decode(page.body, None)
    prepared = prepare(text.encode("utf-8", errors="replace"), url=page.url)
    if prepared is None:
        return None
    info = prepared.info
    sel = select(
        prepared.body,
        title=prepared.title,
        discussion=info.discussion,
        host=host_of(prepared.base_url),
        attrs=prepared.attrs,
    )
    page_row = page_features(prepared.body, info, sel, page.url, prepared.metadata)
    blocks = page_blocks(sel, discussion=info.discussion, product=info.product, page_row=page_row)
    return PageRows(
        page.key,
        set_name,
        site_of(page.url) or page.key,
        page.kind,
        page.truth,
        blocks.rows,
        label_blocks(blocks.texts, page.truth),
        blocks.texts,
        page_row,
    )


def data_hash(names: list[str]) -> str:
    h = hashlib.sha256()
    for name in names:
        root = extraction_set(name)
        h.update((root / "ground-truth.json").read_bytes())
        for path in sorted((root / "html").iterdir()):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


# ---- training and export -------------------------------------------------------------------


def train(params: dict[str, Any], rounds: int, rows: list[list[float]], labels: list[int]) -> Any:
    import lightgbm as lgb
    import numpy as np

    data = lgb.Dataset(
        np.asarray(rows, dtype=np.float64),
        label=np.asarray(labels),
        params={"verbosity": -1},
        free_raw_data=True,
    )
    return lgb.train(params, data, num_boost_round=rounds)


def _flatten(node: dict[str, Any], tree: dict[str, list[Any]]) -> int:
    """Append ``node`` to the flat arrays; returns its index (a leaf ``k`` is ``~k``)."""
    if "leaf_value" in node:
        tree["value"].append(round(float(node["leaf_value"]), 12))
        return ~(len(tree["value"]) - 1)
    if node.get("decision_type", "<=") != "<=":
        raise ValueError("only <= splits are exported")
    k = len(tree["feature"])
    tree["feature"].append(int(node["split_feature"]))
    tree["threshold"].append(float(node["threshold"]))
    tree["left"].append(0)
    tree["right"].append(0)
    tree["left"][k] = _flatten(node["left_child"], tree)
    tree["right"][k] = _flatten(node["right_child"], tree)
    return k


def export(booster: Any, n_class: int) -> list[list[dict[str, list[Any]]]]:
    """The booster's trees as flat arrays, one list of trees per class."""
    per_class: list[list[dict[str, list[Any]]]] = [[] for _ in range(n_class)]
    for i, info in enumerate(booster.dump_model()["tree_info"]):
        tree: dict[str, list[Any]] = {"feature": [], "threshold": [], "left": [], "right": []}
        tree["value"] = []
        _flatten(info["tree_structure"], tree)
        per_class[i % n_class].append(tree)
    return per_class


def predict_blocks(booster: Any, rows: list[list[float]]) -> list[float]:
    import numpy as np

    return [float(p) for p in booster.predict(np.asarray(rows, dtype=np.float64))] if rows else []


# ---- cross-validation ----------------------------------------------------------------------


@dataclass
class Fitted:
    """The three models of one training: blocks, context (second stage), page type."""

    blocks: Any
    context: Any
    page_type: Any
    quick: Any
    gain: Any = None  # trained on out-of-fold gains, after cross-validation

    def block_probs(self, rows: list[list[float]]) -> list[float]:
        first = predict_blocks(self.blocks, rows)
        return predict_blocks(self.context, context_rows(rows, first))

    def kind(self, row: list[float]) -> tuple[str, float]:
        """The best type and the probability of ``article``."""
        import numpy as np

        probs = self.page_type.predict(np.asarray([row], dtype=np.float64))[0]
        best = PAGE_TYPES[max(range(len(PAGE_TYPES)), key=lambda c: probs[c])]
        return best, float(probs[PAGE_TYPES.index("article")])

    def quick_article(self, row: list[float]) -> float:
        """The quick model's probability of ``article`` (the row's quick columns)."""
        return predict_blocks(self.quick, [row[: len(QUICK_FEATURES)]])[0]


def _train_blocks(pages: list[PageRows]) -> Any:
    return train(
        BLOCK_PARAMS,
        BLOCK_ROUNDS,
        [r for p in pages for r in p.rows],
        [y for p in pages for y in p.labels],
    )


def fit(pages: list[PageRows], k: int, skip: int | None = None) -> Fitted:
    """Train on every page outside fold ``skip``. The context stage learns from first-stage
    probabilities that are themselves out of fold (nested: each from a model trained
    without that page's fold), as it will see them on new pages."""
    own = [p for p in pages if fold_of(p.site, k) != skip]
    inner: dict[str, list[float]] = {}
    for g in range(k):
        if g == skip:
            continue
        model = _train_blocks([p for p in own if fold_of(p.site, k) != g])
        for p in own:
            if fold_of(p.site, k) == g:
                inner[p.key] = predict_blocks(model, p.rows)
    context = train(
        CONTEXT_PARAMS,
        CONTEXT_ROUNDS,
        [r for p in own for r in context_rows(p.rows, inner[p.key])],
        [y for p in own for y in p.labels],
    )
    page_type = train(
        PAGE_PARAMS,
        PAGE_ROUNDS,
        [p.page_row for p in own],
        [PAGE_TYPES.index(p.kind) if p.kind in PAGE_TYPES else 0 for p in own],
    )
    quick = train(
        QUICK_PARAMS,
        QUICK_ROUNDS,
        [p.page_row[: len(QUICK_FEATURES)] for p in own],
        [int(p.kind == "article") for p in own],
    )
    return Fitted(_train_blocks(own), context, page_type, quick)


def cross_validate(
    pages: list[PageRows], k: int
) -> tuple[dict[str, Any], list[Fitted], dict[str, float]]:
    """Grouped k-fold scores (block AUC and accuracy, word F1 of the kept blocks' text per
    page kind, page-type accuracy and confusion matrix) and the k fold models."""
    oof: dict[str, list[float]] = {}
    type_oof: dict[str, str] = {}
    article: dict[str, float] = {}
    quick: dict[str, float] = {}
    folds = []
    for f in range(k):
        fitted = fit(pages, k, skip=f)
        for p in pages:
            if fold_of(p.site, k) == f:
                oof[p.key] = fitted.block_probs(p.rows)
                type_oof[p.key], article[p.key] = fitted.kind(p.page_row)
                quick[p.key] = fitted.quick_article(p.page_row)
        folds.append(fitted)
        print(f"  fold {f} done", file=sys.stderr)
    scores = [s for p in pages for s in oof[p.key]]
    labels = [y for p in pages for y in p.labels]
    acc = sum(1 for s, y in zip(scores, labels, strict=True) if (s >= 0.5) == y)
    keep_above, add_above = tune_thresholds(pages, oof)
    rules_above = tune_gate(pages, oof, article, keep_above, add_above)
    quick_above = tune_quick(
        pages, oof, (article, rules_above), quick, type_oof, keep_above, add_above
    )
    for p in pages:  # what serving does: the quick model first, then the full one
        if quick[p.key] >= quick_above:
            type_oof[p.key], article[p.key] = "article", 1.0
    gains = page_gains(pages, oof, keep_above, add_above)
    predicted: dict[str, float] = {}
    for f, fitted in enumerate(folds):
        fitted.gain = train_gain([p for p in pages if fold_of(p.site, k) != f], gains)
        for p in pages:
            if fold_of(p.site, k) == f:
                predicted[p.key] = predict_blocks(fitted.gain, [p.page_row])[0]
    gated = {p.key: article[p.key] >= rules_above for p in pages}
    gain_above = tune_gain(pages, oof, gated, predicted, keep_above, add_above)
    per_kind: dict[str, list[float]] = {}
    for p in pages:
        rules = gated[p.key] or predicted[p.key] <= gain_above
        kept = kept_text(p, oof[p.key], keep_above, add_above, rules)
        group = p.kind if p.set_name == "wcxb" else p.set_name
        per_kind.setdefault(group, []).append(word_f1(kept, p.truth))
    typed = [p for p in pages if p.set_name == "wcxb"]
    confusion: dict[str, dict[str, int]] = {}
    for p in typed:
        row = confusion.setdefault(p.kind, {})
        row[type_oof[p.key]] = row.get(type_oof[p.key], 0) + 1
    right = sum(1 for p in typed if type_oof[p.key] == p.kind)
    wcxb = [v for kind, vs in per_kind.items() if kind in PAGE_TYPES for v in vs]
    cv = {
        "folds": k,
        "block_auc": round(auc(scores, labels), 4),
        "block_accuracy": round(acc / max(1, len(labels)), 4),
        "blocks": len(labels),
        "keep_above": keep_above,
        "add_above": add_above,
        "rules_above": rules_above,
        "quick_above": quick_above,
        "pages_quick": sum(1 for p in pages if quick[p.key] >= quick_above),
        "pages_rules_alone": sum(1 for p in pages if article[p.key] >= rules_above),
        "gain_above": gain_above,
        "pages_block_model": sum(
            1 for p in pages if not gated[p.key] and predicted[p.key] > gain_above
        ),
        "kept_blocks_word_f1": {
            "wcxb": round(sum(wcxb) / len(wcxb), 4) if wcxb else 0.0,
            **{kind: round(sum(v) / len(v), 4) for kind, v in sorted(per_kind.items())},
        },
        "page_type_accuracy_wcxb": round(right / max(1, len(typed)), 4),
        "page_type_confusion_wcxb": {
            a: dict(sorted(b.items())) for a, b in sorted(confusion.items())
        },
    }
    return cv, folds, gains


def train_gain(pages: list[PageRows], gains: dict[str, float]) -> Any:
    return train(
        GAIN_PARAMS, GAIN_ROUNDS, [p.page_row for p in pages], [gains[p.key] for p in pages]
    )


def model_file(
    fitted: Fitted, meta: dict[str, Any], thresholds: tuple[float, float, float, float, float]
) -> dict[str, Any]:
    gain = {}
    if fitted.gain is not None:
        gain["gain"] = {
            "features": list(PAGE_FEATURES),
            "threshold": thresholds[4],
            "trees": export(fitted.gain, 1),
        }
    return {
        "format": FORMAT,
        "render_version": RENDER_VERSION,
        **meta,
        "ensembles": {
            "blocks": {"features": list(FEATURES), "trees": export(fitted.blocks, 1)},
            "context": {
                "features": list(CONTEXT_FEATURES),
                "threshold": thresholds[0],
                "add_threshold": thresholds[1],
                "trees": export(fitted.context, 1),
            },
            "page_type": {
                "features": list(PAGE_FEATURES),
                "rules_above": thresholds[2],
                "classes": list(PAGE_TYPES),
                "trees": export(fitted.page_type, len(PAGE_TYPES)),
            },
            "quick": {
                "features": list(QUICK_FEATURES),
                "rules_above": thresholds[3],
                "trees": export(fitted.quick, 1),
            },
            **gain,
        },
    }


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"


def load_pages(limit: int | None) -> tuple[list[PageRows], list[str]]:
    names = sorted(SETS)
    out = []
    for name in names:
        pages = load_set(name, None)
        if limit:
            pages = pages[:limit]
        for page in pages:
            rows = featurize(page, name)
            if rows is not None and rows.rows:
                out.append(rows)
    return out, names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--folds", type=int, default=5, help="k >= 3 (the CV is nested)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--folds-out", type=Path, help="also write the k fold models here")
    parser.add_argument("--limit", type=int, help="first N pages of each set only")
    parser.add_argument("--no-cv", action="store_true", help="skip cross-validation")
    args = parser.parse_args(argv)
    if args.folds < 3:
        parser.error("--folds must be at least 3: the context stage trains on nested folds")

    start = time.process_time()
    pages, names = load_pages(args.limit)
    print(f"{len(pages)} pages featurised in {time.process_time() - start:.0f}s", file=sys.stderr)
    meta: dict[str, Any] = {
        "data_sha256": data_hash(names) if not args.limit else f"first {args.limit} of each set",
        "sets": names,
        "label_share": LABEL_SHARE,
        "block_params": {**BLOCK_PARAMS, "rounds": BLOCK_ROUNDS},
        "context_params": {**CONTEXT_PARAMS, "rounds": CONTEXT_ROUNDS},
        "page_params": {**PAGE_PARAMS, "rounds": PAGE_ROUNDS},
        "quick_params": {**QUICK_PARAMS, "rounds": QUICK_ROUNDS},
        "gain_params": {**GAIN_PARAMS, "rounds": GAIN_ROUNDS},
    }
    thresholds = (0.5, 0.5, 2.0, 2.0, -1.0)
    gains: dict[str, float] = {}
    if not args.no_cv:
        meta["cv"], folds, gains = cross_validate(pages, args.folds)
        cv = meta["cv"]
        thresholds = (
            cv["keep_above"],
            cv["add_above"],
            cv["rules_above"],
            cv["quick_above"],
            cv["gain_above"],
        )
        print(json.dumps(meta["cv"], indent=1), file=sys.stderr)
        if args.folds_out:
            fold_files = {
                "folds": args.folds,
                "models": [model_file(f, {}, thresholds) for f in folds],
            }
            args.folds_out.parent.mkdir(parents=True, exist_ok=True)
            args.folds_out.write_text(dump(fold_files), "utf-8")
    final = fit(pages, args.folds)
    if gains:
        final.gain = train_gain(pages, gains)
    args.out.write_text(dump(model_file(final, meta, thresholds)), "utf-8")
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size / 1e6:.2f} MB) in {time.process_time() - start:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
