"""``sift crawl URL`` and ``sift map URL``.

``sift crawl`` starts a crawl (``POST /v1/crawl``'s parameters as flags) and follows it like
``sift batch`` does — in-process as the operator on the local data directory, or through a
running sift with ``--server`` (or when a ``sift serve`` owns the directory) — with the
same progress bar (its total grows as pages are found), NDJSON results (each line with
``depth`` and ``parent``) and summary. ``--idem KEY`` (default: a digest of the
parameters, so the same crawl again replays the live job's results) and ``--new`` as for
batch. Exit status: 0 when every page succeeded, 1 otherwise (or a sift error), 2 for a bad
request (an invalid flag value or start URL), 130 after Ctrl-C (the job is cancelled).

``sift map URL`` prints the URLs ``POST /v1/map`` finds, one per line (``--json``: the
whole answer). Exit status 0, 1 on a sift error, 2 for a bad request.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import secrets
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sift.config import Settings

from sift.assembly import own_or_delegate, settings_for
from sift.cli.args import add_server_args, add_settings_args
from sift.cli.exits import EXIT_OK, EXIT_USAGE
from sift.cli.jobrun import JobRun, run_job_command, run_local
from sift.crawl.scope import SCOPES
from sift.errors import BadRequest


def _add_scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="the start URL")
    p.add_argument("--scope", choices=SCOPES, help="host, domain or prefix (default prefix)")
    p.add_argument(
        "--include", action="append", metavar="GLOB", help="path glob to keep (repeatable)"
    )
    p.add_argument(
        "--exclude", action="append", metavar="GLOB", help="path glob to skip (repeatable)"
    )
    p.add_argument(
        "--no-sitemap", dest="sitemap", action="store_false", default=None,
        help="do not read the site's sitemaps",
    )  # fmt: skip


def add_crawl_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``sift crawl`` and ``sift map`` (``sift.cli.build_parser`` calls this)."""
    p = sub.add_parser("crawl", help="crawl a site: a batch job that grows as links are found")
    add_settings_args(p)
    _add_scope_args(p)
    p.add_argument("--max-pages", type=int, metavar="N", help="pages at most (default 100)")
    p.add_argument("--max-depth", type=int, metavar="D", help="link depth (default 3)")
    p.add_argument(
        "--format", choices=("markdown", "text", "html", "raw"), help="format of every page"
    )
    idem = p.add_mutually_exclusive_group()
    idem.add_argument("--idem", metavar="KEY", help="Idempotency-Key (default: a digest)")
    idem.add_argument("--new", action="store_true", help="start a new crawl even if it ran")
    p.add_argument("--out", metavar="FILE", help="write NDJSON results here (default stdout)")
    add_server_args(p, "crawl through a running sift instead")
    p.add_argument("--poll-s", type=float, default=0.5, metavar="S", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_crawl)

    p = sub.add_parser("map", help="list a site's URLs quickly (sitemaps, start page links)")
    add_settings_args(p)
    _add_scope_args(p)
    p.add_argument("--limit", type=int, metavar="N", help="URLs at most (default 1000)")
    p.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    add_server_args(p, "map through a running sift instead")
    p.set_defaults(func=cmd_map)


def _params(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    out = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if getattr(args, "format", None):
        out["options"] = {"format": args.format}
    return out


def default_idem_key(url: str, params: dict[str, Any]) -> str:
    blob = json.dumps([url, params], sort_keys=True, separators=(",", ":"))
    return "sift-crawl-" + hashlib.sha256(blob.encode()).hexdigest()[:40]


def _bad(exc: BadRequest) -> int:
    print(f"sift: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
    return EXIT_USAGE


def cmd_crawl(args: argparse.Namespace) -> int:
    params = _params(args, ("max_pages", "max_depth", "scope", "include", "exclude", "sitemap"))
    idem = args.idem or default_idem_key(args.url, params)
    if args.new:
        idem += "-" + secrets.token_hex(8)
    poll = args.poll_s

    def run(where: JobRun) -> int:
        try:
            if where.server:
                from sift.cli.remote import run_remote
                from sift.client import Client, Job

                def start(client: Client) -> Job:
                    return client.crawl(args.url, idempotency_key=idem, **params)

                return run_remote(
                    where.server, where.key, [], idem, where.out, where.console, poll, start=start
                )

            async def start_local(jobs: Any, service: Any) -> tuple[dict[str, Any], bool]:
                from sift.crawl.submit import submit_crawl
                from sift.principal import OPERATOR

                body = {"url": args.url, **params}
                return await submit_crawl(jobs, service, OPERATOR, idem, body, int(time.time()))

            assert where.settings is not None
            return asyncio.run(
                run_local(
                    where.settings, [], idem, where.out, where.console, poll, start=start_local
                )
            )
        except BadRequest as exc:
            return _bad(exc)

    return run_job_command(args, "crawl", run)


def cmd_map(args: argparse.Namespace) -> int:
    params = _params(args, ("scope", "include", "exclude", "sitemap", "limit"))
    server, key, lock = args.server, args.key, None
    if not server:
        settings = settings_for(args)
        got = own_or_delegate(settings, "map", args)
        if isinstance(got, tuple):
            server, key = got
        else:
            lock = got
    try:
        if server:
            from sift.client import Client

            with Client(server, key) as client:
                result = client.map(args.url, **params)
        else:
            result = asyncio.run(_map_local(settings, {"url": args.url, **params}))
    except BadRequest as exc:
        return _bad(exc)
    finally:
        if lock is not None:
            lock.release()
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        for url in result["urls"]:
            print(url)
        if not result["complete"]:
            print("sift: map stopped at the time limit; the list is partial", file=sys.stderr)
    return EXIT_OK


async def _map_local(settings: Settings, body: dict[str, Any]) -> dict[str, Any]:
    from sift.assembly import assemble
    from sift.crawl.crawler import Crawler
    from sift.crawl.map import map_site
    from sift.crawl.spec import parse_map
    from sift.principal import OPERATOR
    from sift.store.sqlite.store import SqliteBatchStore

    spec = parse_map(body)
    # A map stores no job: its crawler gets the embedded store over the local database,
    # and the service no browser (pages are read over HTTP).
    async with assemble(settings, with_browser=False) as parts:
        crawler = Crawler(SqliteBatchStore(parts.adb), parts.service)
        return await map_site(crawler, parts.service, OPERATOR, spec)
