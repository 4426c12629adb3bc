"""The caller's headers and cookies in the browser: on requests to the page's origin only.

The guard proxy cannot add them (for https it sees only ``CONNECT``), and Playwright's
ways are not scoped: ``set_extra_http_headers`` goes to every origin the page touches, and
a ``route.continue_`` override is carried on to every redirect hop, cross-origin ones
included (Playwright ≥ 1.42). So sift asks Chromium itself, on the page's own DevTools
session (the ``Fetch`` domain, as ``writes.py`` does):

- only requests whose URL is on the origin are paused (a ``urlPattern`` of that origin);
  each is checked again here (``origin_of``, scheme + host + port) and, while the page
  itself is on the origin (or still blank, before its first navigation), continued with
  the caller's headers and a ``Cookie`` field holding the cookies the page already has for
  it plus the caller's (theirs win on a name clash). A page that has left the origin (a
  top-level redirect, a navigation) gets no more of them, even for requests back to it;
- an override of ``Fetch.continueRequest`` applies to that request only, never to a
  redirect hop it leads to (DevTools' contract): a hop to another origin is a new request,
  not paused, sent as the page made it;
- the cookies never enter the browser's cookie jar, which is keyed by host alone (a jar
  cookie would reach every port and, without ``Secure``, both schemes of the host); page
  scripts cannot read them (``document.cookie``), as if they were ``HttpOnly``.

A request the origin's pattern does not pause simply goes out without them: a failure here
can only lose credentials, never send them elsewhere. ``tests/test_credentials_browser.py``
checks the subresources, a redirect to a second origin and the page's own cookies.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from sift.fetch.credentials import Credentials, origin_of

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, CDPSession, Page

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_pattern(url: str) -> str | None:
    """The DevTools ``urlPattern`` for every URL on ``url``'s origin (None for an origin
    sift never sends credentials to). ``*`` and ``?`` are its wildcards, ``\\`` escapes."""
    origin = origin_of(url)
    if origin is None or origin[0] not in _DEFAULT_PORTS:
        return None
    scheme, host, port = origin
    host = f"[{host}]" if ":" in host else host
    netloc = host if _DEFAULT_PORTS[scheme] == port else f"{host}:{port}"
    escaped = "".join("\\" + c if c in "*?\\" else c for c in f"{scheme}://{netloc}/")
    return escaped + "*"


class CredentialGate:
    """Adds ``credentials`` to one page's requests for ``url``'s origin.

    ``start`` before the page navigates; ``close`` when it is done. ``sent`` lists the URLs
    they were added to (tests read it; URLs only, never a value)."""

    def __init__(self, page: Page, url: str, credentials: Credentials) -> None:
        self._page = page
        self._origin = origin_of(url)
        self._pattern = origin_pattern(url)
        self._credentials = credentials
        self._cdp: CDPSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent: list[str] = []

    async def start(self, ctx: BrowserContext) -> None:
        if self._pattern is None:
            return
        cdp = await ctx.new_cdp_session(self._page)
        self._cdp = cdp
        cdp.on("Fetch.requestPaused", self._on_paused)
        patterns = [{"urlPattern": self._pattern, "requestStage": "Request"}]
        await cdp.send("Fetch.enable", {"patterns": patterns})

    def _on_paused(self, event: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._continue(event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _continue(self, event: dict[str, Any]) -> None:
        cdp = self._cdp
        if cdp is None:
            return
        request = event.get("request", {})
        url = str(request.get("url", ""))
        params: dict[str, Any] = {"requestId": event["requestId"]}
        if self._origin is not None and origin_of(url) == self._origin and self._page_on_origin():
            given: dict[str, str] = dict(request.get("headers") or {})
            cookie = next((v for k, v in given.items() if k.lower() == "cookie"), None)
            mine = self._credentials.request_headers(cookie)
            names = {k.lower() for k in mine}
            fields = {k: v for k, v in given.items() if k.lower() not in names}
            fields.update(mine)
            params["headers"] = [{"name": k, "value": v} for k, v in fields.items()]
            self.sent.append(url)
        # The page may be closing under us: a request it no longer has is not an error.
        # (Suppressed whole: an error here must never carry the fields into a log.)
        with contextlib.suppress(Exception):
            await cdp.send("Fetch.continueRequest", params)

    def _page_on_origin(self) -> bool:
        page_url = self._page.url
        return page_url in ("", "about:blank") or origin_of(page_url) == self._origin

    async def close(self) -> None:
        """Stop adding; the context's close ends the session and whatever is paused."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._cdp = None
