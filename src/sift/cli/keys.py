"""``sift keys add|list|remove``: the callers in the config file, and their keys.

A running ``sift serve`` watches the config file it reads its keys from and reloads them
within a second of a change (and at once on SIGHUP, which add and remove send to the
server that owns the config's data directory when it reads this file).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from sift.config import DEFAULT_CONFIG_FILE


def add_keys_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = sub.add_parser(
        "keys",
        help="manage caller keys",
        description="Keys live in the config file (--config, else $SIFT_CONFIG, else "
        f"./{DEFAULT_CONFIG_FILE}). A running sift serve that reads that file picks up a "
        "change within a second (and at once on SIGHUP, which add and remove send it).",
    )
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    config_help = f"config file (default $SIFT_CONFIG, else ./{DEFAULT_CONFIG_FILE})"
    p = keys_sub.add_parser("add", help="issue a key for a new caller; prints it once")
    p.add_argument("name")
    p.add_argument("--class", dest="caller_class", choices=["fleet", "restricted"], required=True)
    p.add_argument("--config", metavar="FILE", help=config_help)
    p.set_defaults(func=cmd_keys_add)
    p = keys_sub.add_parser("list", help="the configured callers: name and class")
    p.add_argument("--config", metavar="FILE", help=config_help)
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(func=cmd_keys_list)
    p = keys_sub.add_parser("remove", help="delete a caller; its key stops working")
    p.add_argument("name")
    p.add_argument("--config", metavar="FILE", help=config_help)
    p.set_defaults(func=cmd_keys_remove)


def _keys_file(args: argparse.Namespace) -> str:
    from sift.config import config_path

    return os.fspath(config_path(args.config) or DEFAULT_CONFIG_FILE)


def _reload_note(path: str) -> str:
    """Tell the server using this config to reload its keys, and say what happened."""
    from sift.keys import notify_server

    found = notify_server(path)
    if found is None:
        return "a running sift serve that reads this file picks it up within a second"
    owner, reads_this = found
    if reads_this:
        return f"{owner.describe()} reloads its keys now"
    return (
        f"note: {owner.describe()}, which owns this config's data directory, reads its keys "
        f"from {owner.config or 'no config file'}, not from this file"
    )


def cmd_keys_add(args: argparse.Namespace) -> int:
    from sift.keys import add_caller

    path = _keys_file(args)
    key = add_caller(path, args.name, args.caller_class)
    print(key)
    print(
        f"caller {args.name!r} ({args.caller_class}) added to {path}; the key is shown only "
        f"once; {_reload_note(path)}",
        file=sys.stderr,
    )
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    from sift.keys import list_callers

    callers = list_callers(_keys_file(args))
    if args.json:
        print(json.dumps([{"name": n, "class": c} for n, c in callers], indent=2))
    else:
        for name, caller_class in callers:
            print(f"{name}\t{caller_class}")
    return 0


def cmd_keys_remove(args: argparse.Namespace) -> int:
    from sift.keys import remove_caller

    path = _keys_file(args)
    remove_caller(path, args.name)
    print(f"caller {args.name!r} removed from {path}; {_reload_note(path)}", file=sys.stderr)
    return 0
