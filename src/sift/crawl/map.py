"""``/v1/map``: the URLs of a site sift can find quickly, without fetching every page.

The start page is fetched through ``Service.fetch`` (cache, robots.txt, egress guard: its
errors are ``/v1/fetch``'s), its links read, and — with ``sitemap`` — the site's sitemaps
(robots.txt ``Sitemap:`` lines, ``/sitemap.xml``, through indexes). Every URL passes the
crawl's ``Frontier`` (scope, include/exclude, traps, egress policy, robots.txt). The answer
lists the start URL, then the sitemap URLs and the page's links, origin by origin (in the
order each origin first appears; a site's own URLs: sitemaps first, then links), each once,
at most ``limit``; judging stops at ``limit`` + 1.

Bounded in time, every step (issue 24): the whole request ends within the caller's class
``timeout_s``. Checking the start URL (its DNS) and fetching the start page must finish in
it, else the map fails like ``/v1/fetch`` does (``upstream_timeout``, or ``dns_failure``);
what comes after — reading sitemaps and links, admitting the URLs and checking them against
robots.txt (in worker processes, ``offloop``: each job stops at the deadline by itself),
resolving each new host and reading its robots.txt — stops at the deadline, and the answer
lists the URLs judged by then with ``complete: false`` (a map is a quick look: a partial list the
caller can use beats an error that throws the work away).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sift.crawl.crawler import Crawler, is_html
from sift.crawl.found import Found, merge
from sift.crawl.frontier import Frontier
from sift.crawl.offloop import OffLoop
from sift.crawl.spec import MapSpec
from sift.crawl.submit import check_start
from sift.errors import UpstreamTimeout
from sift.fetch import Target
from sift.options import parse_options
from sift.principal import Principal
from sift.service import Service


async def map_site(
    crawler: Crawler, service: Service, principal: Principal, spec: MapSpec
) -> dict[str, Any]:
    """``{"url", "urls", "count", "truncated", "complete"}`` for a validated ``spec``."""
    limits = service.settings.classes.get(principal.caller_class)
    policy = service.policy_for(principal, limits.timeout_s)
    deadline = asyncio.get_running_loop().time() + limits.timeout_s
    try:
        async with asyncio.timeout_at(deadline):
            start = await check_start(service, principal, spec.url)
            envelope = await service.fetch(principal, parse_options({"url": start.url}))
    except TimeoutError as exc:
        raise UpstreamTimeout(
            f"The map did not get its start page within {limits.timeout_s:g} s."
        ) from exc
    frontier = crawler.new_frontier(start, spec, policy)
    # The deadline on the clock worker processes read too (the loop's clock may differ).
    left_s = deadline - asyncio.get_running_loop().time()
    offloop = OffLoop(
        crawler.pool, principal.name, deadline=time.monotonic() + left_s, loop_deadline=deadline
    )
    urls: list[str] = [start.url]
    complete = True
    try:
        async with asyncio.timeout_at(deadline):
            found = await _discover(crawler, principal, spec, frontier, envelope, offloop)
            await frontier.permitted(
                found,
                service.fetcher,
                policy,
                service.robots_checker(principal),
                offloop,
                out=urls,
                max_urls=spec.limit + 1,  # one more says "truncated"
            )
    except TimeoutError:
        complete = False
    return {
        "url": start.url,
        "urls": urls[: spec.limit],
        "count": min(len(urls), spec.limit),
        "truncated": len(urls) > spec.limit,
        "complete": complete,
    }


async def _discover(
    crawler: Crawler,
    principal: Principal,
    spec: MapSpec,
    frontier: Frontier,
    envelope: dict[str, Any],
    offloop: OffLoop,
) -> Found:
    """Sitemap URLs (with ``sitemap``), then the start page's links, admitted."""
    found: Found = {}
    if spec.sitemap:
        merge(found, await crawler.sitemap_urls(frontier, principal, spec, offloop))
    if 200 <= int(envelope["status"]) < 300 and is_html(envelope["content_type"]):
        final: Target | None = frontier.normal(envelope["final_url"])
        if final is not None and frontier.scope.allows(final):
            merge(found, await crawler.page_links(envelope, final.url, frontier, offloop))
    return found
