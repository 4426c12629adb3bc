"""What a screenshot adds to a browser load: the same pages with and without one.

    .venv/bin/python bench/screenshot.py [--pages 30]

The JavaScript pages of ``bench/browser.py`` (its upstream on 127.0.1.1, its settings),
loaded by ``Service.fetch`` as a restricted caller, one at a time, fresh each time
(``max_age_s=0``): ``engine="browser"`` alone, then ``format="screenshot"`` as PNG and WebP
and JPEG of the 1280x720 viewport. Prints the median time per page and the median image
size. Loopback only; needs Chromium (docs/browser.md).

Data: the pages are generated in the run (``bench/browser.py``'s); nothing to download.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser import CHROMIUM, NAME, bench_settings, start_upstream
from sift.assembly import assemble, build_fetcher, build_render_pool
from sift.browser.shot import ShotSpec
from sift.fetch import StaticResolver
from sift.options import FetchOptions
from sift.principal import Principal
from sift.service import Service

KINDS: dict[str, dict[str, Any]] = {
    "browser, no screenshot": {"engine": "browser"},
    "png 1280x720": {"format": "screenshot", "screenshot": ShotSpec()},
    "webp 1280x720": {"format": "screenshot", "screenshot": ShotSpec(type="webp")},
    "jpeg 1280x720 (quality 80)": {"format": "screenshot", "screenshot": ShotSpec(type="jpeg")},
}


async def measure(service: Service, port: int, pages: int) -> None:
    agent = Principal("agent", "restricted")
    print("| load | median s/page | median image bytes |")
    print("|---|---|---|")
    for n, (name, extra) in enumerate(KINDS.items()):
        times: list[float] = []
        sizes: list[int] = []
        for i in range(pages):
            url = f"http://{NAME}:{port}/p/{n}-{i}"
            opts = FetchOptions(url=url, wait_for="#app h1", max_age_s=0, **extra)
            started = time.perf_counter()
            env = await service.fetch(agent, opts)
            times.append(time.perf_counter() - started)
            if "screenshot" in env:
                sizes.append(env["screenshot"]["bytes"])
        size = f"{statistics.median(sizes):,.0f}" if sizes else "–"
        print(f"| {name} | {statistics.median(times):.3f} | {size} |", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=30)
    args = parser.parse_args()
    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"no {CHROMIUM}: apt-get install --no-install-recommends chromium-headless-shell")
    runner, port = await start_upstream()
    settings = bench_settings(port)
    async with assemble(
        settings,
        fetcher=build_fetcher(settings, resolver=StaticResolver({})),
        render_pool=build_render_pool(settings, workers=2),
        start_pool=False,
    ) as parts:
        await parts.service.fetch(  # warm: the launch, the driver, a render worker
            Principal("agent", "restricted"),
            FetchOptions(url=f"http://{NAME}:{port}/p/warm", engine="browser"),
        )
        await measure(parts.service, port, args.pages)
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
