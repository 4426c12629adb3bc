"""Where a job command (``sift batch``, ``sift crawl``) runs, and the in-process run.

``run_job_command`` picks the place: ``--server``, else the ``sift serve`` that owns the
data directory, else this process, which then owns the directory. ``run_local`` runs a job
in this process as the operator, through ``sift.assembly``; ``cli.remote.run_remote`` is
its twin through a server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from sift.assembly import own_or_delegate, settings_for
from sift.cli.exits import EXIT_INTERRUPTED, EXIT_USAGE

if TYPE_CHECKING:
    from rich.console import Console

    from sift.config import Settings


@dataclass(frozen=True)
class JobRun:
    """Where a job command runs: through ``server`` (with ``key``), or in this process on
    ``settings`` (then it owns the data directory); results go to ``out``."""

    server: str | None
    key: str | None
    settings: Settings | None  # None when a server runs the job
    out: IO[bytes]
    console: Console


def run_job_command(args: argparse.Namespace, what: str, run: Callable[[JobRun], int]) -> int:
    """``sift batch`` and ``sift crawl``: pick where the job runs (``--server``, else the
    server owning the data directory, else this process, which then owns it), open
    ``--out``, call ``run``; the lock and ``--out`` are let go however it ends."""
    from rich.console import Console

    console = Console(stderr=True)
    server, key, lock, settings = args.server, args.key, None, None
    if not server:
        settings = settings_for(args)
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


# How a job is started in-process: (jobs, service) → (status view, created). ``sift crawl``
# passes its own; the default submits the URL list as a batch.
Starter = Callable[[Any, Any], Awaitable[tuple[dict[str, Any], bool]]]


async def run_local(
    settings: Settings,
    urls: list[str],
    idem: str,
    out: IO[bytes],
    console: Console,
    poll_s: float,
    start: Starter | None = None,
) -> int:
    """Run a job in this process as the operator: submit (or ``start`` it another way),
    show progress until it ends (Ctrl-C cancels it), write the NDJSON, say the summary."""
    from sift.assembly import assemble
    from sift.cli.progress import (
        LIVE,
        BatchProgress,
        exit_code,
        interrupted_line,
        replay_notice,
        summary,
    )
    from sift.principal import OPERATOR

    started = time.monotonic()
    interrupted = False
    async with assemble(settings, principals={OPERATOR.name: OPERATOR}) as parts:
        runner, jobs = parts.runner, parts.jobs
        assert runner is not None and jobs is not None
        if start is not None:
            view, created = await start(jobs, parts.service)
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
            # Ctrl-C: asyncio.run cancels this task; cancel the job and report it. A second
            # Ctrl-C raises KeyboardInterrupt wherever this has got to: the job is then
            # cancelled or, at worst, failed by the next start, as after a restart.
            interrupted = True
            print(interrupted_line(job_id), file=sys.stderr, flush=True)
            view = await jobs.cancel(OPERATOR, job_id, int(time.time()))
        finally:
            await runner.stop(settings.batch.shutdown_grace_s)
        async for line in jobs.results_ndjson(OPERATOR, job_id, int(time.time())):
            out.write(line)
    print(summary(view, time.monotonic() - started), file=sys.stderr)
    return EXIT_INTERRUPTED if interrupted else exit_code(view)
