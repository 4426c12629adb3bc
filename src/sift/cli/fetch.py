"""``sift fetch URL``: one URL in-process as the operator, or through a running sift
(``--server``, or the ``sift serve`` that owns the data directory)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from sift.assembly import own_or_delegate, settings_for
from sift.cli.actionargs import SYNTAX as ACTION_SYNTAX
from sift.cli.actionargs import parse_action_flag
from sift.cli.args import add_server_args, add_settings_args
from sift.cli.exits import EXIT_UPSTREAM_STATUS, EXIT_USAGE
from sift.datadir import DataDirLock

if TYPE_CHECKING:
    from sift.config import Settings


def add_fetch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "fetch",
        help="fetch one URL and print its content",
        description="Fetch one URL in-process as the operator (or through the sift serve "
        "that owns the data directory, or --server) and print its content.",
        epilog="exit status: 0 the page was fetched (upstream 2xx/3xx); 1 sift refused or "
        "could not fetch it (the error and its hint on standard error; with --json, the "
        "error envelope on standard output); 2 bad usage, configuration or path; "
        f"{EXIT_UPSTREAM_STATUS} the upstream answered 4xx or 5xx (its content is still "
        "printed).",
    )
    add_settings_args(p)
    p.add_argument("url")
    p.add_argument("--format", choices=["markdown", "text", "html", "raw", "screenshot"])
    p.add_argument("--max-bytes", type=int, metavar="N", help="largest slice to return")
    p.add_argument("--offset", type=int, metavar="N", help="UTF-8 byte offset to read from")
    p.add_argument("--digest", metavar="SHA", help="read this snapshot (with --offset)")
    p.add_argument("--selector", metavar="CSS", help="keep only what this selector matches")
    p.add_argument("--max-age-s", type=int, metavar="S", help="accept a cached copy this old")
    p.add_argument("--whole-page", action="store_true", help="convert the whole page")
    p.add_argument("--links", action="store_true", help="include the page's links (--json)")
    p.add_argument("--no-robots", action="store_true", help="ignore robots.txt")
    p.add_argument(
        "--engine",
        choices=["auto", "http", "browser"],
        help="auto (default): the browser only for JavaScript pages; http; browser",
    )
    p.add_argument("--wait-for", metavar="CSS", help="browser: wait for this selector")
    p.add_argument(
        "-H",
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="send this header to the URL's origin only (repeatable; a 'Cookie: a=b; c=d' "
        "line becomes cookies); see docs/fetching.md#pages-behind-a-login",
    )
    p.add_argument(
        "--cookie",
        action="append",
        metavar="NAME=VALUE",
        help="send this cookie to the URL's origin only (repeatable)",
    )
    p.add_argument(
        "--action",
        dest="actions",
        action="append",
        type=parse_action_flag,
        metavar="STEP",
        help=f"a page action, repeatable, run in order in the browser: {ACTION_SYNTAX}",
    )
    p.add_argument(
        "--screenshot",
        metavar="FILE",
        help="browser: also write a picture of the page to FILE (.png, .jpg or .webp)",
    )
    p.add_argument("--full-page", action="store_true", help="screenshot: the whole page")
    p.add_argument(
        "--viewport", metavar="WxH", type=_viewport, help="screenshot: viewport, e.g. 1280x720"
    )
    p.add_argument("--quality", type=int, metavar="N", help="screenshot: jpeg/webp quality")
    p.add_argument(
        "--changes",
        action="store_true",
        help="compare with the last --changes fetch of this URL: the change and its diff "
        "on standard error (docs/watches.md)",
    )
    p.add_argument("--tag", metavar="TAG", help="--changes: keep this history apart")
    p.add_argument(
        "--ignore",
        action="append",
        metavar="CSS",
        help="--changes: leave what this selector matches out of the comparison (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the whole envelope as JSON")
    add_server_args(p, "ask a running sift instead")
    p.set_defaults(func=cmd_fetch)


_SHOT_SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".webp": "webp"}


def _usage(message: str) -> NoReturn:
    print(f"sift fetch: {message}", file=sys.stderr)
    raise SystemExit(2)  # bad usage, as the epilog says


def _viewport(text: str) -> tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if not (sep and width.isdigit() and height.isdigit()):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1280x720, not {text!r}")
    return int(width), int(height)


def _shot_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``screenshot`` option from --screenshot FILE (its type from the suffix),
    --full-page, --viewport and --quality; None without --screenshot."""
    if args.screenshot is None:
        if args.full_page or args.viewport or args.quality is not None:
            _usage("--full-page, --viewport and --quality need --screenshot")
        return None
    kind = _SHOT_SUFFIXES.get(Path(args.screenshot).suffix.lower())
    if kind is None:
        _usage("--screenshot FILE must end in .png, .jpg, .jpeg or .webp")
    shot: dict[str, Any] = {"type": kind, "full_page": args.full_page, "quality": args.quality}
    if args.viewport:
        shot["width"], shot["height"] = args.viewport
    return {k: v for k, v in shot.items() if v is not None}


def _fetch_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {
        "format": args.format,
        "max_bytes": args.max_bytes,
        "offset": args.offset,
        "digest": args.digest,
        "selector": args.selector,
        "max_age_s": args.max_age_s,
        "main_content": False if args.whole_page else None,
        "links": True if args.links else None,
        "robots": False if args.no_robots else None,
        "engine": args.engine,
        "wait_for": args.wait_for,
        **_credentials(args.header or [], args.cookie or []),
        "actions": args.actions,
        "screenshot": _shot_options(args),
        "changes": True if args.changes else None,
        "tag": args.tag,
        "ignore": args.ignore,
    }
    return {k: v for k, v in options.items() if v is not None}


class _Usage(Exception):
    """A malformed -H or --cookie: exit 2 with the message."""


def _credentials(header_lines: list[str], cookie_pairs: list[str]) -> dict[str, Any]:
    """``-H 'Name: value'`` and ``--cookie name=value`` as the headers and cookies options
    (checked by the server like any; only the shape is checked here, and a bad one is
    refused without echoing it: it may hold a secret)."""
    headers: dict[str, str] = {}
    cookies: dict[str, str] = {}
    for i, line in enumerate(header_lines):
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise _Usage(f"-H #{i + 1} is not 'Name: value'")
        if name.strip().lower() == "cookie":
            cookie_pairs = [*cookie_pairs, *(p for p in value.split(";") if p.strip())]
        else:
            headers[name.strip()] = value.strip()
    for i, pair in enumerate(cookie_pairs):
        name, sep, value = pair.strip().partition("=")
        if not sep or not name.strip():
            raise _Usage(f"cookie #{i + 1} is not 'name=value'")
        cookies[name.strip()] = value.strip()
    return {"headers": headers or None, "cookies": cookies or None}


async def _fetch_in_process(
    settings: Settings, url: str, options: dict[str, Any]
) -> tuple[Any, bytes | None]:
    """The envelope, and the screenshot's bytes when it carries one."""
    from sift.assembly import assemble, build_render_pool
    from sift.options import parse_options
    from sift.principal import OPERATOR

    opts = parse_options({"url": url, **options})
    # One render worker, started only if the page needs rendering.
    pool = build_render_pool(settings, workers=1)
    # A changes fetch needs the history: in PostgreSQL when store.url is set.
    store = bool(opts.changes and settings.store.url)
    async with assemble(settings, render_pool=pool, start_pool=False, store=store) as parts:
        envelope = await parts.service.fetch(OPERATOR, opts)
        image = None
        if "screenshot" in envelope:
            stored = await parts.service.screenshot(OPERATOR, envelope["screenshot"]["digest"])
            image = stored.data if stored is not None else None
        return envelope, image


def cmd_fetch(args: argparse.Namespace) -> int:
    """Fetch one URL in-process as the operator, or through a running sift (--server, or
    the server that owns the data directory)."""
    try:
        options = _fetch_options(args)
    except _Usage as exc:
        print(f"sift fetch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    server, key = args.server, args.key
    lock: DataDirLock | None = None
    if not server:
        settings = settings_for(args)
        got = own_or_delegate(settings, "fetch", args)
        if isinstance(got, DataDirLock):
            lock = got
        else:
            server, key = got
    try:
        if server:
            from sift.client import Client

            with Client(server, key) as client:
                envelope = client.request("POST", "/v1/fetch", json={"url": args.url, **options})
                image = client.screenshot(envelope["screenshot"]) if args.screenshot else None
        else:
            envelope, image = asyncio.run(_fetch_in_process(settings, args.url, options))
    finally:
        if lock is not None:
            lock.release()
    if args.screenshot and image is not None:
        Path(args.screenshot).write_bytes(image)
        shot = envelope["screenshot"]
        print(
            f"sift: screenshot {shot['width']}x{shot['height']} {shot['type']} "
            f"({len(image)} bytes) written to {args.screenshot}",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(envelope, ensure_ascii=False, indent=2))
    else:
        content = envelope["content"]
        sys.stdout.write(content if content.endswith("\n") else content + "\n")
        if envelope["truncated"]:
            print(
                f"sift: truncated at {envelope['next_offset']} of {envelope['total_bytes']} "
                f"bytes; continue with --offset {envelope['next_offset']} "
                f"--digest {envelope['digest']}",
                file=sys.stderr,
            )
        if envelope.get("change"):
            _print_change(envelope["change"])
    if envelope["status"] >= 400:
        print(f"sift: the upstream answered HTTP {envelope['status']}", file=sys.stderr)
        return EXIT_UPSTREAM_STATUS
    return 0


def _print_change(change: dict[str, Any]) -> None:
    """``--changes`` without ``--json``: the change on standard error, then its diff."""
    line = f"sift: {change['status']}"
    if change["status"] == "changed":
        line += f" (+{change['added']} -{change['removed']})"
    if change["previous_fetched_at"] is not None:
        line += f" since {change['previous_fetched_at']}"
    if change["truncated"]:
        line += " (diff truncated)"
    print(line, file=sys.stderr)
    if change["diff"]:
        sys.stderr.write(change["diff"])
