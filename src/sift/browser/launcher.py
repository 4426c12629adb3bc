"""One long-lived Chromium per process, driven by Playwright, relaunched when it dies.

Chromium is Debian's ``chromium-headless-shell``, started by executable path (Playwright's
own browser downloads are not used). It is launched with the flags below and with a
*deny-all* guard proxy at browser level, so traffic not tied to a page's context (updates,
time sync, autofill) goes nowhere; every page gets its own context with its own guard proxy
(``loader.py``).

State for ``/healthz``: ``absent`` (disabled, no Playwright, or no binary), ``ready``
(running, or not started yet and startable) or ``broken`` (the last launch failed; another
is tried at most every ``RELAUNCH_BACKOFF_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from sift.browser.netns import NetNamespace
from sift.browser.proxy import GuardProxy, ProxyLimits
from sift.browser.watchdog import find_browser_pid
from sift.config import BrowserSettings
from sift.errors import BrowserUnavailable
from sift.fetch import Fetcher

if TYPE_CHECKING:
    from playwright.async_api import Browser, Playwright

log = logging.getLogger("sift.browser")
BrowserState = Literal["absent", "ready", "broken"]
RELAUNCH_BACKOFF_S = 5.0
LAUNCH_TIMEOUT_S = 30.0

# Browser features that talk to Google or run in the background, whatever the page does.
_DISABLED_FEATURES = (
    "AutofillServerCommunication",
    "MediaRouter",
    "OptimizationHints",
    "Translate",
    "InterestFeedContentSuggestions",
    "CertificateTransparencyComponentUpdater",
    "DialMediaRouteProvider",
    # The Reporting API and Network Error Logging post reports from the network service,
    # where no page's request guard sees them (see writes.py).
    "Reporting",
    "NetworkErrorLogging",
)


WEBRTC_FLAGS = (
    # WebRTC's UDP ignores HTTP proxies. Full chromium reads the plain switch, headless-shell
    # only the --force- one (measured): pass both.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)


def chromium_flags(
    *, block_media: bool, heap_bytes: int, proxy_host: str, guard: bool = True
) -> list[str]:
    """Every switch sift adds to Playwright's defaults, each for a reason (docs/browser.md).

    ``guard=False`` (test-only: the canary test's control run) leaves out the WebRTC policy.
    """
    flags = [
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--disable-quic",  # QUIC is UDP, which no HTTP proxy carries
        *(WEBRTC_FLAGS if guard else ()),
        # The browser resolves nothing itself: every name goes to the proxy (which resolves
        # once and vets); anything trying to connect directly dies at resolution.
        f"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE {proxy_host}",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-domain-reliability",
        "--disable-sync",
        "--no-pings",
        "--disable-breakpad",
        "--deny-permission-prompts",
        "--disable-notifications",
        # No page opens another: a popup (a target=_blank link a page action clicks, a
        # form posting to a new window, window.open) is never created, so it sends nothing.
        "--block-new-web-contents",
        f"--disable-features={','.join(_DISABLED_FEATURES)}",
        # A shared worker runs outside its page's target, out of reach of the page's
        # request guard (writes.py); pages do not need one to show their text.
        "--disable-blink-features=SharedWorker",
        # A page allocating without end crashes its own tab, not the machine.
        f"--js-flags=--max-old-space-size={max(16, heap_bytes >> 20)}",
    ]
    if block_media:
        # Images and web fonts are never requested; audio and video never autoplay (a
        # media element may still fetch its metadata, within the page's byte budget).
        # Flags, not request interception: routing every request through Playwright
        # costs a driver round trip each (measured: a 3000-request page slowed ~3x).
        flags += [
            "--blink-settings=imagesEnabled=false",
            "--disable-remote-fonts",
            "--autoplay-policy=user-gesture-required",
        ]
    return flags


def playwright_available() -> bool:
    """Whether Playwright for Python is installed: looked up, not imported (its import costs
    every process that never opens a page ~0.1 s; it is imported at the first launch)."""
    try:
        return importlib.util.find_spec("playwright.async_api") is not None
    except ImportError:  # the lookup imports the (small) parent package
        return False


def absent_reason(settings: BrowserSettings) -> str | None:
    """Why no browser can run with ``settings`` at all, or ``None`` (nothing is launched)."""
    if not settings.enabled:
        return "the browser is disabled on this server (browser.enabled = false)"
    if not os.access(settings.executable, os.X_OK):
        return f"Chromium is not installed here ({settings.executable} not found)"
    if not playwright_available():
        return "Playwright for Python is not installed on this server"
    return None


class Launcher:
    """Owns Playwright, the browser process and the deny-all proxy. Not thread-safe; one
    per event loop. ``close`` is idempotent."""

    def __init__(
        self,
        settings: BrowserSettings,
        fetcher: Fetcher,
        *,
        clock: Callable[[], float] = time.monotonic,
        lab_args: tuple[str, ...] = (),
        guard: bool = True,
    ) -> None:
        self.settings = settings
        self._guard = guard
        # Test-only extra switches (e.g. letting WebRTC try loopback in a loopback-only lab,
        # so the canary test can see that it is stopped). No setting reaches them.
        self._lab_args = lab_args
        self._fetcher = fetcher
        self._clock = clock
        self._pw: Playwright | None = None
        self._browser: Browser | None = None
        self._deny: GuardProxy | None = None
        self._lock = asyncio.Lock()
        self._failed_at: float | None = None
        self._failure = ""
        self.netns: NetNamespace | None = None
        self._netns_tried = False
        self.launches = 0
        # Chromium's browser process, found by a marker switch on its command line: pages'
        # renderer processes are found under it (watchdog.py). None where /proc cannot say.
        self.browser_pid: int | None = None

    # -- state ---------------------------------------------------------------------------

    def absent_reason(self) -> str | None:
        """Why no browser can run here at all, or ``None``."""
        return absent_reason(self.settings)

    @property
    def state(self) -> BrowserState:
        if self.absent_reason() is not None:
            return "absent"
        if self._failed_at is not None and self._browser is None:
            return "broken"
        return "ready"

    @property
    def available(self) -> bool:
        return self.state != "absent"

    @property
    def proxy_host(self) -> str:
        return "127.0.0.1"

    # -- lifecycle -----------------------------------------------------------------------

    async def browser(self) -> Browser:
        """The running browser, launched (or relaunched) first if needed.

        Raises ``BrowserUnavailable`` with the reason when there is none to be had.
        """
        browser = self._browser
        if browser is not None and browser.is_connected():
            return browser
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            reason = self.absent_reason()
            if reason is not None:
                raise BrowserUnavailable(reason + ".")
            if self._failed_at is not None and self._clock() - self._failed_at < RELAUNCH_BACKOFF_S:
                raise BrowserUnavailable(f"The browser failed to start: {self._failure}")
            try:
                self._browser = await self._launch_with_fallback()
            except Exception as exc:  # anything Playwright or the OS raises: report, retry later
                self._failed_at, self._failure = self._clock(), _short(exc)
                log.error("browser launch failed: %s", self._failure)
                await self._teardown()
                await self._stop_driver()  # a dead driver is started afresh next time
                raise BrowserUnavailable(f"The browser failed to start: {self._failure}") from exc
            self._failed_at = None
            return self._browser

    async def _launch_with_fallback(self) -> Browser:
        """Launch; with ``netns = "auto"``, a launch that fails inside the namespace (say,
        a temp directory mounted noexec) is retried once without it."""
        try:
            return await self._launch()
        except Exception as exc:
            if self.netns is None or self.settings.netns != "auto":
                raise
            log.warning(
                "browser: launch in a network namespace failed (%s); retrying without", _short(exc)
            )
            self.netns.close()
            self.netns = None
            return await self._launch()

    async def _launch(self) -> Browser:
        from playwright.async_api import async_playwright

        await self._teardown()
        executable = self.settings.executable
        if self.settings.netns != "off" and not self._netns_tried:
            self._netns_tried = True
            try:
                self.netns = await asyncio.to_thread(NetNamespace.create, executable)
            except OSError as exc:
                if self.settings.netns == "on":
                    raise
                log.info("browser: no network namespace here (%s); the proxy alone guards", exc)
        if self.netns is not None:
            executable = str(self.netns.wrapper)
        # No budgets to spend: it refuses every request anyway (403, remembered nowhere).
        self._deny = GuardProxy(self._fetcher, None, ProxyLimits(1 << 62, 1 << 62, 1.0))
        deny_url = await self.start_proxy(self._deny)
        if self._pw is None:
            self._pw = await async_playwright().start()
        # An unknown switch, ignored by Chromium: it only marks this launch's process.
        marker = f"--sift-browser={secrets.token_hex(8)}"
        flags = chromium_flags(
            block_media=self.settings.block_media,
            heap_bytes=self.settings.page_heap_bytes,
            proxy_host=self.proxy_host,
            guard=self._guard,
        )
        async with asyncio.timeout(LAUNCH_TIMEOUT_S):
            browser = await self._pw.chromium.launch(
                executable_path=executable,
                args=[*flags, marker, *self._lab_args],
                proxy={"server": deny_url, "bypass": "<-loopback>"},
                # As root Chromium refuses to run sandboxed; run sift as a user to keep it.
                chromium_sandbox=os.geteuid() != 0,
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
        self.launches += 1
        self.browser_pid = await asyncio.to_thread(find_browser_pid, marker)
        browser.on("disconnected", self._on_disconnect)
        log.info(
            "browser: Chromium %s started%s",
            browser.version,
            " in its own network namespace" if self.netns else "",
        )
        return browser

    async def start_proxy(self, proxy: GuardProxy) -> str:
        """Start ``proxy`` where the browser can reach it (inside its namespace, if any)."""
        if self.netns is None:
            return await proxy.start(self.proxy_host)
        sock = await asyncio.wrap_future(self.netns.listener())
        await proxy.start_on(sock)
        return f"http://{self.proxy_host}:{sock.getsockname()[1]}"

    def _on_disconnect(self, browser: Any) -> None:
        if browser is self._browser:
            log.warning("browser: Chromium exited; it is relaunched for the next page")
            self._browser = None

    def forget(self) -> None:
        """Drop a browser that no longer answers (the next page relaunches it)."""
        browser, self._browser = self._browser, None
        if browser is not None:
            task = asyncio.ensure_future(_close_quietly(browser))
            task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def _teardown(self) -> None:
        browser, self._browser = self._browser, None
        if browser is not None:
            await _close_quietly(browser)
        if self._deny is not None:
            await self._deny.close()
            self._deny = None

    async def _stop_driver(self) -> None:
        if self._pw is not None:
            with contextlib.suppress(Exception):
                await self._pw.stop()
            self._pw = None

    async def close(self) -> None:
        await self._teardown()
        await self._stop_driver()
        if self.netns is not None:
            self.netns.close()
            self.netns = None


async def _close_quietly(browser: Browser) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(10):
            await browser.close()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
