"""The fetch pipeline shared by every front end: validate → cache → fetch → render → cap.

``Service.fetch(principal, options)`` is the one entry point. It never reads settings
globally and never touches HTTP routes; the API, the CLI and the batch runner all call it.

Caching has two levels. The SQLite content cache (``dcache``) holds raw bodies
(content-addressed), page entries (per normalised URL and egress scope) and rendered
snapshots (per body digest and render options). In front of it, a small in-process LRU of
page entries and rendered snapshots keeps the cache-hit path free of database round trips;
it is coherent because this process is the only writer and snapshots are immutable per key.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Any, Literal, TypeVar

from sift.browser import Browser
from sift.config import CALLER_CLASSES, Settings
from sift.dcache import DB, AsyncDB, PageEntry
from sift.errors import (
    BrowserTimeout,
    BrowserUnavailable,
    RenderFailed,
    RobotsDisallowed,
    SiftError,
    SnapshotGone,
    UpstreamTimeout,
)
from sift.fetch import Fetcher, FetchPolicy, FetchResult, RobotsChecker, Target, egress_scope
from sift.fetch.policy import RESTRICTED_PORTS
from sift.hotcache import BytesLRU, HotCache
from sift.inflight import InflightLimiter
from sift.jsonio import dumps, loads
from sift.metrics import Metrics
from sift.options import Effective, Engine, FetchOptions, apply_class
from sift.principal import Principal
from sift.render import RenderOptions, cap
from sift.render.extras import cap_links, cap_title
from sift.snapshot import DEFAULT_RENDER_TIMEOUT_S, Snapshot, render_call, renders_inline
from sift.workers import RenderPool

CacheState = Literal["hit", "miss", "revalidated"]
# How the browser gets a page (the fetcher's place in the pipeline): url, policy, robots.
Loader = Callable[[str, FetchPolicy, "RobotsChecker | None"], Awaitable[FetchResult]]
CHECKED_URLS_MAX = 10_000
# Renders that timed out or ran out of memory are answered from memory for this long.
RENDER_FAILURE_TTL_S = 60
RENDER_FAILURES_MAX = 1024
COUNTER_FLUSH_S = 5.0
T = TypeVar("T")


@dataclass(frozen=True)
class _Memo:
    """A served response and what keeps it valid: ``page`` still the in-process entry for
    ``page_key`` (a refetch or revalidation replaces it) and the clock before ``expires_at``."""

    body: bytes
    page_key: str
    page: PageEntry
    expires_at: int


class _DBRobotsCache:
    """robots.txt cache for one egress scope, kept in the dcache database.

    Rows are keyed ``"<scope> <origin>"``: what robots.txt answered under one policy (a
    redirect it could not follow, an address it could not reach) never answers another.
    """

    def __init__(self, adb: AsyncDB, scope: str) -> None:
        self._adb = adb
        self._scope = scope

    async def get(self, origin: str) -> tuple[int, bytes, int] | None:
        return await self._adb.run(DB.get_robots, f"{self._scope} {origin}")

    async def put(self, origin: str, status: int, body: bytes, fetched_at: int) -> None:
        await self._adb.run(DB.put_robots, f"{self._scope} {origin}", status, body, fetched_at)


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
    ) -> None:
        self.settings = settings
        self.browser = browser  # None or absent: engine "browser" fails, "auto" stays HTTP
        self.adb = adb
        self.fetcher = fetcher
        self.metrics = metrics or Metrics()
        self._clock = clock
        self.render_pool = render_pool
        self._hot = HotCache(max_bytes=settings.cache.hot_bytes)
        self._responses: BytesLRU[tuple[Principal, FetchOptions], _Memo] = BytesLRU(
            max_bytes=settings.cache.hot_bytes // 4, size=lambda m: len(m.body)
        )
        # HTML bodies fetched just now, by digest: a crawl reads a page's links right after
        # its fetch (crawl/crawler.py), without a database round trip.
        self.recent_bodies: BytesLRU[str, bytes] = BytesLRU(
            max_bytes=settings.cache.hot_bytes // 8, size=len
        )
        self._flights: dict[tuple[object, ...], asyncio.Task[Any]] = {}
        self._waiters: dict[asyncio.Task[Any], int] = {}  # fetch flights: who still waits
        self._robots: dict[str, RobotsChecker] = {}
        self._policies: dict[tuple[str, bool | None, float], FetchPolicy] = {}
        self._checked: dict[tuple[str, FetchPolicy], Target] = {}
        self._render_failures: dict[tuple[str, str, float], tuple[int, RenderFailed]] = {}
        self._pending: dict[str, int] = {}
        # Per-caller fairness for the interactive front ends (/v1/fetch, MCP fetch).
        self.inflight = InflightLimiter(
            {c: settings.classes.get(c).max_inflight for c in CALLER_CLASSES}
        )
        self._flushed_at = time.monotonic()
        self._flush_task: asyncio.Future[None] | None = None
        # Bound once: a labelled child lookup per request is measurable on the hot path.
        self._cache_counters = {
            state: self.metrics.cache.labels(state) for state in ("hit", "miss", "revalidated")
        }

    # -- policy ---------------------------------------------------------------------------

    def policy_for(self, principal: Principal, timeout_s: float) -> FetchPolicy:
        """The fetch policy of a caller's class, with this request's deadline (memoized)."""
        key = (principal.caller_class, principal.allow_private, timeout_s)
        policy = self._policies.get(key)
        if policy is None:
            if len(self._policies) > 1024:
                self._policies.clear()
            policy = self._policies[key] = self._make_policy(principal, timeout_s)
        return policy

    def _make_policy(self, principal: Principal, timeout_s: float) -> FetchPolicy:
        limits = self.settings.classes.get(principal.caller_class)
        restricted = principal.caller_class == "restricted"
        allow_private = (
            principal.allow_private if principal.allow_private is not None else limits.allow_private
        )
        return FetchPolicy(
            allow_private=allow_private and not restricted,
            private_cidrs=limits.private_cidrs,
            allowed_ports=RESTRICTED_PORTS | frozenset(limits.extra_ports) if restricted else None,
            max_redirects=limits.max_redirects,
            max_download_bytes=limits.max_download_bytes,
            connect_timeout_s=min(limits.connect_timeout_s, timeout_s),
            timeout_s=timeout_s,
            pool="restricted" if restricted else "fleet",
        )

    # -- the pipeline ---------------------------------------------------------------------

    async def fetch(self, principal: Principal, options: FetchOptions) -> dict[str, Any]:
        """Run one fetch and return the result envelope (DESIGN.md). Raises ``SiftError``."""
        try:
            envelope, _ = await self._fetch(principal, options)
        except SiftError as exc:
            self.metrics.errors.labels(exc.code).inc()
            raise
        return envelope

    async def fetch_json(self, principal: Principal, options: FetchOptions) -> tuple[bytes, str]:
        """``fetch`` serialized, and its cache state.

        A response cache for the hot path: an identical request (same caller, same options)
        repeated while the page it was served from is still the fresh entry in the
        in-process cache gets the very bytes served last time, without running the
        pipeline again. Only cache hits are remembered, so the bytes always say "hit".
        """
        key = (principal, options)
        memo = self._responses.get(key)
        if memo is not None:
            if self._hot.peek_page(memo.page_key) is memo.page and self._clock() < memo.expires_at:
                self._cache_counters["hit"].inc()
                self._count("hit")
                return memo.body, "hit"
            self._responses.pop(key)
        try:
            envelope, valid = await self._fetch(principal, options)
        except SiftError as exc:
            self.metrics.errors.labels(exc.code).inc()
            raise
        body = dumps(envelope)
        if valid is not None:
            self._responses.put(key, replace(valid, body=body))
        return body, envelope["cache"]

    async def _fetch(
        self, principal: Principal, options: FetchOptions
    ) -> tuple[dict[str, Any], _Memo | None]:
        """The pipeline. Also returns, for a cache hit, what keeps its response valid."""
        limits = self.settings.classes.get(principal.caller_class)
        opts = options
        eff = apply_class(opts, principal.caller_class, limits)
        policy = self.policy_for(principal, eff.timeout_s)
        # Every check possible without I/O (URL rules, ports, local names, literal
        # addresses) runs before the cache: a cached page is never a way around them.
        target = self._check_url(opts.url, policy)
        ropts = RenderOptions(
            format=opts.format,
            main_content=opts.main_content,
            selector=opts.selector,
            exclude=opts.exclude,
            links=opts.links,
            max_bytes=limits.render_budget_bytes,
            timeout_s=limits.render_timeout_s,
        )
        engine: Engine = "browser" if opts.engine == "browser" else "http"
        extra: tuple[str, ...] = ()
        if opts.engine == "browser" and not self._browser_usable():
            raise BrowserUnavailable(self._browser_absent_reason())
        try:
            snap, state, memo = await self._snapshot(
                principal, opts, eff, policy, target, ropts, engine
            )
        except SnapshotGone:
            if opts.engine != "auto":
                raise
            engine = "browser"  # auto's continuation may point into a browser snapshot
            snap, state, memo = await self._snapshot(
                principal, opts, eff, policy, target, ropts, engine
            )
        if (
            opts.engine == "auto"
            and engine == "http"
            and opts.digest is None
            and "js_required_suspected" in snap.rendered.warnings
            and limits.browser
            and self._browser_usable()
        ):
            # The page looks like a JavaScript shell: render what the browser builds instead.
            # Should the browser fail, the HTTP snapshot (fetched under the same guard)
            # is still the answer, with a warning.
            try:
                snap, state, memo = await self._snapshot(
                    principal, opts, eff, policy, target, ropts, "browser"
                )
                engine = "browser"
            except SiftError as exc:
                self.metrics.errors.labels(exc.code).inc()
                extra, memo = (*extra, "browser_failed"), None
        self._cache_counters[state].inc()
        self._count(state)
        return self._envelope(snap, opts, eff, state, limits.max_links, engine, extra), memo

    def _browser_usable(self) -> bool:
        return self.browser is not None and self.browser.available

    def _browser_absent_reason(self) -> str:
        if self.browser is None:
            return "This sift runs without a browser."
        return (self.browser.launcher.absent_reason() or "The browser is not available") + "."

    async def _snapshot(
        self,
        principal: Principal,
        opts: FetchOptions,
        eff: Effective,
        policy: FetchPolicy,
        target: Target,
        ropts: RenderOptions,
        engine: Engine,
    ) -> tuple[Snapshot, CacheState, _Memo | None]:
        """The snapshot one engine serves for this request (cache, fetch or load, render)."""
        page_key = self._page_key(target.url, opts, policy, engine)
        render_key = f"{_render_options_key(ropts)} {page_key}"
        now = int(self._clock())
        memo: _Memo | None = None
        if opts.digest is not None:
            snap = await self._snapshot_by_digest(page_key, opts.digest, ropts, render_key, now)
            return snap, "hit", None
        max_age_s = (
            opts.max_age_s if opts.max_age_s is not None else self.settings.cache.default_max_age_s
        )
        robots = self.robots_checker(principal) if opts.robots else None
        # The shared fetch runs with the class deadline; this caller's timeout_s bounds only
        # its own wait (see _current_snapshot).
        limits = self.settings.classes.get(principal.caller_class)
        shared = self.policy_for(principal, limits.timeout_s)
        load = self._loader(principal, opts, engine)
        snap, state = await self._current_snapshot(
            opts, shared, eff.timeout_s, robots, page_key, ropts, render_key, max_age_s, now, load
        )
        page = self._hot.peek_page(page_key)
        if state == "hit" and page is not None and page.digest == snap.digest:
            memo = _Memo(b"", page_key, page, page.fetched_at + max_age_s)
        return snap, state, memo

    def _loader(self, principal: Principal, opts: FetchOptions, engine: Engine) -> Loader | None:
        """How a page is got for ``engine``: ``None`` for the fetcher (HTTP, conditional),
        else a browser load with this caller's page slots. The load may be shared (single
        flight), so it runs with the class deadline; each waiter bounds its own wait."""
        if engine == "http":
            return None
        browser = self.browser
        assert browser is not None
        limits = self.settings.classes.get(principal.caller_class)

        async def load(url: str, policy: FetchPolicy, robots: RobotsChecker | None) -> FetchResult:
            if robots is not None and not await robots.allowed(url):
                raise RobotsDisallowed("robots.txt disallows this URL.")
            result = await browser.load(
                url,
                policy,
                caller=principal.name,
                caller_pages=limits.browser_pages,
                caller_class=principal.caller_class,
                class_pages=limits.browser_pages_total,
                deadline_s=min(limits.timeout_s, limits.browser_timeout_s),
                wait_for=opts.wait_for,
            )
            self._count("browser_pages")
            return result

        return load

    def _count(self, name: str, n: int = 1) -> None:
        """Count into the persistent counters (``sift stats``), written every few seconds."""
        self._pending[name] = self._pending.get(name, 0) + n
        now = time.monotonic()
        if now - self._flushed_at >= COUNTER_FLUSH_S and self._flush_task is None:
            self._flushed_at = now
            self._flush_task = asyncio.ensure_future(self._flush_counters())

    async def _flush_counters(self) -> None:
        pending, self._pending = self._pending, {}
        try:
            if pending:
                await self.adb.run(DB.add_counters, pending)
        finally:
            self._flush_task = None

    async def close(self) -> None:
        """Write the counters still pending. Call before closing the database."""
        if self._flush_task is not None:
            await self._flush_task
        await self._flush_counters()

    def _check_url(self, url: str, policy: FetchPolicy) -> Target:
        """``fetcher.check_url`` memoized per (URL, policy): pure, and costly to repeat on
        the hot path. Only successes are remembered; a refused URL is checked every time."""
        key = (url, policy)
        target = self._checked.get(key)
        if target is None:
            target = self.fetcher.check_url(url, policy)
            if len(self._checked) >= CHECKED_URLS_MAX:
                self._checked.pop(next(iter(self._checked)))
            self._checked[key] = target
        return target

    def robots_checker(self, principal: Principal) -> RobotsChecker:
        """One long-lived checker per egress scope, so parsed rules are reused (the batch
        runner asks it for Crawl-delay)."""
        limits = self.settings.classes.get(principal.caller_class)
        policy = self.policy_for(principal, limits.timeout_s)
        key = egress_scope(policy)
        checker = self._robots.get(key)
        if checker is None:
            checker = RobotsChecker(
                self.fetcher,
                policy,
                _DBRobotsCache(self.adb, key),
                user_agent_token=self.settings.user_agent.split("/", 1)[0],
                now=self._clock,
            )
            self._robots[key] = checker
        return checker

    def _page_key(
        self, normalized_url: str, opts: FetchOptions, policy: FetchPolicy, engine: Engine
    ) -> str:
        # The whole egress scope is part of the key (private access and ranges, ports,
        # redirect count, size limits; and whether robots.txt was obeyed): a page fetched
        # under one policy is never served to a caller whose policy would have refused a
        # hop of it (a redirect to a port it may not use, more redirects, a larger body).
        # Keying by the policy is simpler and more correct than recording the hops and
        # re-checking them: a re-check without I/O cannot redo what the guard decided on
        # resolved addresses, and pages per policy cost little (bodies are shared, by
        # digest). Continuations (digest) and batch targets use the same key.
        # So is the engine: an HTTP body is never served for a browser request or the
        # reverse (and wait_for changes what the browser reads).
        suffix = "" if opts.robots else "-norobots"
        if engine == "browser":
            suffix += "-browser"
            if opts.wait_for:  # hashed: the key's first space must stay the URL's separator
                suffix += "-wait:" + hashlib.sha256(opts.wait_for.encode()).hexdigest()[:16]
        return f"{egress_scope(policy)}{suffix} {normalized_url}"

    async def _current_snapshot(
        self,
        opts: FetchOptions,
        policy: FetchPolicy,
        wait_s: float,
        robots: RobotsChecker | None,
        page_key: str,
        ropts: RenderOptions,
        render_key: str,
        max_age_s: int,
        now: int,
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
        page = self._hot.page(page_key) or await self.adb.run(DB.get_page, page_key, now)
        # A throttled or failing upstream (429, 5xx) is asked again rather than served from
        # the cache: its answer says "not now", not "this is the page".
        if page is not None and now - page.fetched_at < max_age_s and _cacheable(page.status):
            snap = await self._snapshot_for_page(page, ropts, render_key, now, body=None)
            if snap is not None:
                self._hot.put_page(page_key, page)
                return snap, "hit"
        try:
            async with asyncio.timeout(wait_s):
                fresh, body, state, new_body = await self._once(
                    ("fetch", page_key, max_age_s > 0, policy),
                    lambda: self._refresh(page_key, opts, policy, robots, page, now, load),
                    cancel_abandoned=True,
                )
        except TimeoutError as exc:
            if load is not None:  # a browser load: the caller learns which engine was slow
                raise BrowserTimeout(f"The page did not load within {wait_s:g} s.") from exc
            raise UpstreamTimeout(f"The fetch did not finish within {wait_s:g} s.") from exc
        snap = await self._snapshot_for_page(
            fresh, ropts, render_key, now, body=body, new_body=new_body
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
            page, new_body = await self._store(page_key, loaded, now)
            return page, loaded.body, "miss", new_body
        conditional = stale is not None and (stale.etag or stale.last_modified)
        started = time.perf_counter()
        result = await self.fetcher.fetch(
            opts.url,
            policy,
            etag=stale.etag if conditional and stale else None,
            last_modified=stale.last_modified if conditional and stale else None,
            robots=robots,
        )
        self.metrics.fetch_seconds.observe(time.perf_counter() - started)
        self.metrics.upstream_status.labels(str(result.status)).inc()
        if result.not_modified and stale is not None:
            # Shielded, like the store below: a flight cancelled once nobody waits (see
            # _current_snapshot) must not leave the database and the hot cache apart.
            revalidated = await asyncio.shield(self._revalidate(page_key, stale, now))
            if revalidated is not None:
                return revalidated
            # The body was evicted between lookup and revalidation: fetch it whole.
            result = await self.fetcher.fetch(opts.url, policy, robots=robots)
        page, new_body = await asyncio.shield(self._store(page_key, result, now))
        if "html" in result.content_type:
            self.recent_bodies.put(page.digest, result.body)
        return page, result.body, "miss", new_body

    async def _revalidate(
        self, page_key: str, stale: PageEntry, now: int
    ) -> tuple[PageEntry, bytes, CacheState, bool] | None:
        """A 304: the stored entry, fresh again; ``None`` if its body is gone."""
        body = await self.adb.run(DB.get_body, stale.digest, now)
        if body is None:
            return None
        page = replace(stale, fetched_at=now)
        await self.adb.run(DB.put_page, page_key, page, now)
        self._hot.put_page(page_key, page)
        return page, body, "revalidated", False

    async def _store(self, page_key: str, result: FetchResult, now: int) -> tuple[PageEntry, bool]:
        fields = {
            "url": page_key.split(" ", 1)[1],
            "final_url": result.final_url,
            "status": result.status,
            "content_type": result.content_type,
            "etag": result.etag,
            "last_modified": result.last_modified,
            "fetched_at": now,
            "headers_json": dumps(
                {"charset": result.charset, **_retry_after(result, now)}
            ).decode(),
        }
        page, new_body = await self.adb.run(_db_store_page, page_key, result.body, fields, now)
        self._hot.put_page(page_key, page)
        return page, new_body

    async def _snapshot_for_page(
        self,
        page: PageEntry,
        ropts: RenderOptions,
        render_key: str,
        now: int,
        body: bytes | None,
        new_body: bool = False,
    ) -> Snapshot | None:
        """The rendered snapshot of ``page``: hot cache, render cache, or a fresh render.

        ``None`` only when nothing is cached and ``body`` was not given and is gone. With
        ``new_body`` (just stored for the first time) the render cache is not asked: no
        render of that digest can exist there yet.
        """
        if new_body:
            snap = self._hot.snapshot(page.digest, render_key)
        else:
            snap = await self._cached_render(page.digest, render_key, now)
        if snap is None:
            if body is None:
                body = await self.adb.run(DB.get_body, page.digest, now)
                if body is None:
                    return None
            snap = await self._once(
                ("render", page.digest, render_key),
                lambda: self._render_and_store(page, body, ropts, render_key, now),
            )
        if snap.fetched_at != page.fetched_at:
            snap = replace(snap, fetched_at=page.fetched_at)  # revalidated since it was rendered
        if page.status in (429, 503):
            retry_after = loads(page.headers_json or "{}").get("retry_after")
            if retry_after != snap.retry_after:
                snap = replace(snap, retry_after=retry_after)
        return snap

    async def _cached_render(self, digest: str, render_key: str, now: int) -> Snapshot | None:
        snap = self._hot.snapshot(digest, render_key)
        if snap is not None:
            return snap
        payload = await self.adb.run(DB.get_render, digest, render_key, now)
        if payload is None:
            return None
        snap = Snapshot.from_payload(payload)
        self._hot.put_snapshot(digest, render_key, snap)
        return snap

    async def _render_and_store(
        self, page: PageEntry, body: bytes, ropts: RenderOptions, render_key: str, now: int
    ) -> Snapshot:
        charset = loads(page.headers_json or "{}").get("charset")
        args = (body, page.content_type, page.final_url, ropts, charset)
        if renders_inline(page.content_type, body, charset):
            rendered = render_call(*args)
        else:
            # A page that timed out or ran out of memory fails the same way for a while
            # without taking a render worker again (it would hold one for the whole limit).
            timeout_s = ropts.timeout_s or DEFAULT_RENDER_TIMEOUT_S
            failed_key = (page.digest, render_key, timeout_s)
            failed = self._render_failures.get(failed_key)
            if failed is not None and failed[0] > now:
                raise type(failed[1])(failed[1].message, hint=failed[1].hint)
            try:
                rendered = await self.render_pool.run(render_call, *args, timeout_s=timeout_s)
            except RenderFailed as exc:
                if len(self._render_failures) >= RENDER_FAILURES_MAX:
                    self._render_failures.pop(next(iter(self._render_failures)))
                self._render_failures[failed_key] = (now + RENDER_FAILURE_TTL_S, exc)
                raise
        snap = Snapshot(
            url=page.url,
            final_url=page.final_url,
            status=page.status,
            content_type=page.content_type,
            fetched_at=page.fetched_at,
            digest=page.digest,
            rendered=rendered,
            content_bytes=rendered.content.encode(),
        )
        await self.adb.run(_db_store_render, page.digest, render_key, snap.to_payload(), now)
        self._hot.put_snapshot(page.digest, render_key, snap)
        return snap

    async def _snapshot_by_digest(
        self, page_key: str, digest: str, ropts: RenderOptions, render_key: str, now: int
    ) -> Snapshot:
        """A continuation read: exactly the snapshot at ``digest``, never a newer copy."""
        snap = await self._cached_render(digest, render_key, now)
        if snap is not None:
            return snap
        page = self._hot.page(page_key) or await self.adb.run(DB.get_page, page_key, now)
        if page is not None and page.digest == digest:
            found = await self._snapshot_for_page(page, ropts, render_key, now, body=None)
            if found is not None:
                return found
        raise SnapshotGone(f"snapshot {digest} of this URL is no longer cached")

    async def _once(
        self,
        key: tuple[object, ...],
        make: Callable[[], Awaitable[T]],
        *,
        cancel_abandoned: bool = False,
    ) -> T:
        """Single flight: concurrent callers with the same key share one run of ``make``.

        The shared work runs in its own task, so one waiter being cancelled (a client
        hanging up, a waiter's own deadline) never cancels it for the others. With
        ``cancel_abandoned`` it is cancelled when the last waiter leaves before it is done.
        """
        task = self._flights.get(key)
        if task is None or task.cancelling():
            # (An abandoned flight being cancelled is not joined: a new one starts.)
            task = asyncio.ensure_future(make())
            self._flights[key] = task
            task.add_done_callback(lambda t: self._flight_done(key, t))
        if not cancel_abandoned:
            result: T = await asyncio.shield(task)
            return result
        self._waiters[task] = self._waiters.get(task, 0) + 1
        try:
            result = await asyncio.shield(task)
        finally:
            left = self._waiters.pop(task) - 1
            if left:
                self._waiters[task] = left
            elif not task.done():
                task.cancel()
        return result

    def _flight_done(self, key: tuple[object, ...], task: asyncio.Future[Any]) -> None:
        if self._flights.get(key) is task:  # not a newer flight that replaced a cancelled one
            del self._flights[key]
        # Retrieved even when every waiter has gone (a cancelled batch target, a client that
        # hung up), so an abandoned flight's error is not logged as "never retrieved".
        if not task.cancelled():
            task.exception()

    def _envelope(
        self,
        snap: Snapshot,
        opts: FetchOptions,
        eff: Effective,
        state: CacheState,
        max_links: int,
        engine: Engine,
        extra: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        piece = cap(snap.rendered.content, opts.offset, eff.max_bytes)
        # Title and links are held to the cap too (render/extras.py); the snapshot keeps them.
        title, title_cut = cap_title(snap.rendered.title, eff.max_bytes)
        extra_warnings = ["title_truncated"] if title_cut else []
        env: dict[str, Any] = {
            "url": opts.url,
            "final_url": snap.final_url,
            "status": snap.status,
            "content_type": snap.content_type,
            "title": title,
            "lang": snap.rendered.lang,
            "format": opts.format,
            "content": piece.content,
            "offset": piece.offset,
            "bytes": piece.bytes,
            "total_bytes": piece.total_bytes,
            "truncated": piece.truncated,
            "next_offset": piece.next_offset,
            "fetched_at": snap.fetched_at,
            "cache": state,
            "digest": snap.digest,
            "engine": engine,
            "page_type": snap.rendered.page_type,
            "metadata": snap.rendered.metadata,
        }
        if opts.links:
            env["links"], links_cut = cap_links(snap.rendered.links, max_links, eff.max_bytes)
            if links_cut:
                extra_warnings.append("links_truncated")
        if snap.retry_after is not None:
            env["retry_after"] = snap.retry_after
        warnings = snap.rendered.warnings
        if engine == "browser":  # the browser ran the scripts: the shell warning is moot
            warnings = [w for w in warnings if w != "js_required_suspected"]
        env["warnings"] = [*eff.warnings, *warnings, *extra, *extra_warnings]
        return env


@functools.lru_cache(maxsize=4096)
def _render_options_key(options: RenderOptions) -> str:
    return options.cache_key()


def _cacheable(status: int) -> bool:
    return status != 429 and status < 500


def _headers_json(result: FetchResult, now: int) -> str:
    """What a page entry keeps of the response beyond its columns."""
    return dumps({"charset": result.charset, **_retry_after(result, now)}).decode()


def _retry_after(result: FetchResult, now: int) -> dict[str, int]:
    """``{"retry_after": seconds}`` for a 429/503 answer with a usable Retry-After header
    (delta seconds or an HTTP date), else ``{}``."""
    value = result.headers.get("retry-after", "").strip()
    if result.status not in (429, 503) or not value:
        return {}
    if value.isdigit():
        return {"retry_after": min(int(value), 86400)}
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return {}
    return {"retry_after": max(0, min(int(when - now), 86400))}


# Database steps run as one call on the database thread each (one round trip, not three).


def _db_store_page(
    db: DB, page_key: str, body: bytes, fields: dict[str, Any], now: int
) -> tuple[PageEntry, bool]:
    """Store a fetched body and its page entry, then keep the cache within its budget.
    Returns the entry and whether the body is new to the cache."""
    with db.transaction():
        digest, new_body = db.put_body_new(body, now)
        page = PageEntry(digest=digest, **fields)
        db.put_page(page_key, page, now)
        db.evict(now)
    return page, new_body


def _db_store_render(db: DB, digest: str, render_key: str, payload: bytes, now: int) -> None:
    with db.transaction():
        db.put_render(digest, render_key, payload, now)
        db.evict(now)
