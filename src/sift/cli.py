"""The ``sift`` command: ``serve``, ``keys add``, ``stats`` (more as features land).

Every command loads settings the same way (``--config``, ``SIFT_*``, ``--set KEY=VALUE``);
a ``SiftError`` prints its message and hint on one line each and exits non-zero — 2 for
bad configuration or usage — never with a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import Any

from sift import __version__, datadir
from sift.batch.command import add_batch_parser
from sift.cliargs import add_server_args, add_settings_args
from sift.config import DEFAULT_CONFIG_FILE, Settings, load_settings
from sift.crawl.command import add_crawl_parsers
from sift.datadir import DataDirLock
from sift.dcache import DB
from sift.errors import ConfigError, SiftError, StoreError
from sift.fetch import Fetcher
from sift.mcp.command import add_mcp_parser
from sift.workers import RenderPool

EXIT_CONFIG = 2
# `sift fetch`: the page was fetched, but the upstream answered 4xx or 5xx.
EXIT_UPSTREAM_STATUS = 3


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"flag --set {item}: expected KEY=VALUE")
        overrides[key.strip()] = value
    if getattr(args, "listen", None):
        overrides["listen"] = args.listen
    if args.data_dir:
        overrides["data_dir"] = args.data_dir
    return load_settings(args.config, overrides=overrides)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from sift.api.app import create_app
    from sift.api.auth import KeyRing
    from sift.api.hostguard import is_loopback_host
    from sift.api.listener import (
        ListenerLimits,
        effective_max_connections,
        guarded_protocol,
        raise_open_files_limit,
    )
    from sift.dcache import DB

    settings = _settings(args)
    host, port = settings.listen_host_port
    anonymous_allowed = is_loopback_host(host) or settings.allow_anonymous_public
    if not settings.callers and not anonymous_allowed:
        raise ConfigError(
            f"listen: {settings.listen}: no callers are configured, so every request would be "
            "anonymous; bind a loopback address, add a caller with `sift keys add`, or set "
            "allow_anonymous_public = true"
        )
    # 1. Own the data directory, 2. bind the port — only then 3. touch the store: a second
    # server (on any port, or one that cannot bind) must never reconcile a live server's jobs.
    # Until the try below, a failure exits the process, and the kernel drops the lock.
    lock = datadir.own(
        settings.data_dir,
        "serve",
        config=_config_arg(args),
        advice="stop it first, or give this one another --data-dir",
    )
    try:
        sock = _bind(host, port, settings.listen)
    except ConfigError:
        lock.release()
        raise
    bound_port = sock.getsockname()[1]  # the real one, also for port 0
    lock.announce(f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}")
    if settings.store.url:
        from sift.store.postgres.schema import prepare

        prepare(settings.store.url)  # a wrong or unreachable URL: exit 2 now, not at a request
    db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    keys = KeyRing(
        settings.callers,
        operator_key=lock.write_operator_key(),
        anonymous_allowed=anonymous_allowed,
        load_callers=lambda: _settings(args).callers,
    )
    app = create_app(
        settings, db, build_fetcher(settings), render_pool=render_pool(settings), keys=keys
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal with the
    # handler it found: make that handler a clean exit rather than death by signal.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # uvicorn's httptools protocol plus a head deadline, a head size cap and a connection
    # limit (api/listener.py says why uvicorn's own settings do not suffice).
    listener = settings.listener
    max_connections = effective_max_connections(listener.max_connections, raise_open_files_limit())
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http=guarded_protocol(
            ListenerLimits.from_settings(listener, max_connections=max_connections)
        ),
        timeout_keep_alive=listener.keep_alive_s,
        access_log=False,
        lifespan="on",
        log_level="info",
    )
    # uvicorn only announces addresses it bound itself; this socket was bound above.
    logging.getLogger("sift").info(
        "listening on http://%s (web console at /, API docs at /docs)", lock.owner.listen
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        lock.release()  # removes operator.json: local commands stop going through us
    return 0


def _bind(host: str, port: int, listen: str) -> socket.socket:
    """The listening socket, bound before anything else starts (as uvicorn binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"listen: {listen}: cannot bind: {exc.strerror or exc}") from exc
    return sock


def render_pool(settings: Settings) -> RenderPool:
    """The process's render pool (not started): one worker per core unless configured.
    Rendering is CPU-bound: processes use every core and keep the event loop free."""
    workers = settings.render_workers or os.cpu_count() or 1
    return RenderPool(workers, memory_bytes=settings.render_memory_bytes)


def build_fetcher(settings: Settings) -> Fetcher:
    """The process's one fetcher, configured from settings (not started)."""
    from sift.fetch.egress import listen_addresses

    host, port = settings.listen_host_port
    return Fetcher(
        user_agent=settings.user_agent,
        extra_public_cidrs=settings.egress.extra_public_cidrs,
        static_hosts=settings.egress.resolve,
        own_addresses=[*listen_addresses(host, port), *settings.egress.own_addresses],
    )


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
    }
    return {k: v for k, v in options.items() if v is not None}


async def _fetch_in_process(settings: Settings, url: str, options: dict[str, Any]) -> Any:
    from sift.dcache import AsyncDB
    from sift.options import parse_options
    from sift.principal import OPERATOR
    from sift.service import Service

    opts = parse_options({"url": url, **options})
    from sift.browser import Browser

    adb = await AsyncDB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    try:
        pool = RenderPool(1, memory_bytes=settings.render_memory_bytes)
        try:
            async with build_fetcher(settings) as fetcher:
                browser = Browser(settings.browser, fetcher)
                service = Service(settings, adb, fetcher, render_pool=pool, browser=browser)
                try:
                    return await service.fetch(OPERATOR, opts)
                finally:
                    await service.close()
                    await browser.close()
        finally:
            pool.close()
    finally:
        await adb.close()


def cmd_fetch(args: argparse.Namespace) -> int:
    """Fetch one URL in-process as the operator, or through a running sift (--server, or
    the server that owns the data directory)."""
    options = _fetch_options(args)
    server, key = args.server, args.key
    lock: DataDirLock | None = None
    if not server:
        settings = _settings(args)
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
        else:
            envelope = asyncio.run(_fetch_in_process(settings, args.url, options))
    finally:
        if lock is not None:
            lock.release()
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
    if envelope["status"] >= 400:
        print(f"sift: the upstream answered HTTP {envelope['status']}", file=sys.stderr)
        return EXIT_UPSTREAM_STATUS
    return 0


def _config_arg(args: argparse.Namespace) -> str | None:
    """The config file this command reads, as given (``--config`` or ``$SIFT_CONFIG``)."""
    from sift.config import config_path

    path = config_path(getattr(args, "config", None))
    return None if path is None else os.fspath(path)


def own_or_delegate(
    settings: Settings, command: str, args: argparse.Namespace
) -> DataDirLock | tuple[str, str]:
    """``datadir.own_or_delegate`` for a CLI command: the lock, or ``(url, key)`` of the
    server that owns the directory (said on standard error)."""
    got = datadir.own_or_delegate(settings.data_dir, command, config=_config_arg(args))
    if isinstance(got, DataDirLock):
        return got
    owner, url, key = got
    note = f"sift: {settings.data_dir} belongs to {owner.describe()}; going through it"
    print(note, file=sys.stderr)
    return url, key


def _keys_file(args: argparse.Namespace) -> str:
    from sift.config import config_path

    return os.fspath(config_path(args.config) or DEFAULT_CONFIG_FILE)


def _reload_note(path: str) -> str:
    """Tell the server using this config to reload its keys, and say what happened."""
    from sift.keys import notify_server

    owner = notify_server(path)
    if owner is None:
        return "a running sift serve picks this up on SIGHUP (kill -HUP <pid>) or restart"
    return f"{owner.describe()} reloads its keys now"


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


def collect_stats(db: DB, settings: Settings) -> dict[str, Any]:
    """What `sift stats` reports: cache size against budget, entries, hit rate, batch bytes."""
    stats = db.stats()
    counters = db.counters()
    hits, misses = counters.get("hit", 0), counters.get("miss", 0)
    revalidated = counters.get("revalidated", 0)
    served = hits + misses + revalidated
    return {
        "cache_bytes": stats["bytes"],
        "cache_max_bytes": settings.cache.max_bytes,
        "bodies": stats["bodies"],
        "pages": stats["pages"],
        "renders": stats["renders"],
        "robots": stats["robots"],
        "hits": hits,
        "misses": misses,
        "revalidated": revalidated,
        "hit_rate": round((hits + revalidated) / served, 4) if served else None,
        "batch_jobs": stats["batch_jobs"],
        "batch_bytes": stats["batch_bytes"],
        "batch_max_bytes": settings.batch.max_bytes,
        "browser_pages": counters.get("browser_pages", 0),
    }


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def cmd_stats(args: argparse.Namespace) -> int:
    from sift.dcache import DB

    settings = _settings(args)
    if not settings.db_path.exists():
        raise ConfigError(f"data_dir: {settings.data_dir}: no database yet; run `sift serve` first")
    lock = datadir.own(
        settings.data_dir,
        "stats",
        advice="a running server's live figures are at its GET /metrics",
    )
    try:
        db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
        try:
            st = collect_stats(db, settings)
        finally:
            db.close()
    finally:
        lock.release()
    if settings.store.url:  # batch jobs live in the shared store: report the cluster's
        from sift.batch.ops import cluster_stats

        st["cluster"] = cluster_stats(settings)
        st["batch_jobs"] = st["cluster"]["batch_jobs"]
        st["batch_bytes"] = st["cluster"]["batch_bytes"]
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    share = st["cache_bytes"] / st["cache_max_bytes"] * 100
    rate = "–" if st["hit_rate"] is None else f"{st['hit_rate'] * 100:.1f}%"
    print(
        f"cache     {_human(st['cache_bytes'])} of {_human(st['cache_max_bytes'])} ({share:.1f}%)"
    )
    print(
        f"entries   {st['pages']} pages, {st['bodies']} bodies, {st['renders']} renders, "
        f"{st['robots']} robots.txt"
    )
    print(
        f"requests  {st['hits']} hits, {st['misses']} misses, {st['revalidated']} revalidated; "
        f"hit rate {rate}"
    )
    print(
        f"batch     {st['batch_jobs']} jobs, {_human(st['batch_bytes'])} of "
        f"{_human(st['batch_max_bytes'])}"
    )
    if "cluster" in st:
        c = st["cluster"]
        print(
            f"cluster   {c['live_jobs']} live jobs, {c['pending_targets']} pending and "
            f"{c['running_targets']} running targets, {c['nodes_leasing']} nodes holding leases"
        )
    print(f"browser   {st['browser_pages']} pages loaded (see docs/browser.md)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sift", description="A web fetcher for programs.")
    parser.add_argument("--version", action="version", version=f"sift {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the HTTP service")
    add_settings_args(p)
    p.add_argument("--listen", metavar="HOST:PORT", help="bind address (default 127.0.0.1:8080)")
    p.set_defaults(func=cmd_serve)

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
    p.add_argument("--format", choices=["markdown", "text", "html", "raw"])
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
    p.add_argument("--json", action="store_true", help="print the whole envelope as JSON")
    add_server_args(p, "ask a running sift instead")
    p.set_defaults(func=cmd_fetch)

    add_batch_parser(sub)
    add_crawl_parsers(sub)
    add_mcp_parser(sub)

    p = sub.add_parser("stats", help="cache size, entries, hit rate, batch bytes")
    add_settings_args(p)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_stats)

    keys = sub.add_parser(
        "keys",
        help="manage caller keys",
        description="Keys live in the config file (--config, else $SIFT_CONFIG, else "
        f"./{DEFAULT_CONFIG_FILE}). A running sift serve reloads them on SIGHUP; add and "
        "remove send it for you when that server was started with the same config file.",
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
