"""``sift stats``: the cache's size against its budget, entries, hit rate, batch bytes
(and, on a shared PostgreSQL store, the cluster's jobs and leases)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from sift import datadir
from sift.assembly import own_or_delegate, settings_for
from sift.cli.args import add_settings_args
from sift.errors import ConfigError

if TYPE_CHECKING:
    from sift.config import Settings
    from sift.dcache import DB


def add_stats_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("stats", help="cache size, entries, hit rate, batch bytes")
    add_settings_args(p)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_stats)


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
        "browser": _browser_state(settings),
    }


def _browser_state(settings: Settings) -> dict[str, str | None]:
    """Whether this node's settings find a browser to run (what /healthz calls ``absent``
    or ``ready``; ``broken`` is known only to a running server), and if not, why."""
    from sift.browser.launcher import absent_reason

    reason = absent_reason(settings.browser)
    return {"state": "absent" if reason else "ready", "absent_reason": reason}


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _from_server(url: str, key: str, settings: Settings) -> dict[str, Any]:
    """The same figures from the server that owns the data directory (``GET /v1/stats``)."""
    from sift.client import Client

    with Client(url, key) as client:
        body = client.request("GET", "/v1/stats")
    cache, batch, totals = body["cache"], body["batch"], body["cache"]["totals"]
    served = sum(totals.values())
    hit_rate = round((totals["hit"] + totals["revalidated"]) / served, 4) if served else None
    absent = body["browser"] == "absent"
    return {
        "cache_bytes": cache["bytes"],
        "cache_max_bytes": cache["max_bytes"],
        **{name: cache[name] for name in ("bodies", "pages", "renders", "robots")},
        "hits": totals["hit"],
        "misses": totals["miss"],
        "revalidated": totals["revalidated"],
        "hit_rate": hit_rate,
        "batch_jobs": batch["jobs"],
        "batch_bytes": batch["bytes"],
        "batch_max_bytes": batch["max_bytes"],
        "browser_pages": body["browser_pages"],
        "browser": {
            "state": body["browser"],
            "absent_reason": _browser_state(settings)["absent_reason"] if absent else None,
        },
    }


def _from_database(settings: Settings, lock: datadir.DataDirLock) -> dict[str, Any]:
    from sift.dcache import DB

    try:
        db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
        try:
            return collect_stats(db, settings)
        finally:
            db.close()
    finally:
        lock.release()


def cmd_stats(args: argparse.Namespace) -> int:
    """The figures from the database, or from the server that owns it (said on stderr)."""
    settings = settings_for(args)
    if not settings.db_path.exists():
        raise ConfigError(f"data_dir: {settings.data_dir}: no database yet; run `sift serve` first")
    got = own_or_delegate(settings, "stats", args)
    st = _from_server(*got, settings) if isinstance(got, tuple) else _from_database(settings, got)
    if settings.store.url:  # batch jobs live in the shared store: report the cluster's
        from sift.batch.ops import cluster_stats

        st["cluster"] = cluster_stats(settings)
        st["batch_jobs"] = st["cluster"]["batch_jobs"]
        st["batch_bytes"] = st["cluster"]["batch_bytes"]
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    _print_stats(st)
    return 0


def _print_stats(st: dict[str, Any]) -> None:
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
    browser = st["browser"]
    state = browser["state"] + (f": {browser['absent_reason']}" if browser["absent_reason"] else "")
    print(f"browser   {state}; {st['browser_pages']} pages loaded (see docs/browser.md)")
