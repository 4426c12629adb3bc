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
from pathlib import Path
from typing import IO

from sift.cli.args import add_server_args, add_settings_args
from sift.cli.exits import EXIT_OK, EXIT_USAGE
from sift.cli.jobrun import JobRun, run_job_command, run_local


def add_batch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``sift batch`` on the CLI's subparsers (``sift.cli.build_parser`` calls this)."""
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
            from sift.cli.remote import run_remote

            return run_remote(where.server, where.key, urls, idem, where.out, where.console, poll)
        assert where.settings is not None
        return asyncio.run(run_local(where.settings, urls, idem, where.out, where.console, poll))

    return run_job_command(args, "batch", run)


def _cmd_reconcile(args: argparse.Namespace) -> int:
    """``sift batch reconcile``: fail every live job of the store (see ``batch.ops``).

    It owns the data directory first, like every command that opens the store: next to a
    running ``sift serve`` it would fail the very jobs that server is working on, so it
    refuses with one line naming that server (exit 2) instead."""
    from sift import datadir
    from sift.assembly import config_arg, settings_for
    from sift.batch.ops import reconcile_store

    settings = settings_for(args)
    lock = datadir.own(
        settings.data_dir,
        "batch reconcile",
        config=config_arg(args),
        advice="reconcile fails every live job, this server's too: stop it first "
        "(the embedded store reconciles at every start anyway)",
    )
    try:
        n = reconcile_store(settings)
    finally:
        lock.release()
    print(f"sift: marked {n} live batch jobs failed", file=sys.stderr)
    return EXIT_OK
