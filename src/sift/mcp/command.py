"""The ``sift mcp`` subcommand (``cli.build_parser`` registers it with ``add_mcp_parser``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from sift.cliargs import add_settings_args


def add_mcp_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve MCP over stdio (for agents); `sift serve` also serves it at /mcp",
        description="Serve sift's MCP tools (fetch, batch_submit, batch_status, "
        "batch_results) over standard input/output, in this process. Runs as the operator "
        "unless --key names a configured caller.",
    )
    add_settings_args(p)
    p.add_argument(
        "--key",
        metavar="KEY",
        default=os.environ.get("SIFT_MCP_KEY"),
        help="act as the caller with this key, with its class (default $SIFT_MCP_KEY; "
        "none: the operator)",
    )
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    from sift.cli import _settings
    from sift.mcp.stdio import principal_for_key, serve_stdio

    settings = _settings(args)
    principal = principal_for_key(settings, args.key)
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    # Standard output carries the protocol: anything else goes to standard error.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    asyncio.run(serve_stdio(settings, principal))
    return 0
