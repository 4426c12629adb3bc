"""The ``sift`` command: ``serve``, ``fetch``, ``batch``, ``crawl``, ``map``, ``mcp``,
``stats``, ``keys``, ``watch``.

One module per command (``sift.cli.serve`` …), each registering its parser and importing
downward only (``sift.assembly`` builds what it runs); this package only gathers the
parsers and runs the chosen command. Every command loads settings the same way
(``--config``, ``SIFT_*``, ``--set KEY=VALUE``); a ``SiftError`` prints its message and hint
on one line each and exits non-zero — 2 for bad configuration or usage — never with a
traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from sift import __version__
from sift.cli.batch import add_batch_parser
from sift.cli.crawl import add_crawl_parsers
from sift.cli.exits import EXIT_CONFIG
from sift.cli.fetch import add_fetch_parser
from sift.cli.keys import add_keys_parser
from sift.cli.mcp import add_mcp_parser, tell_usage_errors
from sift.cli.serve import add_serve_parser
from sift.cli.stats import add_stats_parser
from sift.cli.watch import add_watch_parser
from sift.errors import ConfigError, SiftError, StoreError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sift", description="A web fetcher for programs.")
    parser.add_argument("--version", action="version", version=f"sift {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(sub)
    add_fetch_parser(sub)
    add_batch_parser(sub)
    add_crawl_parsers(sub)
    add_mcp_parser(sub)
    add_stats_parser(sub)
    add_keys_parser(sub)
    add_watch_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if given[:1] == ["mcp"]:
        tell_usage_errors(parser)  # an MCP client hears a bad flag too, not only stderr
    args = parser.parse_args(given)
    as_json = bool(getattr(args, "json", False))
    try:
        code: int = args.func(args)
        return code
    except ConfigError as exc:
        _report(exc, as_json, with_hint=False)
        return EXIT_CONFIG
    except StoreError as exc:
        # The database file under data_dir cannot be opened or used: a bad path as well.
        _report(StoreError(f"{exc.message} ({exc.hint})"), as_json, with_hint=False)
        return EXIT_CONFIG
    except SiftError as exc:
        _report(exc, as_json, with_hint=True)
        return 1
    except OSError as exc:
        # A path the command was given (a file, a directory, a device) that does not work:
        # one line naming it, never a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        _report(ConfigError(f"{where}{exc.strerror or exc}"), as_json, with_hint=False)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


def _report(exc: SiftError, as_json: bool, *, with_hint: bool) -> None:
    """An error on standard error as one line (and its hint); with ``--json``, the same
    ``{"error": {code, message, hint}}`` envelope the API sends, on standard output."""
    if as_json:
        print(json.dumps(exc.to_dict(), ensure_ascii=False))
    elif with_hint:
        print(f"sift: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
    else:
        print(f"sift: {exc.message}", file=sys.stderr)
