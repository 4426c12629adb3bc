"""``sift batch --server``: the same job flow against a running sift, through ``sift.client``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

from rich.console import Console

from sift.cli.exits import EXIT_INTERRUPTED
from sift.cli.progress import (
    BatchProgress,
    exit_code,
    interrupted_line,
    replay_notice,
    summary,
)
from sift.client import Client, Job, JobView


def run_remote(
    server: str,
    key: str | None,
    urls: list[str],
    idem: str,
    out: IO[bytes],
    console: Console,
    poll_s: float,
    start: Callable[[Client], Job] | None = None,
) -> int:
    """Submit (or ``start`` the job another way: ``sift crawl``), show progress until the
    job ends (Ctrl-C cancels it), write the NDJSON."""
    started = time.monotonic()
    interrupted = False
    with Client(server, key) as client:
        job = start(client) if start is not None else client.submit(urls, idempotency_key=idem)
        view: JobView = job.view
        if not job.created:
            print(replay_notice(view.to_dict()), file=sys.stderr)
        try:
            with BatchProgress(view.targets_total, console) as bar:
                view = job.wait(progress=lambda v: bar.update(v.to_dict()), poll_s=poll_s)
        except KeyboardInterrupt:
            interrupted = True
            print(interrupted_line(view.id), file=sys.stderr, flush=True)
            view = job.cancel()
        for chunk in job.results_ndjson():
            out.write(chunk)
    print(summary(view.to_dict(), time.monotonic() - started), file=sys.stderr)
    return EXIT_INTERRUPTED if interrupted else exit_code(view.to_dict())
