"""Restricted pages may read other origins, never write to them.

Every connection a page opens passes the egress guard (``proxy.py``), but the guard cannot
tell what is sent: an https request is an opaque tunnel. Without this, a restricted caller
could point sift at its own page and have that page POST bodies it chose to any public host,
from sift's address. So for restricted callers each page's own requests are stopped in
Chromium before they leave (the DevTools ``Fetch`` domain, on the page's target), and one
other than ``GET`` or ``HEAD`` to an origin other than the top-level page's is failed
(``BlockedByClient``): the page goes on, the request never goes out. Same-origin writes pass
(a page posting to its own site's API, say a GraphQL endpoint, loads its text that way).

What is covered, each checked against a canary in ``tests/test_browser_writes.py``: fetch
and XMLHttpRequest (also from dedicated workers), form submissions (top level and in frames),
``sendBeacon``, CSP reports, and a same-origin POST redirected (307/308) to another origin —
the redirect is paused and checked like any request. A CORS preflight (``OPTIONS``) to
another origin is refused like the request it precedes. Only the request types that can
carry another method are paused (documents, XHR/fetch, pings, reports, workers' "other"):
scripts, styles and images go straight through, unpaused. Shared workers, which would run
outside the page's target, are disabled in the browser (``launcher.py``), and so are the
Reporting API and Network Error Logging, which post from the network service itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Final

from sift.fetch.credentials import origin_of as origin_of

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, CDPSession, Page

SAFE_METHODS: Final = frozenset({"GET", "HEAD"})
# The DevTools resource types whose requests may use another method than GET.
WRITE_TYPES: Final = ("Document", "XHR", "Fetch", "Ping", "CSPViolationReport", "Other")


def is_cross_origin_write(method: str, url: str, page_url: str) -> bool:
    """True for a request to refuse: not GET/HEAD, and not to the page's own origin."""
    if method.upper() in SAFE_METHODS:
        return False
    page_origin = origin_of(page_url)
    return page_origin is None or origin_of(url) != page_origin


class WriteGuard:
    """Pauses one page's requests that could write and fails the cross-origin ones.

    ``start`` before the page navigates; ``close`` when the page is done. ``refused`` lists
    what was stopped, as ``"METHOD url"`` (for the loader's metrics and for tests).
    """

    def __init__(self, page: Page) -> None:
        self._page = page
        self._cdp: CDPSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.refused: list[str] = []

    async def start(self, ctx: BrowserContext) -> None:
        cdp = await ctx.new_cdp_session(self._page)
        self._cdp = cdp
        cdp.on("Fetch.requestPaused", self._on_paused)
        patterns = [
            {"urlPattern": "*", "resourceType": t, "requestStage": "Request"} for t in WRITE_TYPES
        ]
        await cdp.send("Fetch.enable", {"patterns": patterns})

    def _on_paused(self, event: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._decide(event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _decide(self, event: dict[str, Any]) -> None:
        cdp = self._cdp
        assert cdp is not None
        request = event.get("request", {})
        method, url = str(request.get("method", "GET")), str(request.get("url", ""))
        params: dict[str, Any] = {"requestId": event["requestId"]}
        if is_cross_origin_write(method, url, self._page.url):
            self.refused.append(f"{method} {url}")
            command = "Fetch.failRequest"
            params["errorReason"] = "BlockedByClient"
        else:
            command = "Fetch.continueRequest"
        # The page may be closing under us: a request it no longer has is not an error.
        with contextlib.suppress(Exception):
            await cdp.send(command, params)

    async def close(self) -> None:
        """Stop deciding; the context's close ends the session and whatever is paused.
        (Not ``detach``: on a page whose renderer was killed it never answers.)"""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._cdp = None
