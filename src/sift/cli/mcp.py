"""The ``sift mcp`` subcommand (``sift.cli.build_parser`` registers it with ``add_mcp_parser``).

The server itself is ``sift.mcp.stdio``, imported only when the command runs (the MCP SDK
is not needed for anything else the CLI does)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from sift import datadir
from sift.assembly import settings_for
from sift.cli.args import add_settings_args
from sift.config import CALLER_CLASSES


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
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    from sift.mcp.stdio import STDIO_CALLER, principal_for_key, serve_stdio
    from sift.principal import OPERATOR, Principal

    settings = settings_for(args)
    if args.operator:
        principal = OPERATOR
    elif args.caller_class is not None:
        principal = Principal(STDIO_CALLER, args.caller_class)
    else:
        # $SIFT_MCP_KEY may be set while --class is given: the explicit flag wins.
        principal = principal_for_key(settings, args.key)
    lock = datadir.own(
        settings.data_dir,
        "mcp",
        advice="let the agent use that server's /mcp endpoint (docs/mcp.md), or give "
        "sift mcp its own --data-dir",
    )
    try:
        # Standard output carries the protocol: anything else goes to standard error.
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
        asyncio.run(serve_stdio(settings, principal))
    finally:
        lock.release()
    return 0
