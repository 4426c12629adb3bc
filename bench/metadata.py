"""How often sift finds each metadata field on WCXB dev, and how often its date and author
agree with trafilatura's where both find one.

    .venv/bin/python bench/metadata.py [--set wcxb|scrapinghub]

A date agrees when both give the same day (``YYYY-MM-DD``); an author when the lower-cased
names are equal or one holds the other ("Jane Doe" / "By Jane Doe, Staff").

Data: the WCXB dev and scrapinghub sets, found by bench/data.py (`extraction_set`).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract import SETS, load_set
from sift.render.decode import decode
from sift.render.html import prepare
from sift.render.metadata import FIELDS


def _agree_author(a: str, b: str) -> bool:
    x, y = " ".join(a.lower().split()), " ".join(b.lower().split())
    return x == y or x in y or y in x


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--set", choices=list(SETS), default="wcxb")
    args = parser.parse_args(argv)
    import trafilatura

    pages = load_set(args.set, None)
    found: Counter[str] = Counter()
    both: Counter[str] = Counter()
    agree: Counter[str] = Counter()
    for page in pages:
        text, _codec = decode(page.body, None)
        prepared = prepare(text.encode("utf-8", errors="replace"), url=page.url)
        meta = prepared.metadata if prepared else {}
        found.update(meta.keys())
        theirs = trafilatura.extract_metadata(page.body, default_url=page.url)
        if theirs is None:
            continue
        if meta.get("published") and theirs.date:
            both["date"] += 1
            agree["date"] += str(meta["published"])[:10] == str(theirs.date)[:10]
        if meta.get("author") and theirs.author:
            both["author"] += 1
            agree["author"] += _agree_author(str(meta["author"]), str(theirs.author))
    n = len(pages)
    print(f"\n{args.set}: {n} pages\n\n| field | found | share |\n|---|---|---|")
    for name in FIELDS:
        print(f"| {name} | {found[name]} | {found[name] / n:.0%} |")
    print("\n| field | both found | agree | share |\n|---|---|---|---|")
    for name in ("date", "author"):
        share = agree[name] / both[name] if both[name] else 0.0
        print(f"| {name} | {both[name]} | {agree[name]} | {share:.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
