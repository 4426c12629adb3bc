"""What a crawl does with a fetched page: grow the job by the page's new links.

The batch runner calls ``after_page`` (through ``crawl.hook.CrawlHook``, the hook the crawl
registers for its job kind) for every successful fetch of a crawl target, whatever its work
source, after the fetch slot is given back and before the outcome is written: the job can
then never look finished while links of a fetched page are still to be appended, and
discovery never holds a fetch slot (it must not starve them).

``after_page``:

1. The final URL after redirects must be in scope too: a redirect off scope is recorded
   (warning ``redirected_off_scope`` in the stored envelope) and its links are not followed.
   An in-scope final URL is marked seen, so a page reached by a redirect is not fetched a
   second time under its own URL.
2. Below ``max_depth``, the links of an HTML page (``links.page_links``) and, for the start
   page with ``sitemap``, the site's sitemaps: parsed and admitted in a worker process
   (``offloop``: CPU work, in the caller's turn at the workers the renders use).
3. Each admitted URL through the ``Frontier``'s per-origin checks (addresses, robots.txt);
   the survivors are appended in one store operation (``append_crawl_targets``), which
   skips those already seen and stops at ``max_pages``.

The body is the one the service just fetched (``Service.recent_bodies``, bounded), else read
from the content cache by the envelope's digest; a page the cache has already evicted again
yields no links, and a warning in the log.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from sift.crawl import sitemap
from sift.crawl.found import Found, merge
from sift.crawl.frontier import Frontier
from sift.crawl.offloop import OffLoop
from sift.crawl.spec import ORIGIN_ONLY_OPTIONS, CrawlSpec
from sift.dcache import DB
from sift.errors import SiftError
from sift.fetch import RobotsChecker, validate_url
from sift.jsonio import loads
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchStore

if TYPE_CHECKING:
    from sift.workers import RenderPool

log = logging.getLogger("sift.crawl")

MAX_LINKS_PER_PAGE: Final = 5000
HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml"})
OFF_SCOPE_WARNING: Final = "redirected_off_scope"
# Crawl jobs whose frontiers (and parameters, in the hook) are kept in memory.
MAX_REMEMBERED_JOBS: Final = 1024
# URLs known to be in a crawl's seen-set, over all crawls: a page's links to pages already
# enqueued (its site's navigation, mostly) then cost no store round trip. Only a shortcut:
# the seen-set in the store decides; this memory is bounded whatever the crawls' sizes.
MAX_REMEMBERED_SEEN: Final = 50_000


def is_html(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


class Crawler:
    """One per runner. Holds each live crawl's frontier (parameters, compiled globs, hosts
    judged) and which crawls are full; the seen-set itself lives in the store.

    ``pool``: the worker processes the CPU work goes to (``offloop``); by default the
    service's render pool, which the assembly built and handed it."""

    def __init__(
        self,
        store: BatchStore,
        service: Service,
        clock: Callable[[], float] = time.time,
        *,
        pool: RenderPool | None = None,
    ) -> None:
        self._store = store
        self._service = service
        self._clock = clock
        self.pool = pool if pool is not None else service.render_pool
        self._frontiers: OrderedDict[tuple[str, str], Frontier] = OrderedDict()
        self._full: OrderedDict[str, None] = OrderedDict()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()

    @staticmethod
    def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        cache[key] = value
        if len(cache) > MAX_REMEMBERED_JOBS:
            cache.popitem(last=False)

    def frontier(self, job_id: str, spec: CrawlSpec, principal: Principal) -> Frontier:
        key = (job_id, principal.name)
        f = self._frontiers.get(key)
        if f is None:
            f = self.new_frontier(validate_url(spec.url), spec, self._policy(principal))
            self._remember(self._frontiers, key, f)
        return f

    def new_frontier(self, start: Any, spec: Any, policy: Any) -> Frontier:
        """A frontier from ``start`` (a ``Target``) and a crawl's or map's parameters."""
        fetcher = self._service.fetcher
        return Frontier(
            start,
            spec.scope,
            tuple(spec.include),
            tuple(spec.exclude),
            policy,
            lambda url: fetcher.check_url(url, policy),
        )

    def offloop(self, principal: Principal) -> OffLoop:
        """A crawl page's CPU work, for ``principal`` (each job under its own time limit)."""
        return OffLoop(self.pool, principal.name)

    def _policy(self, principal: Principal) -> Any:
        limits = self._service.settings.classes.get(principal.caller_class)
        return self._service.policy_for(principal, limits.timeout_s)

    def _robots(self, principal: Principal, spec: CrawlSpec) -> RobotsChecker | None:
        if spec.options.get("robots") is False:
            return None
        return self._service.robots_checker(principal)

    async def after_page(
        self,
        job_id: str,
        spec: CrawlSpec,
        principal: Principal,
        idx: int,
        depth: int,
        url: str,
        envelope: dict[str, Any],
    ) -> int:
        """Discover from one fetched page and append what is new; the number appended.
        May add the off-scope warning to ``envelope`` (it is stored after)."""
        frontier = self.frontier(job_id, spec, principal)
        final_url = str(envelope.get("final_url") or url)
        if final_url != url:  # redirected (a target's own URL was in scope when enqueued)
            final = frontier.normal(final_url)
            if final is None or not frontier.scope.allows(final):
                warnings = envelope.setdefault("warnings", [])
                if isinstance(warnings, list):
                    warnings.append(OFF_SCOPE_WARNING)
                return 0
            final_url = final.url
        if job_id in self._full or depth >= spec.max_depth:
            return 0
        offloop = self.offloop(principal)
        found: Found = {}
        if 200 <= int(envelope.get("status", 0)) < 300 and is_html(
            str(envelope.get("content_type", ""))
        ):
            merge(found, await self.page_links(envelope, final_url, frontier, offloop))
        if idx == 0 and spec.sitemap:
            merge(found, await self.sitemap_urls(frontier, principal, spec, offloop))
        permitted = await frontier.permitted(
            found,
            self._service.fetcher,
            self._policy(principal),
            self._robots(principal, spec),
            offloop,
        )
        urls = [u for u in permitted if (job_id, u) not in self._seen]
        seen = [final_url] if final_url != url and (job_id, final_url) not in self._seen else []
        if not urls and not seen:
            return 0
        added, total = await self._append(job_id, spec, urls, depth, idx, seen)
        if total >= spec.max_pages:
            self._remember(self._full, job_id, None)
        else:  # every URL sent is in the seen-set now (only a full job stops short)
            for u in (*urls, *seen):
                self._seen[(job_id, u)] = None
            while len(self._seen) > MAX_REMEMBERED_SEEN:
                self._seen.popitem(last=False)
        return added

    async def _append(
        self, job_id: str, spec: CrawlSpec, urls: list[str], depth: int, idx: int, seen: list[str]
    ) -> tuple[int, int]:
        """Append ``urls`` as targets (``append_crawl_targets``): ``(added, total)``. With
        the caller's headers or cookies, the URLs off the start origin go in a second step
        whose options leave them out (``CrawlSpec.options_json``)."""
        groups = [(spec.options_json(), urls)]
        if any(k in spec.options for k in ORIGIN_ONLY_OPTIONS):
            mine = [u for u in urls if spec.on_start_origin(u)]
            others = [u for u in urls if not spec.on_start_origin(u)]
            groups = [(spec.options_json(), mine)] if mine or not others else []
            if others:
                groups.append((spec.options_json(others[0]), others))
        added = total = 0
        for i, (options, group) in enumerate(groups):
            more, total = await self._store.append_crawl_targets(
                job_id,
                group,
                options=options,
                depth=depth + 1,
                parent=idx,
                max_total=spec.max_pages,
                now=int(self._clock()),
                seen=seen if i == 0 else (),
            )
            added += more
        return added, total

    async def page_links(
        self, envelope: dict[str, Any], page_url: str, frontier: Frontier, offloop: OffLoop
    ) -> Found:
        """The admitted links of a fetched HTML page (its body read from the cache)."""
        digest = envelope.get("digest")
        if not isinstance(digest, str):
            return {}
        body = self._service.recent_bodies.get(digest)
        if body is None:
            body = await self._service.adb.run(DB.get_body, digest, int(self._clock()))
        if body is None:
            log.warning("crawl: the body of %s left the cache before its links were read", page_url)
            return {}
        return await offloop.links(body, page_url, MAX_LINKS_PER_PAGE, frontier.admission)

    async def sitemap_urls(
        self, frontier: Frontier, principal: Principal, spec_like: Any, offloop: OffLoop
    ) -> Found:
        """The admitted page URLs of the start host's sitemaps: robots.txt ``Sitemap:`` lines
        (when robots.txt is obeyed) and ``/sitemap.xml``, through sitemap indexes (each
        document parsed and admitted in a worker, by ``offloop``)."""
        start = validate_url(spec_like.url)
        policy = self._policy(principal)
        robots = (
            self._service.robots_checker(principal)
            if getattr(spec_like, "options", {}).get("robots") is not False
            else None
        )
        roots: list[str] = []
        if robots is not None:
            try:
                rules = await robots.rules(start.origin)
                if rules.parser is not None:
                    roots += [str(s) for s in rules.parser.sitemaps]
            except SiftError:
                pass
        roots.append(start.origin + "/sitemap.xml")
        fetcher = self._service.fetcher

        def follow(url: str) -> bool:
            t = frontier.normal(url)
            return t is not None and frontier.scope.allows_host(t)

        async def fetch(url: str) -> bytes | None:
            if not follow(url):
                return None
            try:
                result = await fetcher.fetch(url, policy, robots=robots, allow_truncation=True)
            except SiftError:
                return None
            return result.body if 200 <= result.status < 300 else None

        async def parse(
            body: bytes, max_entries: int, max_sitemaps: int
        ) -> tuple[Found, int, list[str]]:
            return await offloop.sitemap(
                body, policy.max_download_bytes, max_entries, max_sitemaps, frontier.admission
            )

        return await sitemap.collect(fetch, parse, roots)


def options_of(target_options: str) -> dict[str, Any]:
    """A stored target's options JSON as a dict."""
    value = loads(target_options)
    return value if isinstance(value, dict) else {}
