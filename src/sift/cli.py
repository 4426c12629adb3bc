"""The ``sift`` command: ``serve``, ``keys add``, ``stats`` (more as features land).

Every command loads settings the same way (``--config``, ``SIFT_*``, ``--set KEY=VALUE``);
a ``SiftError`` prints its message and hint on one line each and exits non-zero — 2 for
bad configuration or usage — never with a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sift import __version__
from sift.batch.command import add_batch_parser
from sift.cliargs import add_server_args, add_settings_args
from sift.config import DEFAULT_CONFIG_FILE, Settings, load_settings
from sift.dcache import DB
from sift.errors import ConfigError, SiftError
from sift.fetch import Fetcher
from sift.mcp.command import add_mcp_parser
from sift.workers import RenderPool

EXIT_CONFIG = 2


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


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from sift.api.app import create_app
    from sift.dcache import DB

    settings = _settings(args)
    host, port = settings.listen_host_port
    if not settings.callers and not _is_loopback(host) and not settings.allow_anonymous_public:
        raise ConfigError(
            f"listen: {settings.listen}: no callers are configured, so every request would be "
            "anonymous; bind a loopback address, add a caller with `sift keys add`, or set "
            "allow_anonymous_public = true"
        )
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    app = create_app(settings, db, build_fetcher(settings), render_pool=render_pool(settings))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal with the
    # handler it found: make that handler a clean exit rather than death by signal.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        lifespan="on",
        log_level="info",
    )
    return 0


def render_pool(settings: Settings) -> RenderPool:
    """The process's render pool (not started): one worker per core unless configured.
    Rendering is CPU-bound: processes use every core and keep the event loop free."""
    workers = settings.render_workers or os.cpu_count() or 1
    return RenderPool(workers, memory_bytes=settings.render_memory_bytes)


def build_fetcher(settings: Settings) -> Fetcher:
    """The process's one fetcher, configured from settings (not started)."""
    host, port = settings.listen_host_port
    own = []
    with contextlib.suppress(ValueError):
        ip = ipaddress.ip_address(host)
        own.append(f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}")
    return Fetcher(
        user_agent=settings.user_agent,
        extra_public_cidrs=settings.egress.extra_public_cidrs,
        static_hosts=settings.egress.resolve,
        own_addresses=own,
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
    }
    return {k: v for k, v in options.items() if v is not None}


async def _fetch_in_process(settings: Settings, url: str, options: dict[str, Any]) -> Any:
    from sift.dcache import AsyncDB
    from sift.options import parse_options
    from sift.principal import OPERATOR
    from sift.service import Service

    opts = parse_options({"url": url, **options})
    adb = await AsyncDB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    try:
        pool = RenderPool(1, memory_bytes=settings.render_memory_bytes)
        try:
            async with build_fetcher(settings) as fetcher:
                service = Service(settings, adb, fetcher, render_pool=pool)
                try:
                    return await service.fetch(OPERATOR, opts)
                finally:
                    await service.close()
        finally:
            pool.close()
    finally:
        await adb.close()


def cmd_fetch(args: argparse.Namespace) -> int:
    """Fetch one URL in-process as the operator, or through a running sift (--server)."""
    options = _fetch_options(args)
    if args.server:
        from sift.client import Client

        with Client(args.server, args.key) as client:
            envelope = client.request("POST", "/v1/fetch", json={"url": args.url, **options})
    else:
        settings = _settings(args)
        Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
        envelope = asyncio.run(_fetch_in_process(settings, args.url, options))
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
    return 0


def cmd_keys_add(args: argparse.Namespace) -> int:
    from sift.keys import add_caller

    path = args.config or DEFAULT_CONFIG_FILE
    key = add_caller(path, args.name, args.caller_class)
    print(key)
    print(
        f"caller {args.name!r} ({args.caller_class}) added to {path}; the key is shown only once",
        file=sys.stderr,
    )
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
    db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    try:
        st = collect_stats(db, settings)
    finally:
        db.close()
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
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sift", description="A web fetcher for programs.")
    parser.add_argument("--version", action="version", version=f"sift {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the HTTP service")
    add_settings_args(p)
    p.add_argument("--listen", metavar="HOST:PORT", help="bind address (default 127.0.0.1:8080)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("fetch", help="fetch one URL and print its content")
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
    p.add_argument("--json", action="store_true", help="print the whole envelope as JSON")
    add_server_args(p, "ask a running sift instead")
    p.set_defaults(func=cmd_fetch)

    add_batch_parser(sub)
    add_mcp_parser(sub)

    p = sub.add_parser("stats", help="cache size, entries, hit rate, batch bytes")
    add_settings_args(p)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_stats)

    keys = sub.add_parser("keys", help="manage caller keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    p = keys_sub.add_parser("add", help="issue a key for a new caller; prints it once")
    p.add_argument("name")
    p.add_argument("--class", dest="caller_class", choices=["fleet", "restricted"], required=True)
    p.add_argument(
        "--config", metavar="FILE", help=f"file to append to (default ./{DEFAULT_CONFIG_FILE})"
    )
    p.set_defaults(func=cmd_keys_add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except ConfigError as exc:
        print(f"sift: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    except SiftError as exc:
        print(f"sift: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
