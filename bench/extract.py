"""Extraction benchmark: sift's renderer against real baselines, quality and speed, one run.

Sets (public; ``bench/data.py`` says where each comes from and gets them: ``.venv/bin/python
bench/data.py`` online, ``--from DIR`` offline; same layout: ``ground-truth.json`` and
``html/<id>.html.gz``):

- ``scrapinghub`` — scrapinghub/article-extraction-benchmark, 181 article pages (2019);
- ``wcxb`` — the dev split of WCXB, 1,476 pages (2025) of seven page types, reported as a
  whole and per page type (``--type`` keeps only some types).

Metrics, per set and per WCXB page type:

- precision / recall / F1 of scrapinghub's ``evaluate.py``: ``\\w+`` tokens (case kept),
  multisets of 4-token shingles (texts of 1–3 tokens give one short shingle, empty texts
  none), per-page tp/fp/fn normalised by their sum; precision averaged over pages with
  tp+fp > 0, recall over pages with tp+fn > 0, F1 the harmonic mean of the two averages;
- word F1 of WCXB's ``evaluate.py``: lower-cased ``\\w+`` word multisets, per-page F1
  (an empty output scores 0), averaged over all pages — the number WCXB publishes;
- empty outputs on pages whose ground truth is not empty;
- pages/s of CPU time (``time.process_time``: the machine is shared, and CPU time is what
  one core can do), single process, and the ratio to trafilatura's on the same pages; one
  extractor after the other, or with ``--turns N`` taking turns by chunks of N pages (a
  drift in the machine's load is then shared by all of them).

Every extractor gets the same gzip-decompressed bytes and URL; its time includes decoding.
Markdown outputs are scored with link targets and image paths stripped (link and alt text
kept), after the timing. Usage::

    .venv/bin/python bench/extract.py [--set scrapinghub|wcxb|all] [--type TYPE ...]
        [--only NAME ...] [--fast] [--changed] [--dump DIR] [--memory] [--turns N]

sift runs three ways: ``sift text``/``sift markdown`` with the shipped model (trained on every
page here: its quality figures are not honest, its speed is), ``... (rules)`` with no model,
and ``... (cv)`` where every page is rendered with the fold model of
``bench/train_extract.py --folds-out`` that never saw its site (grouped k-fold by host: the
honest figures for the shipped hybrid).

``--fast`` runs sift ``text`` only and scores the baselines from the outputs the last full
run cached in ``bench/.cache/`` (their pages/s come from that run, so speed ratios are only
indicative). ``--changed`` lists the pages whose sift ``text`` word F1 moved since the
previous run. ``--memory`` renders the largest page of each set in a fresh process and
reports its peak RSS growth.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import hashlib
import json
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data import extraction_set
from extract_metrics import metrics, strip_markdown_targets, tp_fp_fn, word_f1

__all__ = ["metrics", "strip_markdown_targets", "tp_fp_fn", "word_f1"]  # also used by training

ROOT = Path(__file__).resolve().parents[1]
SETS = ("scrapinghub", "wcxb")  # found by bench/data.py's extraction_set
CACHE = ROOT / "bench/.cache"
WCXB_TYPES = ("article", "service", "product", "collection", "forum", "listing", "documentation")


Extractor = Callable[[bytes, str], str]


# ---- extractors ----------------------------------------------------------------------------


def _sift(fmt: str, model: str = "shipped") -> Extractor:
    """sift in ``fmt``; ``model``: ``shipped`` (the packaged model), ``rules`` (none) or
    ``cv`` (each page scored by the fold model trained without its site: ``CV_FOLDS``)."""
    from sift.render import RenderOptions, render
    from sift.render.learned import DEFAULT_MODEL

    options = RenderOptions(format=fmt)  # type: ignore[arg-type]
    folds = _fold_models() if model == "cv" else []

    def pick(url: str) -> Any:
        if model == "rules":
            return None
        if model == "cv":
            return folds[fold_of(site_of(url), len(folds))]
        return DEFAULT_MODEL

    def run(body: bytes, url: str) -> str:
        return render(
            body, content_type="text/html", url=url, options=options, model=pick(url)
        ).content

    return run


CV_FOLDS = CACHE / "extract-folds.json"


def _fold_models() -> list[Any]:
    """The k fold models ``bench/train_extract.py --folds-out`` wrote."""
    from sift.render.blocks import CONTEXT_FEATURES, FEATURES
    from sift.render.model import parse
    from sift.render.pagekind import PAGE_FEATURES, QUICK_FEATURES

    if not CV_FOLDS.exists():
        raise SystemExit(f"no {CV_FOLDS}: run bench/train_extract.py --folds-out {CV_FOLDS}")
    data = json.loads(CV_FOLDS.read_text("utf-8"))
    features = {
        "blocks": FEATURES,
        "context": CONTEXT_FEATURES,
        "page_type": PAGE_FEATURES,
        "quick": QUICK_FEATURES,
        "gain": PAGE_FEATURES,
    }
    return [parse(m, features) for m in data["models"]]


def site_of(url: str) -> str:
    """The grouping key of cross-validation: the URL's host without ``www.``."""
    from sift.render.extract import host_of

    return host_of(url)


def fold_of(site: str, k: int) -> int:
    """A site's fold: fixed by its name alone (sha1), so every run splits the same way."""
    return int(hashlib.sha1(site.encode()).hexdigest(), 16) % k


def _trafilatura(fmt: str) -> Extractor:
    import trafilatura

    def run(body: bytes, url: str) -> str:
        out = trafilatura.extract(
            body, url=url, include_comments=False, output_format=fmt, with_metadata=False
        )
        return out or ""

    return run


def _readability() -> Extractor:
    import html_text
    from readability import Document

    def run(body: bytes, url: str) -> str:
        return str(html_text.extract_text(Document(body, url=url).summary(html_partial=True)))

    return run


def _resiliparse() -> Extractor:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    def run(body: bytes, url: str) -> str:
        text = bytes_to_str(body, detect_encoding(body))
        return str(extract_plain_text(text, main_content=True))

    return run


def _html2text() -> Extractor:
    import html2text

    def run(body: bytes, url: str) -> str:
        h = html2text.HTML2Text(baseurl=url)
        h.ignore_links = True
        h.ignore_images = True
        return str(h.handle(body.decode("utf-8", errors="replace")))

    return run


def _html_text() -> Extractor:
    import html_text

    def run(body: bytes, url: str) -> str:
        return str(html_text.extract_text(body.decode("utf-8", errors="replace")))

    return run


EXTRACTORS: dict[str, Callable[[], Extractor]] = {
    "sift text": lambda: _sift("text"),
    "sift markdown": lambda: _sift("markdown"),
    "sift text (rules)": lambda: _sift("text", "rules"),
    "sift markdown (rules)": lambda: _sift("markdown", "rules"),
    "sift text (cv)": lambda: _sift("text", "cv"),
    "sift markdown (cv)": lambda: _sift("markdown", "cv"),
    "trafilatura text": lambda: _trafilatura("txt"),
    "trafilatura markdown": lambda: _trafilatura("markdown"),
    "readability+html-text": _readability,
    "resiliparse": _resiliparse,
    "html2text (page)": _html2text,
    "html-text (page)": _html_text,
}
DEFAULT = ("sift text", "sift markdown", "trafilatura text", "resiliparse", "readability+html-text")
BASELINE = "trafilatura text"


# ---- data and runs -------------------------------------------------------------------------


@dataclass
class Page:
    key: str
    url: str
    truth: str
    kind: str  # WCXB page type; "article" for the scrapinghub set
    body: bytes


@dataclass
class Run:
    outputs: dict[str, str]
    seconds: float
    cached: bool = False


def load_set(name: str, types: set[str] | None) -> list[Page]:
    root = extraction_set(name)
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key in sorted(truth):
        entry = truth[key]
        kind = str(entry.get("page_type") or "article")
        if types and kind not in types:
            continue
        body = gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes())
        pages.append(Page(key, entry.get("url", ""), entry.get("articleBody", ""), kind, body))
    return pages


def run_extractors(
    extractors: dict[str, Extractor], pages: list[Page], turns: int = 0
) -> dict[str, Run]:
    """Every extractor over ``pages``, each timed in CPU seconds: one after the other
    (``turns`` 0), or taking turns by chunks of ``turns`` pages, the order rotating from
    chunk to chunk. On a shared machine the load drifts over minutes, and one extractor
    after the other carries that drift into the ratios; in turns, each extractor's caches
    are cooled by the others' work between chunks (a render worker runs only sift)."""
    outputs: dict[str, dict[str, str]] = {name: {} for name in extractors}
    seconds = dict.fromkeys(extractors, 0.0)
    names = list(extractors)
    gc.collect()
    size = turns or len(pages) or 1
    for c, at in enumerate(range(0, len(pages), size)):
        chunk = pages[at : at + size]
        turn = c % len(names)
        for name in names[turn:] + names[:turn]:
            extract, out = extractors[name], outputs[name]
            start = time.process_time()
            for page in chunk:
                try:
                    out[page.key] = extract(page.body, page.url) or ""
                except Exception as exc:  # a baseline crashing on one page scores it empty
                    print(f"  {name}: {page.key[:10]} raised {type(exc).__name__}", file=sys.stderr)
                    out[page.key] = ""
            seconds[name] += time.process_time() - start
    runs = {}
    for name in names:
        got = outputs[name]
        if "markdown" in name:  # scored without link targets: not the extractor's time
            got = {k: strip_markdown_targets(v) for k, v in got.items()}
        runs[name] = Run(got, seconds[name])
    return runs


def _cache_file(set_name: str, name: str) -> Path:
    return CACHE / f"{set_name}--{re.sub(r'[^a-z0-9]+', '-', name.lower())}.json"


def save_cache(set_name: str, name: str, run: Run, pages: list[Page]) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    data = {"seconds_per_page": run.seconds / max(1, len(pages)), "outputs": run.outputs}
    _cache_file(set_name, name).write_text(json.dumps(data, ensure_ascii=False), "utf-8")


def load_cache(set_name: str, name: str, pages: list[Page]) -> Run | None:
    path = _cache_file(set_name, name)
    if not path.exists():
        return None
    data = json.loads(path.read_text("utf-8"))
    outputs = data["outputs"]
    if any(p.key not in outputs for p in pages):
        return None
    return Run(
        {p.key: outputs[p.key] for p in pages},
        data["seconds_per_page"] * len(pages),
        cached=True,
    )


# ---- scoring and printing ------------------------------------------------------------------


@dataclass
class Score:
    precision: float
    recall: float
    f1: float
    word_f1: float
    empty: int
    pages: int


def score(pages: list[Page], outputs: dict[str, str]) -> Score:
    rows = [tp_fp_fn(p.truth, outputs[p.key]) for p in pages]
    p, r, f1 = metrics(rows)
    words = [word_f1(outputs[p.key], p.truth) for p in pages]
    empty = sum(1 for pg in pages if pg.truth.strip() and not outputs[pg.key].strip())
    return Score(p, r, f1, sum(words) / max(1, len(words)), empty, len(pages))


def print_set(title: str, pages: list[Page], runs: dict[str, Run]) -> dict[str, Score]:
    print(f"\n### {title} ({len(pages)} pages)\n")
    print("| extractor | precision | recall | F1 | word F1 | empty | pages/s | vs trafilatura |")
    print("|---|---|---|---|---|---|---|---|")
    base = runs.get(BASELINE)
    scores = {}
    for name, run in runs.items():
        s = score(pages, run.outputs)
        scores[name] = s
        speed = len(pages) / run.seconds if run.seconds else 0.0
        ratio = f"{speed * base.seconds / len(pages):.2f}x" if base and base.seconds else "-"
        mark = " (cached)" if run.cached else ""
        print(
            f"| {name}{mark} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} | "
            f"{s.word_f1:.3f} | {s.empty} | {speed:.1f} | {ratio} |"
        )
    return scores


def print_types(pages: list[Page], runs: dict[str, Run]) -> None:
    by_type: dict[str, list[Page]] = defaultdict(list)
    for p in pages:
        by_type[p.kind].append(p)
    names = list(runs)
    print("\nPer page type: shingle F1 / word F1 (empty outputs)\n")
    print("| type | pages | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for kind in WCXB_TYPES:
        group = by_type.get(kind)
        if not group:
            continue
        cells = []
        for name in names:
            s = score(group, runs[name].outputs)
            empty = f" ({s.empty})" if s.empty else ""
            cells.append(f"{s.f1:.3f} / {s.word_f1:.3f}{empty}")
        print(f"| {kind} | {len(group)} | " + " | ".join(cells) + " |")


def print_changed(set_name: str, pages: list[Page], outputs: dict[str, str]) -> None:
    """Pages whose sift text word F1 moved since the previous run (kept in the cache)."""
    path = CACHE / f"{set_name}--last-sift-text-scores.json"
    now = {p.key: round(word_f1(outputs[p.key], p.truth), 4) for p in pages}
    if path.exists():
        before = json.loads(path.read_text("utf-8"))
        moved = [(now[k] - before[k], k) for k in now if k in before and now[k] != before[k]]
        moved.sort()
        kinds = {p.key: p.kind for p in pages}
        print(f"\n{set_name}: {len(moved)} pages moved (word F1, previous run → now)")
        for delta, k in moved:
            if abs(delta) >= 0.005:
                print(f"  {k[:16]:16} {kinds[k]:13} {before[k]:.3f} → {now[k]:.3f} ({delta:+.3f})")
        before.update(now)
        now = before
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(now), "utf-8")


def peak_memory(body: bytes, url: str) -> float:
    """Peak RSS growth (MiB) of rendering ``body`` once in a fresh process: the process's
    own high-water mark (``VmHWM``, reset just before the render through
    ``/proc/self/clear_refs``) over its RSS then. (``getrusage``'s ``ru_maxrss`` is not used:
    Linux carries the parent's peak across fork and exec, so a large bench process inflated
    it — a 5 MB page read +746 MiB after a full WCXB run, +362 MiB from a small parent.)"""
    code = (
        "import sys\n"
        "from sift.render import RenderOptions, render\n"
        "body = sys.stdin.buffer.read()\n"
        "render(b'<p>warm</p>', content_type='text/html', url='', options=RenderOptions())\n"
        "def kb(name):\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith(name + ':'):\n"
        "            return int(line.split()[1])\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"
        "before = kb('VmRSS')\n"
        f"render(body, content_type='text/html', url={url!r}, options=RenderOptions())\n"
        "print((kb('VmHWM') - before) * 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=body, capture_output=True, check=True
    ).stdout
    return int(out) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--set", choices=[*SETS, "all"], default="all")
    parser.add_argument("--type", nargs="*", choices=WCXB_TYPES, help="WCXB page types to keep")
    parser.add_argument("--only", nargs="*", help=f"extractors (default: {', '.join(DEFAULT)})")
    parser.add_argument("--fast", action="store_true", help="sift text only, baselines cached")
    parser.add_argument("--changed", action="store_true", help="pages whose score moved")
    parser.add_argument("--dump", type=Path, help="write each extractor's outputs here as JSON")
    parser.add_argument("--memory", action="store_true", help="peak RSS of the largest page")
    parser.add_argument(
        "--turns", type=int, default=0, help="extractors take turns by chunks of N pages"
    )
    args = parser.parse_args(argv)

    names = list(args.only or (["sift text"] if args.fast else DEFAULT))
    set_names = list(SETS) if args.set == "all" else [args.set]
    if args.type and "article" not in args.type and args.set == "all":
        set_names = ["wcxb"]  # the scrapinghub set is articles only
    types = set(args.type) if args.type else None
    for set_name in set_names:
        pages = load_set(set_name, types if set_name == "wcxb" else None)
        extractors: dict[str, Extractor] = {}
        for name in names:
            try:
                extractors[name] = EXTRACTORS[name]()
            except ImportError as exc:
                print(f"{name}: not installed ({exc.name})", file=sys.stderr)
        runs = run_extractors(extractors, pages, args.turns)
        for name, run in runs.items():
            if not name.startswith("sift") and not args.type:
                save_cache(set_name, name, run, pages)
        if args.fast:
            for name in DEFAULT:
                if name not in runs and not name.startswith("sift"):
                    cached = load_cache(set_name, name, pages)
                    if cached:
                        runs[name] = cached
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            for name, run in runs.items():
                path = args.dump / f"{set_name}--{name.replace(' ', '_')}.json"
                path.write_text(json.dumps(run.outputs, ensure_ascii=False), encoding="utf-8")
        print_set(set_name, pages, runs)
        if set_name == "wcxb":
            print_types(pages, runs)
        if args.changed and "sift text" in runs:
            print_changed(set_name, pages, runs["sift text"].outputs)
        if args.memory:
            big = max(pages, key=lambda p: len(p.body))
            mib = peak_memory(big.body, big.url)
            print(f"\nlargest page {big.key[:16]} ({len(big.body) / 1e6:.2f} MB): +{mib:.1f} MiB")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
