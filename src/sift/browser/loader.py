"""Loading one page in the browser, under one deadline, through the caller's guard proxy.

Per page: check the caller's URL exactly as a plain fetch does → wait for an open-page slot →
a fresh browser context (no cookies, storage or cache shared with any other page) whose proxy
is a new ``GuardProxy`` carrying the caller's policy and the page's budgets → navigate and
wait for ``domcontentloaded`` → wait for ``wait_for`` or for the network to go quiet →
run the caller's page actions, if any (``actions.py``) → serialize the DOM in the page,
refusing it past ``max_dom_bytes`` → close the context and the proxy. Through a proxy
Chromium's ``load`` event sometimes never fires (measured), so it is not waited for.

While it loads, the page's renderer process is watched (``watchdog.py``: its whole memory
and CPU time against the page budget, killed past either) and, for a restricted caller, its
requests that could write to another origin are refused (``writes.py``).

The result is a ``FetchResult`` whose body is the HTML the browser built, so the service
caches and renders it like any fetched page. Errors: ``Blocked`` (the URL, a redirect or
a navigation was refused), ``BrowserTimeout``, ``BrowserFailed`` (the tab crashed, e.g.
over its heap; or the browser died), its ``BrowserMemoryExceeded`` and ``BrowserCpuExceeded``
(the watchdog stopped the page), ``TooLarge`` (a budget was spent), ``ActionFailed`` (a
page action could not be done), and ``BrowserUnavailable`` from the launcher.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from sift.browser.actions import ActionPlan, run_actions
from sift.browser.credentials import CredentialGate
from sift.browser.launcher import Launcher
from sift.browser.limits import PageLimits, PageSlots
from sift.browser.proxy import GuardProxy, ProxyLimits
from sift.browser.watchdog import PageBudget, PageWatch, Stop, renderer_pids
from sift.browser.writes import WriteGuard
from sift.config import BrowserSettings
from sift.errors import (
    Blocked,
    BrowserCpuExceeded,
    BrowserFailed,
    BrowserMemoryExceeded,
    BrowserTimeout,
    SiftError,
    TooLarge,
)
from sift.fetch import BLOCKED_MESSAGE, Fetcher, FetchPolicy, FetchResult
from sift.fetch.credentials import Credentials
from sift.metrics import Metrics

if TYPE_CHECKING:
    from playwright.async_api import Browser as PWBrowser
    from playwright.async_api import BrowserContext, Page

log = logging.getLogger("sift.browser")
# Serialize the DOM in the page, and only if it fits: an oversized DOM never leaves it.
_DOM_JS = """(max) => {
  const root = document.documentElement;
  if (!root) return "";
  const html = root.outerHTML;
  return html.length > max ? html.length : html;
}"""
_NO_POPUPS_JS = "window.open = () => null;"
CLOSE_TIMEOUT_S = 5.0
# Part of the deadline kept for serializing the page after the network-quiet wait.
EXTRACT_RESERVE_S = 2.0


class Browser:
    """The process's browser front: launcher, open-page slots, page loads, metrics.

    ``guard=False`` and ``lab_args`` are test-only switches (the canary test's control run:
    page proxies then connect wherever the page says, and WebRTC may send UDP directly).
    No setting reaches them.
    """

    def __init__(
        self,
        settings: BrowserSettings,
        fetcher: Fetcher,
        *,
        metrics: Metrics | None = None,
        guard: bool = True,
        lab_args: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.fetcher = fetcher
        self.launcher = Launcher(settings, fetcher, lab_args=lab_args, guard=guard)
        self.limits = PageLimits.from_settings(settings)
        self.slots = PageSlots(settings.max_pages)
        self.metrics = metrics
        self._guard = guard
        self.budget = PageBudget(
            settings.page_memory_bytes, settings.page_cpu_s, settings.page_nice
        )
        # Pages are created one at a time, so the renderer process that appears is the new
        # page's (watchdog.py).
        self._creating = asyncio.Lock()
        self._unwatched_logged = False
        self.last_proxy: GuardProxy | None = None  # the latest page's proxy (tests read it)
        self.last_writes: WriteGuard | None = None  # the latest restricted page's write guard
        self.last_gate: CredentialGate | None = None  # the latest credentialed page's gate
        self.last_watch: PageWatch | None = None  # the latest page's watch (tests read it)

    @property
    def available(self) -> bool:
        return self.launcher.available

    @property
    def state(self) -> str:
        return self.launcher.state

    async def close(self) -> None:
        await self.launcher.close()

    async def load(
        self,
        url: str,
        policy: FetchPolicy,
        *,
        caller: str,
        caller_pages: int,
        deadline_s: float,
        wait_for: str | None = None,
        caller_class: str = "",
        class_pages: int = 0,
        credentials: Credentials | None = None,
        actions: ActionPlan | None = None,
    ) -> FetchResult:
        """Load ``url`` for a caller under ``policy``, running ``actions`` on it before it is
        read; see the module docstring. ``credentials`` go only to requests for ``url``'s
        origin (``credentials.py``)."""
        target = self.fetcher.check_url(url, policy)  # the caller's URL: same rules as HTTP
        started = time.monotonic()
        outcome = "error"
        try:
            async with asyncio.timeout(deadline_s):
                async with self.slots.take(caller, caller_pages, caller_class, class_pages):
                    browser = await self.launcher.browser()
                    result = await self._load(
                        browser,
                        target.url,
                        policy,
                        wait_for,
                        started + deadline_s,
                        restricted=caller_class == "restricted",
                        credentials=credentials or None,
                        actions=actions,
                    )
            outcome = "ok"
            return result
        except TimeoutError as exc:
            outcome = "browser_timeout"
            acted = " with its page actions" if actions is not None and actions.steps else ""
            raise BrowserTimeout(
                f"The page did not finish loading{acted} within {deadline_s:g} s"
                + (f" (wait_for {wait_for!r} never appeared)." if wait_for else ".")
            ) from exc
        except SiftError as exc:
            outcome = exc.code
            raise
        finally:
            if self.metrics is not None:
                self.metrics.browser_pages.labels(outcome).inc()
                self.metrics.browser_seconds.observe(time.monotonic() - started)

    async def _load(
        self,
        browser: PWBrowser,
        url: str,
        policy: FetchPolicy,
        wait_for: str | None,
        deadline_at: float,
        *,
        restricted: bool,
        credentials: Credentials | None = None,
        actions: ActionPlan | None = None,
    ) -> FetchResult:
        limits = self.limits
        proxy = GuardProxy(
            self.fetcher,
            policy,
            ProxyLimits(limits.max_subresources, limits.max_page_bytes, policy.connect_timeout_s),
            guard=self._guard,
        )
        self.last_proxy = proxy
        ctx: BrowserContext | None = None
        writes: WriteGuard | None = None
        gate: CredentialGate | None = None
        try:
            proxy_url = await self.launcher.start_proxy(proxy)
            ctx = await browser.new_context(
                proxy={"server": proxy_url, "bypass": "<-loopback>"},
                service_workers="block",
                accept_downloads=False,
                user_agent=self.fetcher.user_agent,
            )
            # Popups: window.open does nothing; any page opened another way is closed.
            await ctx.add_init_script(_NO_POPUPS_JS)
            page, watch = await self._new_page(ctx)
            ctx.on("page", lambda p: _close_popup(p, page))
            if restricted:  # a restricted page reads other origins, never writes to them
                writes = self.last_writes = WriteGuard(page)
                await writes.start(ctx)
            if credentials:  # the caller's headers and cookies, for url's origin only
                gate = self.last_gate = CredentialGate(page, url, credentials)
                await gate.start(ctx)
            return await self._race(
                browser, page, proxy, url, wait_for, deadline_at, watch, actions
            )
        finally:
            refused = proxy.stats.refused + (len(writes.refused) if writes else 0)
            if self.metrics is not None and refused:
                self.metrics.browser_blocked.inc(refused)
            if writes is not None:
                await writes.close()
            if gate is not None:
                await gate.close()
            if ctx is not None:
                await self._close_context(ctx)
            await proxy.close()

    async def _new_page(self, ctx: BrowserContext) -> tuple[Page, PageWatch | None]:
        """A new page, and the watch on its renderer process (None if it cannot be found)."""
        root = self.launcher.browser_pid
        async with self._creating:
            before = renderer_pids(root) if root is not None else set()
            page = await ctx.new_page()
            pids = renderer_pids(root) - before if root is not None else set()
        if not pids:
            if not self._unwatched_logged:
                self._unwatched_logged = True
                log.warning(
                    "browser: cannot find pages' renderer processes in /proc; pages run "
                    "without the memory and CPU watch (browser.page_memory_bytes, page_cpu_s)"
                )
            return page, None
        watch = self.last_watch = PageWatch(frozenset(pids), self.budget)
        return page, watch

    async def _race(
        self,
        browser: PWBrowser,
        page: Page,
        proxy: GuardProxy,
        url: str,
        wait_for: str | None,
        deadline_at: float,
        watch: PageWatch | None,
        actions: ActionPlan | None = None,
    ) -> FetchResult:
        """Run the navigation, ended early by a spent budget, the watchdog or a crash."""
        crashed = asyncio.Event()
        page.on("crash", lambda _: crashed.set())
        work = asyncio.ensure_future(
            self._navigate(page, proxy, url, wait_for, deadline_at, actions)
        )
        spent = asyncio.ensure_future(proxy.spent.wait())
        crash = asyncio.ensure_future(crashed.wait())
        tasks: list[asyncio.Future[Any]] = [work, spent, crash]
        stopped: asyncio.Future[Stop] | None = None
        if watch is not None:
            stopped = asyncio.ensure_future(watch.run())
            tasks.append(stopped)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if proxy.over_budget == "requests":
            raise TooLarge(
                f"The page made more than {self.limits.max_subresources} requests; "
                "the browser's limit per page is browser.max_subresources."
            )
        if proxy.over_budget == "bytes":
            raise TooLarge(
                f"The page moved more than {self.limits.max_page_bytes} bytes; "
                "the browser's limit per page is browser.max_page_bytes."
            )
        if stopped is not None and not stopped.cancelled() and stopped.exception() is None:
            raise self._stopped(stopped.result())
        if crashed.is_set():
            raise BrowserFailed("The page crashed its browser tab (over its memory limit?).")
        try:
            return work.result()  # done: the other two only end by being set, checked above
        except SiftError:
            raise
        except Exception as exc:  # Playwright's errors, translated once, here
            raise self._translate(exc, browser, proxy, url) from exc

    async def _navigate(
        self,
        page: Page,
        proxy: GuardProxy,
        url: str,
        wait_for: str | None,
        deadline_at: float,
        actions: ActionPlan | None = None,
    ) -> FetchResult:
        resp = await page.goto(url, wait_until="domcontentloaded", timeout=0)
        if resp is not None and resp.headers.get("x-sift-error"):
            raise _refusal(proxy, resp.url)
        if wait_for:
            await page.wait_for_selector(wait_for, state="attached", timeout=0)
        else:
            await _network_quiet(proxy, self.limits.network_quiet_s, time.monotonic(), deadline_at)
        outcomes: tuple[dict[str, Any], ...] = ()
        if actions is not None and actions.steps:
            outcomes = await self._act(page, proxy, actions, deadline_at)
        final_url = page.url
        if _refused(proxy, final_url):  # a meta refresh or script navigated to a refused URL
            raise _refusal(proxy, final_url)
        html = await page.evaluate(_DOM_JS, self.limits.max_dom_bytes)
        body = html.encode("utf-8", "replace") if isinstance(html, str) else None
        if body is None or len(body) > self.limits.max_dom_bytes:
            raise TooLarge(
                f"The page's DOM exceeds {self.limits.max_dom_bytes} bytes (browser.max_dom_bytes)."
            )
        # resp.headers, not all_headers(): the latter costs a driver round trip per page.
        headers = dict(resp.headers) if resp is not None else {}
        return FetchResult(
            url=url,
            final_url=final_url,
            status=resp.status if resp is not None else 200,
            headers=headers,
            body=body,
            content_type="text/html; charset=utf-8",
            charset="utf-8",
            redirects=(),
            timings={},
            not_modified=False,
            etag=None,
            last_modified=None,
            actions=outcomes,
        )

    async def _act(
        self, page: Page, proxy: GuardProxy, plan: ActionPlan, deadline_at: float
    ) -> tuple[dict[str, Any], ...]:
        """Run the caller's page actions (``actions.py``) on the loaded page. Between steps
        the page settles as after loading (its network quiet, a navigation loaded); a step
        that led to a URL the guard refused ends the load with that refusal."""
        until = deadline_at - min(EXTRACT_RESERVE_S, (deadline_at - time.monotonic()) / 4)

        async def settle() -> None:
            quiet_s = self.limits.network_quiet_s
            await _network_quiet(proxy, quiet_s, time.monotonic(), deadline_at)
            await page.wait_for_load_state("domcontentloaded", timeout=0)

        def check() -> None:
            where = page.url
            if _refused(proxy, where):
                raise _refusal(proxy, where)
            if where.startswith("chrome-error:"):  # a navigation that did not load
                refusals = list(proxy.stats.refusals.values())
                if refusals:  # https: a refused tunnel; the latest refusal is the step's
                    last = refusals[-1]
                    raise Blocked(BLOCKED_MESSAGE) if isinstance(last, Blocked) else last
                raise BrowserFailed("The page it led to could not be loaded.")

        return await run_actions(page, plan, until=until, settle=settle, check=check)

    def _stopped(self, stop: Stop) -> SiftError:
        """The error for a page the watchdog stopped."""
        if stop.reason == "memory":
            return BrowserMemoryExceeded(
                f"The page used {stop.rss_bytes >> 20} MiB of memory, more than the "
                f"{self.budget.memory_bytes >> 20} MiB a browser page may "
                "(browser.page_memory_bytes); it was stopped."
            )
        return BrowserCpuExceeded(
            f"The page used {stop.cpu_s:.1f} s of CPU time, more than the "
            f"{self.budget.cpu_s:g} s a browser page may (browser.page_cpu_s); it was stopped."
        )

    def _translate(
        self, exc: BaseException, browser: PWBrowser, proxy: GuardProxy, url: str
    ) -> SiftError:
        message = str(exc)
        if not browser.is_connected():
            return BrowserFailed("The browser exited while loading the page.")
        if "crash" in message.lower():
            return BrowserFailed("The page crashed its browser tab.")
        if _refused(proxy, url) or "ERR_TUNNEL_CONNECTION_FAILED" in message:
            return _refusal(proxy, url)
        first = message.strip().splitlines()[0] if message.strip() else type(exc).__name__
        return BrowserFailed(f"The browser could not load the page: {first[:200]}")

    async def _close_context(self, ctx: BrowserContext) -> None:
        """Close the page's context; a browser that cannot is dropped and relaunched."""
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await ctx.close()
        except Exception as exc:  # timeout or a dead browser: either way, start afresh
            log.warning("browser: closing a page failed; relaunching", exc_info=exc)
            self.launcher.forget()


def _refused(proxy: GuardProxy, url: str) -> bool:
    return _refusal_key(proxy, url) is not None


def _refusal_key(proxy: GuardProxy, url: str) -> str | None:
    refusals = proxy.stats.refusals
    plain = url.split("#", 1)[0]
    if plain in refusals:
        return plain
    m = re.match(r"(?:https|wss)://([^/?#]+)", plain, re.IGNORECASE)
    if m:
        hostport = m.group(1).lower()
        if ":" not in hostport.rsplit("]", 1)[-1]:
            hostport += ":443"
        if hostport in refusals:
            return hostport
    return None


def _refusal(proxy: GuardProxy, url: str) -> SiftError:
    key = _refusal_key(proxy, url)
    exc = proxy.stats.refusals.get(key) if key is not None else None
    if exc is None or isinstance(exc, Blocked):
        # Which rule fired is never said, as for a plain fetch.
        return Blocked(BLOCKED_MESSAGE)
    return exc


async def _network_quiet(
    proxy: GuardProxy, quiet_s: float, since: float, deadline_at: float
) -> None:
    """Until the page's network has been idle ``quiet_s`` (counted from ``since`` at the
    earliest: DOMContentLoaded, when the page's timers start), or shortly before the
    deadline (a page that never stops polling is read as it is then)."""
    until = deadline_at - min(EXTRACT_RESERVE_S, (deadline_at - time.monotonic()) / 4)
    while True:
        now = time.monotonic()
        idle = min(proxy.quiet_for(now), now - since)
        if idle >= quiet_s or now >= until:
            return
        await asyncio.sleep(max(0.01, min(quiet_s - idle, until - now)))


def _close_popup(popup: Page, main: Page) -> None:
    if popup is not main:
        task = asyncio.ensure_future(popup.close())
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
