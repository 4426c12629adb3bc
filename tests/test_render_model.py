"""The learned block classifier: the shipped model, its evaluation, the fallback, training.

The shipped model must load, fit the code's feature lists and ``RENDER_VERSION``, and stay
small; a file that does not fit gives the rules with one warning, never a crash; exported
trees score exactly as their arrays say; blocks and their features are those of the page;
retraining on a fixed subset writes the same bytes twice.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from sift.render import RENDER_VERSION, Rendered, RenderOptions, learned, render
from sift.render import model as model_mod
from sift.render.blocks import CONTEXT_FEATURES, FEATURES, context_rows, page_blocks
from sift.render.extract import select
from sift.render.html import prepare
from sift.render.learned import apply
from sift.render.pagekind import OTHER_BELOW, PAGE_FEATURES, PAGE_TYPES, QUICK_FEATURES, page_type

REPO = Path(__file__).resolve().parent.parent
CODE_FEATURES = {
    "blocks": FEATURES,
    "context": CONTEXT_FEATURES,
    "page_type": PAGE_FEATURES,
    "quick": QUICK_FEATURES,
    "gain": PAGE_FEATURES,
}
PROSE = (
    "This paragraph is the article: it runs long enough to be the main content of the page, "
    "with several sentences of plain prose and no links at all inside it."
)
PAGE = (
    "<html><head><title>A page</title></head><body>"
    '<nav><a href="/a">Home</a> <a href="/b">News</a> <a href="/c">About</a></nav>'
    f"<article><h2>First part</h2><p>{PROSE}</p><p>Second: {PROSE}</p></article>"
    "<footer>Copyright the example company, all rights reserved.</footer></body></html>"
)


def _tree(
    feature: list[int],
    threshold: list[float],
    left: list[int],
    right: list[int],
    value: list[float],
) -> dict[str, list[float] | list[int]]:
    return {
        "feature": feature,
        "threshold": threshold,
        "left": left,
        "right": right,
        "value": value,
    }


def _file(trees: dict[str, list[list[dict[str, object]]]], **extra: object) -> dict[str, object]:
    ensembles = {
        name: {"features": list(CODE_FEATURES[name]), "trees": per_class}
        for name, per_class in trees.items()
    }
    if "page_type" in ensembles:
        ensembles["page_type"]["classes"] = list(PAGE_TYPES)
    return {
        "format": model_mod.FORMAT,
        "render_version": RENDER_VERSION,
        "ensembles": ensembles,
        **extra,
    }


def test_shipped_model_loads_fits_the_code_and_is_small() -> None:
    path = resources.files("sift.render").joinpath(model_mod.MODEL_FILE)
    data = json.loads(path.read_text("utf-8"))
    assert len(path.read_bytes()) <= 2 * 1024 * 1024
    assert data["render_version"] == RENDER_VERSION
    assert len(data["data_sha256"]) == 64
    assert set(data["cv"]) >= {
        "block_auc",
        "page_type_accuracy_wcxb",
        "kept_blocks_word_f1",
        "rules_above",
        "quick_above",
        "gain_above",
    }
    learned.load_model.cache_clear()
    model = learned.load_model()
    assert model is not None
    assert set(model.ensembles) == {"blocks", "context", "page_type", "quick", "gain"}
    # The page-type row opens with the quick row: the quick model's columns are its first.
    assert PAGE_FEATURES[: len(QUICK_FEATURES)] == QUICK_FEATURES
    for name, ens in model.ensembles.items():
        assert ens.features == CODE_FEATURES[name]
    assert model.ensembles["page_type"].classes == PAGE_TYPES


def test_exported_trees_score_exactly() -> None:
    split = _tree([0], [0.5], [-1], [-2], [1.0, -1.0])  # x0 <= 0.5: leaf 0, else leaf 1
    deeper = _tree([1, 0], [2.0, 0.25], [1, -1], [-3, -2], [0.5, 0.125, 4.0])
    leaf = _tree([], [], [], [], [0.25])
    score = model_mod.compile_trees([split, deeper, leaf], 2, "t")
    assert score([0.3, 1.0]) == 1.0 + 0.125 + 0.25  # x1 <= 2, then x0 > 0.25
    assert score([0.2, 1.0]) == 1.0 + 0.5 + 0.25
    assert score([0.7, 3.0]) == -1.0 + 4.0 + 0.25
    assert score([0.5, 2.0]) == 1.0 + 0.125 + 0.25  # thresholds are inclusive


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps(_file({"blocks": [[]]}, render_version=RENDER_VERSION - 1)),
        json.dumps({**_file({"blocks": [[]]}), "format": "other"}),
        json.dumps(_file({"blocks": [[_tree([999], [0.5], [-1], [-2], [1.0, 2.0])]]})),
    ],
)
def test_a_model_that_does_not_fit_gives_none_and_a_warning(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sift.render"):
        assert model_mod.read(text, CODE_FEATURES) is None
    assert "falling back to the rules" in caplog.text


def test_a_model_with_other_features_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    data = _file({"blocks": [[]]})
    data["ensembles"]["blocks"]["features"] = ["log_chars"]  # type: ignore[index]
    with caplog.at_level(logging.WARNING, logger="sift.render"):
        assert model_mod.read(json.dumps(data), CODE_FEATURES) is None
    assert "feature list differs" in caplog.text


def test_without_a_model_the_rules_render() -> None:
    options = RenderOptions(format="text")
    got = render(
        PAGE.encode(),
        content_type="text/html",
        url="https://e.example/",
        options=options,
        model=None,
    )
    assert got.content == f"First part\n\n{PROSE}\n\nSecond: {PROSE}"
    assert got.page_type == "other"
    assert got.extractor == "sift"


def test_a_constant_model_keeps_everything_or_falls_back() -> None:
    keep_all = model_mod.parse(_file({"blocks": [[_tree([], [], [], [], [5.0])]]}), CODE_FEATURES)
    options = RenderOptions(format="text")
    got = render(
        PAGE.encode(),
        content_type="text/html",
        url="https://e.example/",
        options=options,
        model=keep_all,
    )
    assert got.content == (
        f"Home News About\n\nFirst part\n\n{PROSE}\n\nSecond: {PROSE}\n\n"
        "Copyright the example company, all rights reserved."
    )
    keep_none = model_mod.parse(_file({"blocks": [[_tree([], [], [], [], [-5.0])]]}), CODE_FEATURES)
    got = render(
        PAGE.encode(),
        content_type="text/html",
        url="https://e.example/",
        options=options,
        model=keep_none,
    )
    assert got.content == f"First part\n\n{PROSE}\n\nSecond: {PROSE}"  # the rules' choice


LONG = PAGE.replace("</article>", f"<p>Third: {PROSE}</p><p>Fourth: {PROSE}</p></article>")
LONG_TEXT = f"First part\n\n{PROSE}\n\nSecond: {PROSE}\n\nThird: {PROSE}\n\nFourth: {PROSE}"


def test_a_surely_article_page_is_typed_by_the_quick_model_and_kept_by_the_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keep_all = [[_tree([], [], [], [], [5.0])]]
    forum = [[_tree([], [], [], [], [3.0 if k == 1 else 0.0])] for k in range(len(PAGE_TYPES))]
    quick = [[_tree([], [], [], [], [6.0])]]  # p(article) = 0.9975 on every page
    data = _file({"blocks": keep_all, "page_type": forum, "quick": quick})
    data["ensembles"]["quick"]["rules_above"] = 0.99  # type: ignore[index]
    sure = model_mod.parse(data, CODE_FEATURES)
    full: list[int] = []
    real = learned.page_features
    monkeypatch.setattr(learned, "page_features", lambda *a, **k: full.append(1) or real(*a, **k))
    options = RenderOptions(format="text")

    def run(model: model_mod.Model | None) -> Rendered:
        return render(
            LONG.encode(),
            content_type="text/html",
            url="https://e.example/a",
            options=options,
            model=model,
        )

    got = run(sure)
    assert (got.page_type, got.content, full) == ("article", LONG_TEXT, [])  # the rules' pick
    data["ensembles"]["quick"]["rules_above"] = 0.999  # type: ignore[index]
    got = run(model_mod.parse(data, CODE_FEATURES))
    # Below its bar: the full row is computed, the full model types the page, blocks decide.
    assert (got.page_type, full) == ("forum", [1])
    assert got.content.startswith("Home News About\n\nFirst part")


@pytest.mark.parametrize(("predicted", "blocks_decide"), [(0.01, False), (0.03, True)])
def test_the_gain_model_sends_a_page_to_the_blocks_only_above_its_threshold(
    predicted: float, blocks_decide: bool
) -> None:
    keep_all = [[_tree([], [], [], [], [5.0])]]
    data = _file({"blocks": keep_all, "gain": [[_tree([], [], [], [], [predicted])]]})
    data["ensembles"]["gain"]["threshold"] = 0.02  # type: ignore[index]
    options = RenderOptions(format="text")
    got = render(
        LONG.encode(),
        content_type="text/html",
        url="https://e.example/a",
        options=options,
        model=model_mod.parse(data, CODE_FEATURES),
    )
    # At or below the threshold the rules' pick stands; above it every block is kept.
    assert got.content == (
        f"Home News About\n\n{LONG_TEXT}\n\n" if blocks_decide else LONG_TEXT
    ) + ("Copyright the example company, all rights reserved." if blocks_decide else "")


def test_blocks_and_their_features() -> None:
    page = prepare(PAGE.encode(), url="https://e.example/")
    assert page is not None
    sel = select(page.body, title=page.title)
    blocks = page_blocks(sel, discussion=False, product=False, page_row=[0.0] * len(PAGE_FEATURES))
    assert [t.split() for t in blocks.texts] == [
        ["Home", "News", "About"],
        ["First", "part"],
        PROSE.split(),
        ["Second:", *PROSE.split()],
        ["Copyright", "the", "example", "company,", "all", "rights", "reserved."],
    ]
    col = {name: [row[FEATURES.index(name)] for row in blocks.rows] for name in FEATURES}
    assert all(len(row) == len(FEATURES) for row in blocks.rows)
    assert col["link_share"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert col["in_nav"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert col["in_footer"] == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert col["tag_p"] == [0.0, 0.0, 1.0, 1.0, 0.0]
    assert col["tag_hx"] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert col["rules_kept"] == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert col["before_container"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert col["after_container"] == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert col["prev_rules_kept"] == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert col["sentence_end"] == [0.0, 0.0, 1.0, 1.0, 1.0]
    ctx = context_rows(blocks.rows, [0.0, 1.0, 1.0, 1.0, 0.0])
    assert [r[:3] for r in ctx] == [
        [0.0, 0.0, 1.0],
        [1.0, 0.0, 1.0],
        [1.0, 1.0, 1.0],
        [1.0, 1.0, 0.0],
        [0.0, 1.0, 0.0],
    ]
    # Windows hold the blocks on either side that exist, the block itself left out.
    assert [r[3] for r in ctx] == [1.0, 2 / 3, 0.5, 2 / 3, 1.0]


def test_kept_blocks_are_one_reading_order() -> None:
    page = prepare(PAGE.encode(), url="https://e.example/")
    assert page is not None
    sel = select(page.body, title=page.title)
    blocks = page_blocks(sel, discussion=False, product=False, page_row=[0.0] * len(PAGE_FEATURES))
    chosen = apply(sel, blocks, [False, False, True, False, True])
    from sift.render.markdown import Emitter

    out = Emitter(markdown=False, base_url="", skip=chosen.skip).render(chosen.container)
    assert out == f"{PROSE}\n\nCopyright the example company, all rights reserved."


def test_page_type_is_other_when_unsure_or_without_a_model() -> None:
    assert page_type(None, [0.0] * len(PAGE_FEATURES)) == "other"
    flat = [[_tree([], [], [], [], [0.0])] for _ in PAGE_TYPES]
    unsure = model_mod.parse(_file({"page_type": flat}), CODE_FEATURES)
    assert 1 / len(PAGE_TYPES) < OTHER_BELOW
    assert page_type(unsure, [0.0] * len(PAGE_FEATURES)) == "other"
    sure = [[_tree([], [], [], [], [3.0 if k == 2 else 0.0])] for k in range(len(PAGE_TYPES))]
    product = model_mod.parse(_file({"page_type": sure}), CODE_FEATURES)
    assert page_type(product, [0.0] * len(PAGE_FEATURES)) == "product"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_retraining_on_a_fixed_subset_writes_the_same_bytes(tmp_path: Path) -> None:
    """Two trainings in subprocesses (~5 s of CPU each): their wall time follows the
    machine's load (27 s each at a load of 11 on 2 cores), hence the longer timeout."""
    pytest.importorskip("lightgbm")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import data as bench_data
        import extract as bench_extract
    finally:
        sys.path.remove(str(REPO / "bench"))
    try:
        roots = [bench_data.extraction_set(name) for name in bench_extract.SETS]
    except SystemExit:
        pytest.skip("the shared extraction sets are not here (bench/data.py gets them)")
    assert all((d / "ground-truth.json").exists() for d in roots)
    # The two trainings run side by side (two processes, each deterministic on its own).
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    train = [sys.executable, str(REPO / "bench/train_extract.py"), "--limit", "10", "--folds", "3"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    procs = [subprocess.Popen([*train, "--out", str(out)], **quiet) for out in files]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    outs = [out.read_bytes() for out in files]
    assert outs[0] == outs[1]
    data = json.loads(outs[0])
    assert data["ensembles"]["blocks"]["features"] == list(FEATURES)
    assert model_mod.parse(data, CODE_FEATURES).ensembles["blocks"].features == FEATURES
