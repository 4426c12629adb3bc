"""``sift batch FILE|-``: a list of URLs as one batch job, with a progress bar.

One URL per line (blank lines and ``#`` comments skipped). By default the job runs in this
process, as the operator, on the local data directory; with ``--server URL --key KEY`` it is
submitted to a running sift. Either way the job is idempotent per ``--idem KEY`` (default:
a digest of the URL list, so running the same list again while the job lives — ``batch.ttl_s``
— returns the same job and its stored results instead of fetching it twice; the CLI says so,
and ``--new`` starts a fresh job), progress goes to standard error, the NDJSON results to
``--out`` (or standard output), then a one-line summary. Exit status: 0 only if every target
succeeded, 1 otherwise, 2 for usage errors, 130 after Ctrl-C — which cancels the job and says
so.

The in-process mode owns the data directory like ``sift serve`` does (``sift.datadir``): when
a running ``sift serve`` owns it, the job is submitted through that server as the operator.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from sift.cliargs import add_server_args, add_settings_args

LIVE: Final = frozenset({"queued", "running"})
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130


def add_batch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``sift batch`` on the CLI's subparsers (``cli.build_parser`` calls this)."""
    p = sub.add_parser(
        "batch",
        help="fetch a list of URLs as one batch job; `sift batch reconcile` fails every live "
        "job (operator command for a shared PostgreSQL store)",
    )
    add_settings_args(p)
    p.add_argument(
        "file", metavar="FILE|-", help="URLs, one per line (# comments ok); - reads stdin"
    )
    idem = p.add_mutually_exclusive_group()
    idem.add_argument(
        "--idem",
        metavar="KEY",
        help="Idempotency-Key (default: a digest of the URL list, so the same list again "
        "replays the same job's results while it lives: batch.ttl_s, 24 h by default)",
    )
    idem.add_argument(
        "--new",
        action="store_true",
        help="start a new job even if this list ran before (fetches it again)",
    )
    p.add_argument("--out", metavar="FILE", help="write NDJSON results here (default stdout)")
    add_server_args(p, "submit to a running sift instead")
    p.add_argument(
        "--poll-s", type=float, default=0.5, metavar="S", help="progress refresh interval"
    )
    p.set_defaults(func=cmd_batch)


def read_urls(stream: IO[str]) -> list[str]:
    """The URLs of a list: stripped lines, without blank lines and ``#`` comments."""
    urls = []
    for line in stream:
        line = line.strip()
        if line and not line.startswith("#"):
            urls.append(line)
    return urls


def default_idem_key(urls: list[str]) -> str:
    """Same list → same key → the same job while it lives."""
    return "sift-batch-" + hashlib.sha256("\n".join(urls).encode()).hexdigest()[:40]


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-/s" if speed is None else f"{speed:.1f}/s")


class BatchProgress:
    """A rich progress bar on standard error: done, failed, total, rate, ETA."""

    def __init__(self, total: int, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]}"),
            _Rate(),
            TimeRemainingColumn(),
            console=console,
        )
        self._task = self._progress.add_task("batch", total=total, failed=0)

    def __enter__(self) -> BatchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, view: Mapping[str, Any]) -> None:
        counts = view["counts"]
        self._progress.update(
            self._task,
            total=view["targets_total"],  # a crawl's grows
            completed=view["targets_done"],
            failed=counts["failed"] + counts["cancelled"],
            description=f"{view.get('kind', 'batch')} {view['status']}",
        )


def summary(view: Mapping[str, Any], elapsed_s: float) -> str:
    c = view["counts"]
    line = (
        f"sift: job {view['id']} {view['status']}: {c['done']} done, {c['failed']} failed, "
        f"{c['cancelled']} cancelled of {view['targets_total']} in {elapsed_s:.1f} s"
    )
    return line + (f" ({view['error']})" if view["error"] else "")


def exit_code(view: Mapping[str, Any]) -> int:
    return EXIT_OK if view["status"] == "done" else EXIT_FAILED


def cmd_batch(args: argparse.Namespace) -> int:
    if args.file == "reconcile" and not Path("reconcile").exists():
        return _cmd_reconcile(args)
    if args.file == "-":
        urls = read_urls(sys.stdin)
    else:
        try:
            with open(args.file, encoding="utf-8") as fh:
                urls = read_urls(fh)
        except (OSError, UnicodeDecodeError) as exc:
            print(f"sift: cannot read {args.file}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if not urls:
        print(f"sift: {args.file} lists no URLs", file=sys.stderr)
        return EXIT_USAGE
    idem = args.idem or default_idem_key(urls)
    if args.new:
        idem += "-" + secrets.token_hex(8)
    poll = args.poll_s

    def run(where: JobRun) -> int:
        if where.server:
            from sift.batch.remote import run_remote

            return run_remote(where.server, where.key, urls, idem, where.out, where.console, poll)
        assert where.settings is not None
        return asyncio.run(_run_local(where.settings, urls, idem, where.out, where.console, poll))

    return run_job_command(args, "batch", run)


@dataclass(frozen=True)
class JobRun:
    """Where a job command runs: through ``server`` (with ``key``), or in this process on
    ``settings`` (then it owns the data directory); results go to ``out``."""

    server: str | None
    key: str | None
    settings: Any  # sift.config.Settings; None when a server runs the job
    out: IO[bytes]
    console: Console


def run_job_command(args: argparse.Namespace, what: str, run: Callable[[JobRun], int]) -> int:
    """``sift batch`` and ``sift crawl``: pick where the job runs (``--server``, else the
    server owning the data directory, else this process, which then owns it), open
    ``--out``, call ``run``; the lock and ``--out`` are let go however it ends."""
    console = Console(stderr=True)
    server, key, lock, settings = args.server, args.key, None, None
    if not server:
        from sift.cli import _settings, own_or_delegate

        settings = _settings(args)
        got = own_or_delegate(settings, what, args)
        if isinstance(got, tuple):
            server, key = got
        else:
            lock = got
    try:
        out: IO[bytes] = open(args.out, "wb") if args.out else sys.stdout.buffer  # noqa: SIM115
    except OSError as exc:
        if lock is not None:
            lock.release()
        print(f"sift: --out {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return run(JobRun(server, key, settings, out, console))
    finally:
        if lock is not None:
            lock.release()
        if args.out:
            out.close()
        else:
            out.flush()


def replay_notice(view: Mapping[str, Any]) -> str:
    """What to say when the list's key found an existing job: its results are replayed."""
    return (
        f"sift: this list already ran as job {view['id']} ({view['status']}); its stored "
        "results follow and nothing is fetched again — pass --new to fetch the list again"
    )


# How a job is started in-process: (jobs, service) → (status view, created). ``sift crawl``
# passes its own; the default submits the URL list as a batch.
Starter = Callable[[Any, Any], Awaitable[tuple[dict[str, Any], bool]]]


async def _run_local(
    settings: Any,
    urls: list[str],
    idem: str,
    out: IO[bytes],
    console: Console,
    poll_s: float,
    start: Starter | None = None,
) -> int:
    from sift.assembly.runner import make_runner
    from sift.batch.jobs import BatchJobs
    from sift.batch.openstore import open_store
    from sift.batch.runner import reconcile
    from sift.browser import Browser
    from sift.cli import build_fetcher, render_pool
    from sift.dcache import AsyncDB
    from sift.principal import OPERATOR
    from sift.service import Service

    started = time.monotonic()
    adb = await AsyncDB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    pool = render_pool(settings)
    pool.start()
    interrupted = False
    store = None
    try:
        store = await open_store(settings, adb)
        if not store.shared:
            await reconcile(store, int(time.time()))
        async with build_fetcher(settings) as fetcher:
            browser = Browser(settings.browser, fetcher)  # launched on first use
            service = Service(settings, adb, fetcher, render_pool=pool, browser=browser)
            runner = make_runner(settings, store, service, principals={OPERATOR.name: OPERATOR})
            jobs = BatchJobs(settings, store, runner)
            if start is not None:
                view, created = await start(jobs, service)
            else:
                body = {"targets": urls}
                view, created = await jobs.submit(OPERATOR, idem, body, int(time.time()))
            job_id = view["id"]
            if not created:
                print(replay_notice(view), file=sys.stderr)
            runner.start()
            try:
                with BatchProgress(view["targets_total"], console) as bar:
                    bar.update(view)
                    while view["status"] in LIVE:
                        await asyncio.sleep(poll_s)
                        view = await jobs.status(OPERATOR, job_id, int(time.time()))
                        bar.update(view)
            except asyncio.CancelledError:
                # Ctrl-C: asyncio.run cancels this task; cancel the job and report it.
                interrupted = True
                view = await jobs.cancel(OPERATOR, job_id, int(time.time()))
            finally:
                await runner.stop(settings.batch.shutdown_grace_s)
                await browser.close()
            async for line in jobs.results_ndjson(OPERATOR, job_id, int(time.time())):
                out.write(line)
    finally:
        pool.close()
        if store is not None:
            await store.close()
        await adb.close()
    if interrupted:
        print(f"sift: interrupted; cancelled job {job_id}", file=sys.stderr)
    print(summary(view, time.monotonic() - started), file=sys.stderr)
    return EXIT_INTERRUPTED if interrupted else exit_code(view)


def _cmd_reconcile(args: argparse.Namespace) -> int:
    """``sift batch reconcile``: fail every live job of the store (see ``batch.ops``)."""
    from sift.batch.ops import reconcile_store
    from sift.cli import _settings

    n = reconcile_store(_settings(args))
    print(f"sift: marked {n} live batch jobs failed", file=sys.stderr)
    return EXIT_OK
