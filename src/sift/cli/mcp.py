"""The ``sift mcp`` subcommand (``sift.cli.build_parser`` registers it with ``add_mcp_parser``).

The server itself is ``sift.mcp.stdio``, imported only when the command runs (the MCP SDK
is not needed for anything else the CLI does). Whatever stops it from starting — a bad
flag (``tell_usage_errors``), a bad config, an unknown ``--key``, a busy data directory —
is said on standard error *and* answered to the client's first request
(``sift.mcp.refusal``), so an MCP client shows it instead of "Connection closed"."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from sift.assembly import config_arg, settings_for
from sift.cli.args import add_settings_args
from sift.config import CALLER_CLASSES
from sift.errors import SiftError

if TYPE_CHECKING:
    from sift.config import Settings
    from sift.datadir import DataDirLock
    from sift.principal import Principal


def add_mcp_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve MCP over stdio (for agents); `sift serve` also serves it at /mcp",
        description="Serve sift's MCP tools (fetch, batch_submit, batch_status, "
        "batch_results) over standard input/output, in this process. Runs as a "
        "restricted caller (public addresses only) unless --class, --key or --operator "
        "says otherwise.",
    )
    add_settings_args(p)
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--key",
        metavar="KEY",
        default=os.environ.get("SIFT_MCP_KEY"),
        help="act as the caller with this key, with its class (default $SIFT_MCP_KEY)",
    )
    who.add_argument(
        "--class",
        dest="caller_class",
        choices=CALLER_CLASSES,
        help="act as an unnamed caller of this class (default: restricted)",
    )
    who.add_argument(
        "--operator",
        action="store_true",
        help="act as the operator: fleet limits AND every private, loopback and link-local "
        "address (cloud metadata included). Only for an agent you trust with your network",
    )
    # Internal: the process that finishes a session's jobs after its input closed
    # (sift.mcp.handover starts it with the lock's and a pipe's descriptors).
    p.add_argument("--finish-jobs", metavar="LOCK_FD:WAIT_FD", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_mcp)
    tell_usage_errors(p)


def tell_usage_errors(parser: argparse.ArgumentParser) -> None:
    """Make ``parser``'s usage errors reach the MCP client too: argparse prints them on
    standard error and exits; first the client's ``initialize`` gets them as its error.
    ``sift.cli.main`` also calls it on the top-level parser for a ``sift mcp`` command line
    (an unknown flag is reported by the top-level parser)."""
    shown = parser.error

    def error(message: str) -> NoReturn:
        from sift.mcp.refusal import tell_client

        tell_client(f"sift mcp could not start: {message} (`sift mcp --help` lists its flags)")
        shown(message)

    parser.error = error  # type: ignore[method-assign]


def cmd_mcp(args: argparse.Namespace) -> int:
    from sift.mcp.handover import Successor, run_finisher
    from sift.mcp.stdio import serve_stdio

    if args.finish_jobs:
        return run_finisher(settings_for(args), args.finish_jobs)
    try:
        settings, principal, lock, resumed = _start(args)
    except SiftError as exc:
        from sift.mcp.refusal import tell_client

        tell_client(
            f"sift mcp could not start: {exc.message} (hint: {exc.hint})", exc.to_dict()["error"]
        )
        raise  # sift.cli.main says it on standard error and picks the exit status
    successor = Successor(_settings_argv(args, settings), lock)
    try:
        # Standard output carries the protocol: anything else goes to standard error.
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
        if resumed:
            print(f"sift mcp: resuming {len(resumed)} unfinished job(s)", file=sys.stderr)
        asyncio.run(serve_stdio(settings, principal, successor=successor, resumed=resumed))
    finally:
        lock.release()
    return 0


def _start(
    args: argparse.Namespace,
) -> tuple[Settings, Principal, DataDirLock, list[str] | None]:
    """What ``sift mcp`` needs before it serves: settings, who it runs as, the data
    directory's lock (taken over from a finisher if one holds it) and the jobs handed over."""
    from sift.mcp.handover import own_or_take_over
    from sift.mcp.stdio import STDIO_CALLER, principal_for_key
    from sift.principal import OPERATOR, Principal

    settings = settings_for(args)
    if args.operator:
        principal = OPERATOR
    elif args.caller_class is not None:
        principal = Principal(STDIO_CALLER, args.caller_class)
    else:
        # $SIFT_MCP_KEY may be set while --class is given: the explicit flag wins.
        principal = principal_for_key(settings, args.key)
    lock, resumed = own_or_take_over(
        settings,
        advice="let the agent use that server's /mcp endpoint (docs/mcp.md), or give "
        "sift mcp its own --data-dir",
    )
    return settings, principal, lock, resumed


def _settings_argv(args: argparse.Namespace, settings: Settings) -> list[str]:
    """``sift mcp`` with this command's settings flags, for the finisher it may start (the
    environment and working directory are inherited: ``SIFT_*`` and ./sift.toml apply)."""
    argv = ["mcp", "--data-dir", os.path.abspath(settings.data_dir)]
    config = config_arg(args)
    if config is not None:
        argv += ["--config", os.path.abspath(config)]
    for item in args.set:
        argv += ["--set", item]
    return argv
