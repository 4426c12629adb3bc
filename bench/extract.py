"""Extraction benchmark: sift's renderer against real baselines, quality and speed, one run.

Data: ../shared/bench/extraction/scrapinghub-article-extraction-benchmark/ (181 article
pages with a plain-text ground truth). The metric reproduces that benchmark's evaluate.py:
``\\w+`` tokens (case kept), multisets of 4-token shingles (texts of 1–3 tokens give one short
shingle, empty texts none), per-page tp/fp/fn normalised by their sum; precision averaged over
pages with tp+fp > 0, recall over pages with tp+fn > 0 (a page where both texts are empty
scores 1), F1 the harmonic mean of the two averages.

Every extractor gets the same gzip-decompressed bytes and URL; its time includes decoding.
sift's markdown output is scored with link targets and image paths stripped (link and alt
text kept). Usage::

    .venv/bin/python bench/extract.py [--data DIR] [--only NAME ...] [--dump DIR]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

DEFAULT_DATA = (
    Path(__file__).resolve().parents[1].parent
    / "shared/bench/extraction/scrapinghub-article-extraction-benchmark"
)
_TOKEN = re.compile(r"\w+", re.UNICODE | re.MULTILINE | re.IGNORECASE | re.DOTALL)
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")

Extractor = Callable[[bytes, str], str]


# ---- the benchmark's metric ----------------------------------------------------------------


def shingles(text: str, n: int = 4) -> Counter[tuple[str, ...]]:
    tokens = _TOKEN.findall(text or "")
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


def strip_markdown_targets(md: str) -> str:
    """Markdown with link targets and image paths removed (their visible text kept)."""
    return _MD_LINK.sub(r"\1", _MD_IMAGE.sub("", md))


# ---- extractors ----------------------------------------------------------------------------


def _sift(fmt: str) -> Extractor:
    from sift.render import RenderOptions, render

    options = RenderOptions(format=fmt)  # type: ignore[arg-type]

    def run(body: bytes, url: str) -> str:
        content = render(body, content_type="text/html", url=url, options=options).content
        return strip_markdown_targets(content) if fmt == "markdown" else content

    return run


def _trafilatura(fmt: str) -> Extractor:
    import trafilatura

    def run(body: bytes, url: str) -> str:
        out = trafilatura.extract(
            body, url=url, include_comments=False, output_format=fmt, with_metadata=False
        )
        return strip_markdown_targets(out or "") if fmt == "markdown" else (out or "")

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
    "trafilatura text": lambda: _trafilatura("txt"),
    "trafilatura markdown": lambda: _trafilatura("markdown"),
    "readability+html-text": _readability,
    "resiliparse": _resiliparse,
    "html2text (page)": _html2text,
    "html-text (page)": _html_text,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--only", nargs="*", help="extractor names to run (default: all)")
    parser.add_argument("--dump", type=Path, help="write each extractor's outputs here as JSON")
    args = parser.parse_args(argv)

    truth = json.loads((args.data / "ground-truth.json").read_text(encoding="utf-8"))
    ids = sorted(truth)
    pages = {k: gzip.decompress((args.data / "html" / f"{k}.html.gz").read_bytes()) for k in ids}
    names = args.only or list(EXTRACTORS)

    print(f"{len(ids)} pages from {args.data}")
    print("| extractor | precision | recall | F1 | pages/s | speed vs trafilatura |")
    print("|---|---|---|---|---|---|")
    results: dict[str, tuple[float, float, float, float]] = {}
    for name in names:
        try:
            extract = EXTRACTORS[name]()
        except ImportError as exc:
            print(f"| {name} | not installed ({exc.name}) | | | | |")
            continue
        outputs: dict[str, str] = {}
        gc.collect()
        start = time.perf_counter()
        for k in ids:
            try:
                outputs[k] = extract(pages[k], truth[k].get("url", "")) or ""
            except Exception as exc:  # a baseline crashing on one page scores it empty
                print(f"  {name}: {k[:10]} raised {type(exc).__name__}", file=sys.stderr)
                outputs[k] = ""
        elapsed = time.perf_counter() - start
        rows = [tp_fp_fn(truth[k].get("articleBody", ""), outputs[k]) for k in ids]
        p, r, f1 = metrics(rows)
        speed = len(ids) / elapsed
        results[name] = (p, r, f1, speed)
        base = results.get("trafilatura text")
        ratio = f"{speed / base[3]:.2f}x" if base else "-"
        print(f"| {name} | {p:.3f} | {r:.3f} | {f1:.3f} | {speed:.1f} | {ratio} |", flush=True)
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / f"{name.replace(' ', '_')}.json").write_text(
                json.dumps(outputs, ensure_ascii=False), encoding="utf-8"
            )
    base = results.get("trafilatura text")
    if base:
        print()
        for name in ("sift text", "sift markdown"):
            if name in results:
                p, r, f1, speed = results[name]
                print(
                    f"{name}: F1 {f1:.3f} (trafilatura {base[2]:.3f}, target 0.970); "
                    f"speed {speed / base[3]:.2f}x trafilatura (target 3x)"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
