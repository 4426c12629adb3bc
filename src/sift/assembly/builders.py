"""The single parts of a running sift, built from settings and not started."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from sift.config import Settings

if TYPE_CHECKING:
    from sift.browser import Browser
    from sift.fetch import Fetcher, Resolver
    from sift.metrics import Metrics
    from sift.workers import RenderPool


def build_fetcher(settings: Settings, *, resolver: Resolver | None = None) -> Fetcher:
    """The process's one fetcher, configured from settings (not started). Its own listen
    address is refused as a target. ``resolver``: the names not in ``egress.resolve``
    (default the system's; tests pass one that knows no name)."""
    from sift.fetch import DnsLimits, Fetcher
    from sift.fetch.egress import listen_addresses

    host, port = settings.listen_host_port
    return Fetcher(
        user_agent=settings.user_agent,
        resolver=resolver,
        extra_public_cidrs=settings.egress.extra_public_cidrs,
        static_hosts=settings.egress.resolve,
        dns=DnsLimits(
            timeout_s=settings.egress.dns_timeout_s,
            lookups_per_caller=settings.egress.dns_lookups_per_caller,
            negative_ttl_s=settings.egress.dns_negative_ttl_s,
            negative_max_entries=settings.egress.dns_negative_max_entries,
            servers=settings.egress.dns_servers,
        ),
        own_addresses=[*listen_addresses(host, port), *settings.egress.own_addresses],
    )


def build_render_pool(settings: Settings, workers: int | None = None) -> RenderPool:
    """A render pool (not started): ``workers``, else ``render_workers``, else one per core,
    with the turns kept for callers with nothing rendering (``render_reserved_workers``), the
    spare workers (``render_spare_workers``) and their priority (``render_worker_nice``).
    Rendering (and the crawl's CPU work) is CPU-bound: processes use every
    core and keep the event loop free."""
    from sift.workers import RenderPool

    count = workers or settings.render_workers or os.cpu_count() or 1
    return RenderPool(
        count,
        memory_bytes=settings.render_memory_bytes,
        nice=settings.render_worker_nice,
        spare=settings.render_spare_workers,
        reserved=settings.render_reserved_workers,
    )


def build_browser(
    settings: Settings, fetcher: Fetcher, *, metrics: Metrics | None = None
) -> Browser:
    """The guarded headless browser over ``fetcher``; Chromium is launched on the first page
    that needs it (absent when Chromium is not installed)."""
    from sift.browser import Browser
    from sift.browser.launcher import absent_reason
    from sift.errors import BROWSER_INSTALL_HINT

    reason = absent_reason(settings.browser)
    if reason is not None and settings.browser.enabled:  # one line at start, saying how
        logging.getLogger("sift.browser").warning(
            "browser absent: %s; engine auto stays on HTTP (warning browser_unavailable). %s",
            reason,
            BROWSER_INSTALL_HINT,
        )
    return Browser(settings.browser, fetcher, metrics=metrics)
