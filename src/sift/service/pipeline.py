"""The fetch pipeline shared by every front end: validate → cache → fetch → render → cap.

``Service.fetch(principal, options)`` is the one entry point. It never reads settings
globally and never touches HTTP routes; the API, the CLI and the batch runner all call it.
``Service`` holds one object per stage and runs them in order; each stage is a module:

1. ``validate.py`` — the URL and options against the caller's class, before any I/O;
2. ``cache.py`` — page entries and rendered snapshots: looked up, revalidated, stored;
3. ``upstream.py`` — the page from upstream, over HTTP or in the browser (engine choice,
   robots.txt);
4. ``render.py`` — a page entry becomes its rendered snapshot, through the render pool;
5. ``envelope.py`` — the caller's slice of the snapshot, capped, in the result envelope.

Fetches and renders are shared between concurrent callers (``flight.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sift.browser import Browser
from sift.changes.track import max_age_for
from sift.config import CALLER_CLASSES, Settings
from sift.dcache import DB, AsyncDB, PageEntry, StoredShot
from sift.errors import BrowserTimeout, SiftError, SnapshotGone, TooLarge, UpstreamTimeout
from sift.fetch import Fetcher, FetchPolicy, RobotsChecker
from sift.jsonio import dumps
from sift.metrics import Metrics
from sift.options import Engine, FetchOptions
from sift.principal import Principal
from sift.render import RenderOptions
from sift.service.cache import (
    CacheState,
    Memo,
    PageCache,
    ResponseCache,
    is_fresh,
    memo_for,
    page_key_for,
    render_key_for,
)
from sift.service.changes import ChangeTracker, Tracking
from sift.service.counters import Counters
from sift.service.envelope import envelope
from sift.service.flight import Flights
from sift.service.hotcache import BytesLRU
from sift.service.inflight import InflightLimiter
from sift.service.render import Renderer
from sift.service.upstream import Loader, Upstream, shot_order
from sift.service.validate import Request, Validator
from sift.snapshot import Snapshot
from sift.store.history import HistoryStore
from sift.store.sqlite.historystore import SqliteHistory
from sift.workers import RenderPool


class Service:
    """One per process. ``render_pool`` renders off the event loop, under time and memory
    limits; only small plain text is rendered in place (``snapshot.renders_inline``)."""

    def __init__(
        self,
        settings: Settings,
        adb: AsyncDB,
        fetcher: Fetcher,
        *,
        render_pool: RenderPool,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        browser: Browser | None = None,
        history: HistoryStore | None = None,
    ) -> None:
        self.settings = settings
        self.browser = browser  # None or absent: engine "browser" fails, "auto" stays HTTP
        self.adb = adb
        self.fetcher = fetcher
        self.metrics = metrics or Metrics()
        self._clock = clock
        self.render_pool = render_pool
        self._counters = Counters(adb)
        self._flights = Flights()
        # Keys the private tags of pages fetched with a caller's headers or cookies
        # (Credentials.tag): drawn per process, so a stored key reveals nothing.
        self._private_key = secrets.token_bytes(32)
        self._validator = Validator(settings, fetcher)
        self._cache = PageCache(adb, settings.cache.hot_bytes)
        self._responses = ResponseCache(self._cache.hot, settings.cache.hot_bytes // 4, clock)
        self._upstream = Upstream(
            settings,
            adb,
            fetcher,
            browser=browser,
            metrics=self.metrics,
            clock=clock,
            policy_for=self._validator.policy_for,
            count=self._counters.count,
        )
        self._renderer = Renderer(render_pool, self._cache, self._flights)
        # changes=true (service/changes.py). Default: the node's own SQLite history, unless
        # the history lives in PostgreSQL (store.url), which the assembly hands in.
        if history is None and not settings.store.url:
            history = SqliteHistory(adb)
        self.changes = ChangeTracker(history, settings.history, render_pool)
        # HTML bodies fetched just now, by digest: a crawl reads a page's links right after
        # its fetch (crawl/crawler.py), without a database round trip.
        self.recent_bodies: BytesLRU[str, bytes] = BytesLRU(
            max_bytes=settings.cache.hot_bytes // 8, size=len
        )
        # Per-caller fairness for the interactive front ends (/v1/fetch, MCP fetch).
        self.inflight = InflightLimiter(
            {c: settings.classes.get(c).max_inflight for c in CALLER_CLASSES}
        )
        # Bound once: a labelled child lookup per request is measurable on the hot path.
        self._cache_counters = {
            state: self.metrics.cache.labels(state) for state in ("hit", "miss", "revalidated")
        }

    def policy_for(self, principal: Principal, timeout_s: float) -> FetchPolicy:
        """The fetch policy of a caller's class, with this request's deadline (memoized)."""
        return self._validator.policy_for(principal, timeout_s)

    def robots_checker(self, principal: Principal) -> RobotsChecker:
        """One long-lived checker per egress scope, so parsed rules are reused (the batch
        runner asks it for Crawl-delay)."""
        return self._upstream.robots_checker(principal)

    async def counter_totals(self) -> dict[str, int]:
        """The persistent counters (``sift stats``) as of now, pending ones included."""
        return await self._counters.totals()

    async def screenshot(self, principal: Principal, digest: str) -> StoredShot | None:
        """A screenshot a fetch result gave ``principal`` (``dcache/shots.py``), while the
        content cache keeps it; None otherwise, whoever else holds it."""
        return await self.adb.run(DB.get_shot, digest, principal.name, int(self._clock()))

    async def close(self) -> None:
        """Write the counters still pending. Call before closing the database."""
        await self._counters.close()

    # -- the pipeline ---------------------------------------------------------------------

    async def fetch(self, principal: Principal, options: FetchOptions) -> dict[str, Any]:
        """Run one fetch and return the result envelope (DESIGN.md). Raises ``SiftError``."""
        try:
            result, _ = await self._fetch(principal, options)
        except SiftError as exc:
            self.metrics.errors.labels(exc.code).inc()
            raise
        return result

    async def fetch_json(self, principal: Principal, options: FetchOptions) -> tuple[bytes, str]:
        """``fetch`` serialized, and its cache state.

        A response cache for the hot path: an identical request (same caller, same options)
        repeated while the page it was served from is still the fresh entry in the
        in-process cache gets the very bytes served last time, without running the
        pipeline again. Only cache hits are remembered, so the bytes always say "hit".
        """
        key = (principal, options)
        # A changes answer depends on the caller's history, never on the page alone: it is
        # never remembered (see _fetch), so never found here either.
        body = self.cached_json(principal, options)
        if body is not None:
            return body, "hit"
        try:
            result, valid = await self._fetch(principal, options)
        except SiftError as exc:
            self.metrics.errors.labels(exc.code).inc()
            raise
        body = dumps(result)
        if valid is not None:
            self._responses.put(key, valid, body)
        return body, result["cache"]

    def cached_json(self, principal: Principal, options: FetchOptions) -> bytes | None:
        """The bytes ``fetch_json`` would answer from its response cache (counted as a
        hit), or None; synchronous, so a front end can serve a hit before it sets up
        anything a longer fetch needs."""
        body = self._responses.get((principal, options))
        if body is not None:
            self._cache_counters["hit"].inc()
            self._counters.count("hit")
        return body

    async def _fetch(
        self, principal: Principal, options: FetchOptions
    ) -> tuple[dict[str, Any], Memo | None]:
        """The pipeline. Also returns, for a cache hit, what keeps its response valid."""
        req = self._validator.request(principal, options)  # 1. validate
        opts = req.opts
        engine = self._upstream.engine_for(opts)
        extra: tuple[str, ...] = ()
        # The request's deadline: a render still waiting for a worker then is dropped.
        deadline = asyncio.get_running_loop().time() + req.eff.timeout_s
        tracking = await self.changes.start(req) if opts.changes else None
        try:  # 2-4. cache, fetch, render: the snapshot this engine serves
            snap, state, memo = await self._snapshot(req, engine, deadline, tracking)
        except SnapshotGone:
            if opts.engine != "auto":
                raise
            engine = "browser"  # auto's continuation may point into a browser snapshot
            snap, state, memo = await self._snapshot(req, engine, deadline, tracking)
        use_browser, why = self._upstream.auto_choice(opts, req.limits, engine, snap)
        if use_browser:
            # The page's text needs JavaScript: render what the browser builds instead.
            # Should the browser fail, the HTTP snapshot (fetched under the same guard)
            # is still the answer, with a warning.
            try:
                snap, state, memo = await self._snapshot(req, "browser", deadline, tracking)
                engine, extra = "browser", (*extra, *why)
            except SiftError as exc:
                self.metrics.errors.labels(exc.code).inc()
                extra, memo = (*extra, "browser_failed"), None
        else:
            extra = (*extra, *why)
        if opts.screenshot is not None and opts.digest is None:
            snap, state = await self._granted(req, deadline, snap, state)
            memo = None  # never from the response cache: each answer grants the image
        self._cache_counters[state].inc()
        self._counters.count(state)
        # 5. cap: the caller's slice, in the envelope
        env = envelope(snap, opts, req.eff, state, req.limits.max_links, engine, extra)
        if tracking is not None:  # changes=true: compared, recorded, never remembered
            env["change"] = await self.changes.finish(
                tracking, req, snap, self._text_for(req, snap, engine, deadline), deadline
            )
            memo = None
        return env, memo

    async def _granted(
        self, req: Request, deadline: float, snap: Snapshot, state: CacheState
    ) -> tuple[Snapshot, CacheState]:
        """A result with a screenshot is given to this caller: grant it the image (the
        screenshot route serves it to callers holding a grant only). A cached page whose
        image the byte budget has evicted since is loaded again, once."""
        for again in (True, False):
            shot = snap.screenshot
            now = int(self._clock())
            if shot is not None and await self.adb.run(
                DB.grant_shot, shot["digest"], req.principal.name, now
            ):
                return snap, state
            if again:
                fresh = req._replace(opts=dataclasses.replace(req.opts, max_age_s=0))
                snap, state, _ = await self._snapshot(fresh, "browser", deadline)
        raise TooLarge(
            "The screenshot was evicted as soon as it was stored: the content cache "
            "(cache.max_bytes) is too small to keep it.",
            hint="Ask for a smaller screenshot, or ask the operator for a larger cache.",
        )

    def _text_for(
        self, req: Request, snap: Snapshot, engine: Engine, deadline: float
    ) -> Callable[[RenderOptions], Awaitable[str]]:
        """The markdown ``changes`` compares: ``snap``'s own content when ``ropts`` is the
        render served, else the render of the same body digest with ``ropts``."""

        async def text_for(ropts: RenderOptions) -> str:
            if ropts == req.ropts:
                return snap.rendered.content
            key = self._page_key(req, engine)
            other = await self._renderer.snapshot_at(
                key,
                snap.digest,
                ropts,
                render_key_for(ropts, key),
                int(self._clock()),
                caller=req.principal.name,
                deadline=deadline,
            )
            return other.rendered.content

        return text_for

    def _page_key(self, req: Request, engine: Engine) -> str:
        opts = req.opts
        private = ""
        if opts.headers or opts.cookies:  # a private page: this caller's, these values'
            private = opts.credentials.tag(self._private_key, _identity(req.principal))
        shot = shot_order(opts, req.limits) if engine == "browser" else None
        return page_key_for(req.target.url, opts, req.policy, engine, private, shot)

    async def _snapshot(
        self, req: Request, engine: Engine, deadline: float, tracking: Tracking | None = None
    ) -> tuple[Snapshot, CacheState, Memo | None]:
        """The snapshot one engine serves for this request (cache, fetch or load, render)."""
        opts = req.opts
        key = self._page_key(req, engine)
        rkey = render_key_for(req.ropts, key)
        now = int(self._clock())
        if opts.digest is not None:
            snap = await self._renderer.snapshot_at(
                key, opts.digest, req.ropts, rkey, now, caller=req.principal.name, deadline=deadline
            )
            return snap, "hit", None
        max_age_s = (
            opts.max_age_s if opts.max_age_s is not None else self.settings.cache.default_max_age_s
        )
        if tracking is not None:  # never a cached copy older than the last snapshot
            max_age_s = max_age_for(max_age_s, tracking.latest, now)
        robots = self._upstream.robots_checker(req.principal) if opts.robots else None
        # The shared fetch runs with the class deadline; this caller's timeout_s bounds only
        # its own wait (see _current_snapshot).
        shared = self.policy_for(req.principal, req.limits.timeout_s)
        load = self._upstream.loader(req.principal, opts, engine)
        snap, state = await self._current_snapshot(
            req, shared, robots, key, rkey, max_age_s, now, deadline, load
        )
        return snap, state, memo_for(self._cache, key, snap, max_age_s, state)

    async def _current_snapshot(
        self,
        req: Request,
        policy: FetchPolicy,
        robots: RobotsChecker | None,
        page_key: str,
        render_key: str,
        max_age_s: int,
        now: int,
        deadline: float,
        load: Loader | None = None,
    ) -> tuple[Snapshot, CacheState]:
        """The page's snapshot, from the cache or one shared fetch under ``policy``.

        Single flight: concurrent misses with the same page key *and* the same policy share
        one fetch (the page key carries the egress scope; the policy adds the deadline), so
        no joiner gets a page fetched under rules it does not have. Each waiter gives up
        after its own ``wait_s`` (``upstream_timeout``) while the fetch runs on for the
        others and the cache: a caller with a tiny timeout cannot fail anyone else's fetch.
        A fetch nobody waits for any more is cancelled, so giving up early never leaves
        work running in the background (a caller looping with tiny timeouts over slow URLs
        would otherwise pile up fetches beyond its in-flight cap).
        """
        caller = req.principal.name
        page = await self._cache.page(page_key, now)  # 2. cache
        if page is not None and is_fresh(page, now, max_age_s):
            snap = await self._renderer.snapshot(
                page, req.ropts, render_key, now, None, caller=caller, deadline=deadline
            )
            if snap is not None:
                self._cache.keep_page(page_key, page)
                return snap, "hit"
        wait_s = req.eff.timeout_s
        try:  # 3. fetch, shared
            async with asyncio.timeout(wait_s):
                fresh, body, state, new_body = await self._flights.once(
                    ("fetch", page_key, max_age_s > 0, policy),
                    lambda: self._refresh(page_key, req.opts, policy, robots, page, now, load),
                    cancel_abandoned=True,
                )
        except TimeoutError as exc:
            if load is not None:  # a browser load: the caller learns which engine was slow
                raise BrowserTimeout(f"The page did not load within {wait_s:g} s.") from exc
            raise UpstreamTimeout(f"The fetch did not finish within {wait_s:g} s.") from exc
        snap = await self._renderer.snapshot(  # 4. render, in the caller's turn
            fresh, req.ropts, render_key, now, body, new_body, caller=caller, deadline=deadline
        )
        assert snap is not None  # the body was passed in, so rendering cannot miss it
        return snap, state

    async def _refresh(
        self,
        page_key: str,
        opts: FetchOptions,
        policy: FetchPolicy,
        robots: RobotsChecker | None,
        stale: PageEntry | None,
        now: int,
        load: Loader | None = None,
    ) -> tuple[PageEntry, bytes, CacheState, bool]:
        """Fetch (conditionally, when a stale entry has validators) and store the page.

        Also says whether the body is new to the cache (then no render of it exists).
        With ``load`` (the browser), the page is loaded whole, never conditionally."""
        if load is not None:
            loaded = await load(opts.url, policy, robots)
            page, new_body = await self._cache.store(page_key, loaded.result, now, loaded.shot)
            return page, loaded.result.body, "miss", new_body
        creds = opts.credentials if opts.headers or opts.cookies else None
        result = await self._upstream.fetch(opts.url, policy, stale, robots, creds)
        if result.not_modified and stale is not None:
            # Shielded, like the store below: a flight cancelled once nobody waits (see
            # _current_snapshot) must not leave the database and the hot cache apart.
            revalidated = await asyncio.shield(self._cache.revalidate(page_key, stale, now))
            if revalidated is not None:
                page, body = revalidated
                return page, body, "revalidated", False
            # The body was evicted between lookup and revalidation: fetch it whole.
            result = await self._upstream.fetch_whole(opts.url, policy, robots, creds)
        page, new_body = await asyncio.shield(self._cache.store(page_key, result, now))
        if "html" in result.content_type:
            self.recent_bodies.put(page.digest, result.body)
        return page, result.body, "miss", new_body


def _identity(principal: Principal) -> str:
    """Who a private page belongs to (``Credentials.tag``)."""
    return f"{principal.caller_class}:{principal.name}"
