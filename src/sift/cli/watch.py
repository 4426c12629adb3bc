"""``sift watch add|list|show|rm``: a caller's watches (docs/watches.md).

Through a running sift (``--server URL --key KEY``, or the ``sift serve`` that owns the data
directory, as the operator), else in this process on the data directory as the operator: the
watch is stored there and checked by the next ``sift serve`` on that directory.
Output is human lines, or the API's JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from sift.assembly import own_or_delegate, settings_for
from sift.cli.args import add_server_args, add_settings_args
from sift.cli.exits import EXIT_OK

if TYPE_CHECKING:
    from sift.config import Settings


def add_watch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("watch", help="watch URLs on a schedule: add, list, show, rm")
    verbs = p.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", help="watch a URL")
    add.add_argument("url")
    add.add_argument(
        "--every", required=True, metavar="T", help="interval: seconds, or 90s, 15m, 2h, 1d"
    )
    add.add_argument(
        "--ignore", action="append", metavar="CSS", help="drop this before comparing (repeat)"
    )
    add.add_argument("--webhook", metavar="URL", help="POST a signed event here on a change")
    add.add_argument("--format", choices=["markdown", "text", "html"])
    add.add_argument("--selector", metavar="CSS", help="watch only what this selector matches")
    add.add_argument("--whole-page", action="store_true", help="compare the whole page")
    show = verbs.add_parser("show", help="a watch and its newest checks, with their diffs")
    show.add_argument("id")
    show.add_argument("--events", type=int, default=10, metavar="N", help="checks to show")
    verbs.add_parser("list", help="your watches")
    rm = verbs.add_parser("rm", help="delete a watch")
    rm.add_argument("id")
    for verb in (add, show, rm, verbs.choices["list"]):
        add_settings_args(verb)
        add_server_args(verb, "talk to a running sift instead")
        verb.add_argument("--json", action="store_true", help="print the API's JSON")
        verb.set_defaults(func=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    server, key = args.server, args.key
    if not server:
        settings = settings_for(args)
        got = own_or_delegate(settings, "watch", args)
        if isinstance(got, tuple):
            server, key = got
        else:
            try:
                result = asyncio.run(_local(settings, args))
            finally:
                got.release()
            return _print(args, result)
    return _print(args, _remote(server, key, args))


def _add_body(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.format:
        options["format"] = args.format
    if args.selector:
        options["selector"] = args.selector
    if args.whole_page:
        options["main_content"] = False
    body: dict[str, Any] = {"url": args.url, "every": args.every}
    if options:
        body["options"] = options
    if args.ignore:
        body["ignore"] = args.ignore
    if args.webhook:
        body["webhook"] = args.webhook
    return body


def _remote(server: str, key: str | None, args: argparse.Namespace) -> Any:
    from sift.client import Client

    with Client(server, key) as client:
        if args.verb == "add":
            return client.request("POST", "/v1/watches", json=_add_body(args))
        if args.verb == "list":
            return client.list_watches()
        if args.verb == "show":
            return client.get_watch(args.id, events=args.events)
        return client.delete_watch(args.id)


async def _local(settings: Settings, args: argparse.Namespace) -> Any:
    from sift.assembly import assemble
    from sift.assembly.watching import make_watches
    from sift.principal import OPERATOR

    async with assemble(settings, with_browser=False, start_pool=False, store=True) as parts:
        assert parts.store is not None
        watches = make_watches(settings, parts.store, parts.service, scheduler=False)
        if args.verb == "add":
            return await watches.create(OPERATOR, _add_body(args), time.time())
        if args.verb == "list":
            return await watches.list(OPERATOR)
        if args.verb == "show":
            return await watches.get(OPERATOR, args.id, args.events)
        return await watches.delete(OPERATOR, args.id)


def _print(args: argparse.Namespace, result: Any) -> int:
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    elif args.verb == "add":
        print(result["id"])
        if result.get("webhook_secret"):
            print(f"webhook secret (shown once): {result['webhook_secret']}")
    elif args.verb == "list":
        for w in result:
            print(_line(w))
    elif args.verb == "show":
        print(_line(result))
        for e in result["events"]:
            print(_event(e))
    else:
        print(f"deleted {result['id']}")
    return EXIT_OK


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _line(w: dict[str, Any]) -> str:
    return (
        f"{w['id']}  every {w['every_s']:g}s  next {_when(w['next_check_at'])}  "
        f"last {w['last_outcome'] or '-'}  checks {w['checks']}  changes {w['changes']}  "
        f"{w['url']}"
    )


def _event(e: dict[str, Any]) -> str:
    head = f"#{e['seq']} {_when(e['checked_at'])} {e['outcome']} HTTP {e['http_status'] or '-'}"
    if e["error"]:
        return f"{head}  {e['error']['code']}: {e['error']['message']}"
    change = e["change"] or {}
    line = f"{head}  {change.get('status', '-')}"
    if change.get("diff"):
        line += f" (+{change.get('added', 0)} -{change.get('removed', 0)})\n{change['diff']}"
    return line
