"""Stage 3, fetch: get a page from upstream, over HTTP or in the browser.

Everything that talks to the origin lives here: the engine choice (HTTP unless the caller
asks for the browser, or ``auto`` finds a JavaScript shell), the fetcher's conditional GET
(validators from a stale entry), the browser load with the caller's page slots, and the
robots.txt checkers (one per egress scope, their cache in the dcache database). The egress
policy itself is enforced inside ``sift.fetch`` and ``sift.browser`` on every connection.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from sift.browser import Browser
from sift.browser.actions import ActionPlan
from sift.browser.loader import Loaded
from sift.browser.shot import ShotOrder
from sift.config import ClassSettings, Settings
from sift.dcache import DB, AsyncDB, PageEntry
from sift.errors import BrowserUnavailable, RobotsDisallowed
from sift.fetch import Fetcher, FetchPolicy, FetchResult, RobotsChecker, egress_scope
from sift.fetch.credentials import Credentials
from sift.metrics import Metrics
from sift.options import Engine, FetchOptions
from sift.principal import Principal
from sift.snapshot import Snapshot

# How the browser gets a page (the fetcher's place in the pipeline): url, policy, robots.
Loader = Callable[[str, FetchPolicy, "RobotsChecker | None"], Awaitable[Loaded]]


def shot_order(opts: FetchOptions, limits: ClassSettings) -> ShotOrder | None:
    """The screenshot a request asks for, with its class's bounds; None without one."""
    if opts.screenshot is None:
        return None
    return ShotOrder(opts.screenshot, limits.screenshot_max_pixels, limits.screenshot_max_bytes)


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


class Upstream:
    """The fetcher, the browser (``None`` or absent: engine "browser" fails, "auto" stays
    HTTP) and the robots.txt checkers. ``policy_for`` gives a class's fetch policy with a
    deadline; ``count`` counts into the persistent counters."""

    def __init__(
        self,
        settings: Settings,
        adb: AsyncDB,
        fetcher: Fetcher,
        *,
        browser: Browser | None,
        metrics: Metrics,
        clock: Callable[[], float],
        policy_for: Callable[[Principal, float], FetchPolicy],
        count: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.adb = adb
        self.fetcher = fetcher
        self.browser = browser
        self.metrics = metrics
        self._clock = clock
        self._policy_for = policy_for
        self._count = count
        self._robots: dict[str, RobotsChecker] = {}

    # -- the engine -----------------------------------------------------------------------

    def engine_for(self, opts: FetchOptions) -> Engine:
        """The engine tried first: the browser only when asked for (``engine`` browser, page
        ``actions`` or a screenshot), and then it must be there (else ``BrowserUnavailable``)."""
        wants = opts.engine == "browser" or bool(opts.actions) or opts.screenshot is not None
        engine: Engine = "browser" if wants else "http"
        if wants and not self.browser_usable():
            raise BrowserUnavailable(self._browser_absent_reason())
        return engine

    def auto_choice(
        self, opts: FetchOptions, limits: ClassSettings, engine: Engine, snap: Snapshot
    ) -> tuple[bool, tuple[str, ...]]:
        """For ``auto``, after the HTTP snapshot: load the page in the browser instead? And
        the warnings that say why or why not (docs/browser.md): ``browser_used:<reason>``
        when the HTTP page's visible text needs JavaScript (``render.jsshell``) and this
        caller's class may use an installed browser; ``browser_not_allowed`` or
        ``browser_unavailable`` when it needs JavaScript but cannot have it."""
        reason = snap.rendered.js_shell
        if opts.engine != "auto" or engine != "http" or opts.digest is not None or not reason:
            return False, ()
        if not limits.browser:
            return False, ("browser_not_allowed",)
        if not self.browser_usable():
            return False, ("browser_unavailable",)
        return True, (f"browser_used:{reason}",)

    def browser_usable(self) -> bool:
        return self.browser is not None and self.browser.available

    def _browser_absent_reason(self) -> str:
        if self.browser is None:
            return "This sift runs without a browser."
        return (self.browser.launcher.absent_reason() or "The browser is not available") + "."

    # -- robots.txt -----------------------------------------------------------------------

    def robots_checker(self, principal: Principal) -> RobotsChecker:
        """One long-lived checker per egress scope, so parsed rules are reused (the batch
        runner asks it for Crawl-delay)."""
        limits = self.settings.classes.get(principal.caller_class)
        policy = self._policy_for(principal, limits.timeout_s)
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

    # -- getting the page -----------------------------------------------------------------

    def loader(self, principal: Principal, opts: FetchOptions, engine: Engine) -> Loader | None:
        """How a page is got for ``engine``: ``None`` for the fetcher (HTTP, conditional),
        else a browser load with this caller's page slots. The load may be shared (single
        flight), so it runs with the class deadline; each waiter bounds its own wait."""
        if engine == "http":
            return None
        browser = self.browser
        assert browser is not None
        limits = self.settings.classes.get(principal.caller_class)
        shot = shot_order(opts, limits)

        async def load(url: str, policy: FetchPolicy, robots: RobotsChecker | None) -> Loaded:
            if robots is not None and not await robots.allowed(url):
                raise RobotsDisallowed("robots.txt disallows this URL.")
            loaded = await browser.load_page(
                url,
                policy,
                caller=principal.name,
                caller_pages=limits.browser_pages,
                caller_class=principal.caller_class,
                class_pages=limits.browser_pages_total,
                deadline_s=min(limits.timeout_s, limits.browser_timeout_s),
                wait_for=opts.wait_for,
                credentials=opts.credentials or None,
                actions=ActionPlan(opts.actions, limits.action_timeout_s) if opts.actions else None,
                shot=shot,
            )
            self._count("browser_pages")
            # A step navigated: the page read must be one robots.txt allows, as every hop of
            # a plain fetch must (the browser cannot ask before it goes there).
            final_url = loaded.result.final_url
            moved = opts.actions and final_url != url
            if robots is not None and moved and not await robots.allowed(final_url):
                raise RobotsDisallowed(
                    f"robots.txt disallows {final_url}, where the page actions led."
                )
            return loaded

        return load

    async def fetch(
        self,
        url: str,
        policy: FetchPolicy,
        stale: PageEntry | None,
        robots: RobotsChecker | None,
        credentials: Credentials | None = None,
    ) -> FetchResult:
        """Fetch over HTTP, conditionally when the ``stale`` entry has validators, with the
        caller's ``credentials`` for ``url``'s origin (never for robots.txt: the checker
        fetches it on its own, without them)."""
        conditional = stale is not None and (stale.etag or stale.last_modified)
        started = time.perf_counter()
        result = await self.fetcher.fetch(
            url,
            policy,
            etag=stale.etag if conditional and stale else None,
            last_modified=stale.last_modified if conditional and stale else None,
            robots=robots,
            credentials=credentials,
        )
        self.metrics.fetch_seconds.observe(time.perf_counter() - started)
        self.metrics.upstream_status.labels(str(result.status)).inc()
        return result

    async def fetch_whole(
        self,
        url: str,
        policy: FetchPolicy,
        robots: RobotsChecker | None,
        credentials: Credentials | None = None,
    ) -> FetchResult:
        """Fetch over HTTP unconditionally (a 304's body was evicted meanwhile)."""
        return await self.fetcher.fetch(url, policy, robots=robots, credentials=credentials)
