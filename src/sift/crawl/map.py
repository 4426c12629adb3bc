"""``/v1/map``: the URLs of a site sift can find quickly, without fetching every page.

The start page is fetched through ``Service.fetch`` (cache, robots.txt, egress guard: its
errors are ``/v1/fetch``'s), its links read, and — with ``sitemap`` — the site's sitemaps
(robots.txt ``Sitemap:`` lines, ``/sitemap.xml``, through indexes). Every URL passes the
crawl's ``Frontier`` (scope, include/exclude, traps, egress policy, robots.txt). The answer
lists the start URL, then sitemap URLs, then the page's links, each once, at most ``limit``.

Bounded in time: discovery after the start page stops at the caller's class ``timeout_s``,
and the answer says ``complete: false`` when it did.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sift.crawl.crawler import Crawler, is_html
from sift.crawl.frontier import Frontier
from sift.crawl.spec import MapSpec
from sift.crawl.submit import check_start
from sift.fetch import Target
from sift.options import parse_options
from sift.principal import Principal
from sift.service import Service


async def map_site(
    crawler: Crawler, service: Service, principal: Principal, spec: MapSpec
) -> dict[str, Any]:
    """``{"url", "urls", "count", "truncated", "complete"}`` for a validated ``spec``."""
    start = await check_start(service, principal, spec.url)
    limits = service.settings.classes.get(principal.caller_class)
    policy = service.policy_for(principal, limits.timeout_s)
    envelope = await service.fetch(principal, parse_options({"url": start.url}))
    frontier = Frontier(
        start,
        spec.scope,
        spec.include,
        spec.exclude,
        lambda url: service.fetcher.check_url(url, policy),
    )
    found: list[str] = []
    complete = True
    try:
        async with asyncio.timeout(limits.timeout_s):
            if spec.sitemap:
                found += await crawler.sitemap_urls(frontier, principal, spec)
            if 200 <= int(envelope["status"]) < 300 and is_html(envelope["content_type"]):
                final = frontier.normal(envelope["final_url"])
                if final is not None and frontier.scope.allows(final):
                    found += await crawler.page_links(envelope, final.url)
    except TimeoutError:
        complete = False
    admitted: dict[str, Target] = {start.url: start}
    for u in found:
        t = frontier.admit(u)
        if t is not None and t.url not in admitted:
            admitted[t.url] = t
    urls = await frontier.permitted(
        admitted.values(), service.fetcher, policy, service.robots_checker(principal)
    )
    return {
        "url": start.url,
        "urls": urls[: spec.limit],
        "count": min(len(urls), spec.limit),
        "truncated": len(urls) > spec.limit,
        "complete": complete,
    }
