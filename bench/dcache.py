"""Benchmark the dcache store: body compression, cache put/get, batch inserts, the async hop.

    .venv/bin/python bench/dcache.py [--pages DIR] [--rounds N]

Each figure is measured against its baseline in the same run and printed as a ratio:

1. codecs on the extraction-benchmark pages: ratio and MB/s per zstd level, against storing
   the bytes as-is and against gzip -6 (the usual default);
2. the real DB on disk: put_body + get_body of every page with compression on vs off, and how
   many pages fit in the same byte budget;
3. put_batch_targets of 10,000 targets in one transaction (the issue asks well under 1 s),
   against inserting the same rows one transaction each;
4. the cost of the thread hop: AsyncDB.run against loop.run_in_executor on a one-thread pool,
   both against calling the DB method directly.

Data: figures 1 and 2 use the 181 pages of the public scrapinghub article-extraction
benchmark (``bench/data.py`` gets it: ``.venv/bin/python bench/data.py --set scrapinghub``,
or ``--from DIR`` offline), or the ``*.html.gz`` pages of ``--pages DIR``; 3 and 4 generate
their rows in the run.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import statistics
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import zstandard

from data import extraction_set
from sift.dcache import DB, AsyncDB, PageEntry
from sift.store import BatchJob, BatchTarget


def best_of(rounds: int, fn: Callable[[], object]) -> float:
    """The fastest of ``rounds`` runs, in seconds (least disturbed by the rest of the machine)."""
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def load_pages(folder: Path) -> list[bytes]:
    pages = [gzip.decompress(p.read_bytes()) for p in sorted(folder.glob("*.html.gz"))]
    if not pages:
        raise SystemExit(f"no *.html.gz pages under {folder}")
    return pages


def bench_codecs(pages: list[bytes], rounds: int) -> None:
    raw = sum(map(len, pages))
    print(f"\n1. codecs on {len(pages)} pages, {raw / 1e6:.1f} MB of HTML (best of {rounds})")
    print(f"{'codec':<10}{'ratio':>7}{'comp MB/s':>11}{'dec MB/s':>10}{'ms/page put':>13}")
    print(f"{'identity':<10}{1.0:>7.2f}{'-':>11}{'-':>10}{0.0:>13.3f}")
    gz = [zlib.compress(p, 6) for p in pages]
    t_c = best_of(rounds, lambda: [zlib.compress(p, 6) for p in pages])
    t_d = best_of(rounds, lambda: [zlib.decompress(g) for g in gz])
    gz_ratio = raw / sum(map(len, gz))
    print(
        f"{'gzip -6':<10}{gz_ratio:>7.2f}{raw / t_c / 1e6:>11.0f}{raw / t_d / 1e6:>10.0f}"
        f"{t_c / len(pages) * 1e3:>13.3f}"
    )
    for level in (1, 3, 6, 9):
        c = zstandard.ZstdCompressor(level=level)
        d = zstandard.ZstdDecompressor()
        packed = [c.compress(p) for p in pages]
        t_c = best_of(rounds, lambda c=c: [c.compress(p) for p in pages])  # type: ignore[misc]
        t_d = best_of(rounds, lambda d=d, packed=packed: [d.decompress(x) for x in packed])  # type: ignore[misc]
        ratio = raw / sum(map(len, packed))
        print(
            f"{'zstd -' + str(level):<10}{ratio:>7.2f}{raw / t_c / 1e6:>11.0f}"
            f"{raw / t_d / 1e6:>10.0f}{t_c / len(pages) * 1e3:>13.3f}"
        )
    ratios = sorted(len(p) / len(zstandard.ZstdCompressor(level=3).compress(p)) for p in pages)
    print(
        f"zstd -3 per-page ratio: min {ratios[0]:.2f}, median {statistics.median(ratios):.2f}, "
        f"max {ratios[-1]:.2f}; vs gzip -6: {raw / sum(map(len, gz)):.2f}"
    )


def bench_db(pages: list[bytes], rounds: int, tmp: Path) -> None:
    print(f"\n2. DB on disk: put_body then get_body of all {len(pages)} pages (best of {rounds})")
    results: dict[int, tuple[float, float, int]] = {}
    for level in (0, 3):
        puts: list[float] = []
        gets: list[float] = []
        size = 0
        for r in range(rounds):
            path = tmp / f"codec-{level}-{r}.db"
            db = DB.open(path, compress_level=level)
            t = time.perf_counter()
            digests = [db.put_body(p, 1) for p in pages]
            puts.append(time.perf_counter() - t)
            t = time.perf_counter()
            for d in digests:
                db.get_body(d, 2)
            gets.append(time.perf_counter() - t)
            size = db.size()
            db.close()
        results[level] = (min(puts), min(gets), size)
    raw = sum(map(len, pages))
    for level, (put_s, get_s, size) in results.items():
        name = "identity" if level == 0 else f"zstd -{level}"
        print(
            f"{name:<10} put {put_s * 1e3:7.1f} ms ({put_s / len(pages) * 1e3:.3f} ms/page)  "
            f"get {get_s * 1e3:6.1f} ms ({get_s / len(pages) * 1e3:.3f} ms/page)  "
            f"size() {size / 1e6:6.2f} MB"
        )
    (p0, g0, s0), (p3, g3, s3) = results[0], results[3]
    print(
        f"zstd -3 vs identity: put time x{p3 / p0:.2f}, get time x{g3 / g0:.2f}, "
        f"stored bytes x{s3 / s0:.3f} (effective cache x{s0 / s3:.2f})"
    )
    budget = raw // 4
    fit: dict[int, int] = {}
    for level in (0, 3):
        db = DB.open(":memory:", max_bytes=budget, compress_level=level)
        digests = [db.put_body(p, 1) for p in pages]
        db.evict()
        fit[level] = sum(db.get_body(d, 2) is not None for d in digests)
        db.close()
    print(
        f"pages kept under a {budget / 1e6:.1f} MB budget (1/4 of the raw bytes): "
        f"identity {fit[0]}, zstd -3 {fit[3]} of {len(pages)}"
    )


def bench_batch(rounds: int, tmp: Path) -> None:
    n = 10_000
    print(f"\n3. put_batch_targets of {n} targets on disk (best of {rounds})")

    def rows(job_id: str) -> list[BatchTarget]:
        opts = '{"format":"markdown"}'
        url = "https://example.com/p/"
        return [BatchTarget(job_id, i, f"{url}{i}", opts, "pending") for i in range(n)]

    def one_tx() -> None:
        db = DB.open(tmp / f"batch-{time.perf_counter_ns()}.db")
        db.create_batch_job(BatchJob("j", "c", "fleet", "k", "queued", "", n, 0, 1, 1, 0))
        db.put_batch_targets("j", rows("j"))
        db.close()

    def per_row() -> None:
        db = DB.open(tmp / f"batch-{time.perf_counter_ns()}.db")
        db.create_batch_job(BatchJob("j", "c", "fleet", "k", "queued", "", n, 0, 1, 1, 0))
        for t in rows("j"):
            db.put_batch_targets("j", [t])
        db.close()

    t_one = best_of(rounds, one_tx)
    t_row = best_of(1, per_row)
    print(
        f"one transaction {t_one * 1e3:.0f} ms; one transaction per row {t_row * 1e3:.0f} ms "
        f"(x{t_row / t_one:.1f} slower)"
    )


def bench_async(rounds: int, tmp: Path) -> None:
    n = 5000
    print(f"\n4. {n} get_page hits: direct, loop.run_in_executor, AsyncDB.run (best of {rounds})")
    db = DB.open(tmp / "async.db")
    d = db.put_body(b"<p>hello</p>" * 100, 1)
    db.put_page("k", PageEntry("u", "u", 200, "text/html", None, None, 1, d), 1)
    t_sync = best_of(rounds, lambda: [db.get_page("k", 2) for _ in range(n)])
    executor = ThreadPoolExecutor(max_workers=1)

    async def main() -> dict[str, tuple[float, float]]:
        loop = asyncio.get_running_loop()
        adb = AsyncDB(db)
        hops: dict[str, Callable[[], Awaitable[object]]] = {
            "run_in_executor": lambda: loop.run_in_executor(executor, db.get_page, "k", 2),
            "AsyncDB.run": lambda: adb.run(DB.get_page, "k", 2),
        }
        out = {}
        for name, hop in hops.items():
            seq: list[float] = []
            conc: list[float] = []
            for _ in range(rounds):
                t = time.perf_counter()
                for _ in range(n):
                    await hop()
                seq.append(time.perf_counter() - t)
                t = time.perf_counter()
                await asyncio.gather(*(hop() for _ in range(n)))
                conc.append(time.perf_counter() - t)
            out[name] = (min(seq), min(conc))
        await adb.close()
        return out

    results = asyncio.run(main())
    executor.shutdown()
    per = 1e6 / n
    print(f"direct call            {t_sync * per:6.1f} µs/call")
    for name, (t_seq, t_conc) in results.items():
        print(
            f"{name:<22} {t_seq * per:6.1f} µs/call awaited one by one, "
            f"{t_conc * per:6.1f} µs/call with {n} tasks at once"
        )
    (e_seq, e_conc), (a_seq, a_conc) = results["run_in_executor"], results["AsyncDB.run"]
    print(
        f"AsyncDB.run vs run_in_executor: x{e_seq / a_seq:.2f} faster one by one, "
        f"x{e_conc / a_conc:.2f} faster concurrently"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=Path, default=None, help="default: bench/data.py's set")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pages = load_pages(args.pages or extraction_set("scrapinghub") / "html")
    with tempfile.TemporaryDirectory() as tmp:
        bench_codecs(pages, args.rounds)
        bench_db(pages, args.rounds, Path(tmp))
        bench_batch(args.rounds, Path(tmp))
        bench_async(args.rounds, Path(tmp))


if __name__ == "__main__":
    main()
