"""How often ``engine: "auto"`` would load a server-rendered page in the browser.

    .venv/bin/python bench/auto_fp.py [--set scrapinghub|wcxb] [--show N]

Runs the JavaScript-shell detector (``sift.render.jsshell``) exactly as a render does
(``render.html.prepare``: decode, parse, read, clean, decide) over the shared extraction sets (found
by bench/data.py's ``extraction_set``): 1,657 pages whose text is in their HTML, so every page
it flags is a false positive — a browser load of seconds where HTTP had the text. Prints the
rate per set and overall, the reasons, and the flagged pages with their signals (``--show``).
Target: at most 1 % (issue 20).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract import SETS, load_set
from sift.render import dom, jsshell
from sift.render.decode import decode
from sift.render.html import prepare

TARGET_RATE = 0.01


def _signals(body: bytes) -> jsshell.Signals | None:
    """The detector's inputs for one page, as ``prepare`` reads them (for the listing)."""
    root = dom.parse_html(body)
    if root is None:
        return None
    reader = jsshell.Reader(root)
    dom.clean(root)
    found = root.find("body")
    return reader.signals(root if found is None else found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--set", choices=SETS, action="append", help="default: both")
    parser.add_argument("--show", type=int, default=20, help="flagged pages to list")
    args = parser.parse_args(argv)
    total = flagged_total = 0
    reasons: Counter[str] = Counter()
    shown = 0
    seconds = 0.0
    print("| set | pages | browser picked | rate |\n|---|---|---|---|")
    for name in args.set or SETS:
        pages = load_set(name, None)
        flagged = 0
        for page in pages:
            text, _codec = decode(page.body, None)
            started = time.perf_counter()
            prepared = prepare(text.encode("utf-8", errors="replace"), url=page.url)
            reason = prepared.js_shell if prepared is not None else None
            seconds += time.perf_counter() - started
            if reason is None:
                continue
            flagged += 1
            reasons[reason] += 1
            if shown < args.show:
                shown += 1
                signals = _signals(text.encode("utf-8", errors="replace"))
                print(f"  {name} {page.key[:12]} {page.url} {reason} {signals}", file=sys.stderr)
        total += len(pages)
        flagged_total += flagged
        print(f"| {name} | {len(pages)} | {flagged} | {flagged / max(len(pages), 1):.2%} |")
    rate = flagged_total / max(total, 1)
    print(f"| all | {total} | {flagged_total} | {rate:.2%} |")
    per_page_ms = seconds / max(total, 1) * 1e3
    print(f"\nreasons: {dict(reasons) or 'none'}; prepare (parse, read, clean, decide) ", end="")
    print(f"{per_page_ms:.1f} ms/page")
    print(f"target <= {TARGET_RATE:.0%}: {'met' if rate <= TARGET_RATE else 'MISSED'}")
    return 0 if rate <= TARGET_RATE else 1


if __name__ == "__main__":
    raise SystemExit(main())
