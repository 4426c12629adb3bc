"""Helpers of the console's browser tests: a watched browser context, signing in, calling
the API beside the page, and screenshots (build/console-screenshots/, gitignored)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from servehelpers import Served

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "build" / "console-screenshots"


@dataclass
class Watch:
    """What one browser context did: requests off this server, CSP reports, script errors."""

    base: str
    foreign: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    api_requests: list[tuple[str, str | None]] = field(default_factory=list)


def new_context(browser: Any, base: str, width: int = 1280) -> tuple[Any, Any, Watch]:
    watch = Watch(base)
    context = browser.new_context(viewport={"width": width, "height": 900}, accept_downloads=True)

    def route(r: Any) -> None:
        url = r.request.url
        if url.startswith(base) or url.startswith(("blob:", "data:")):
            r.continue_()
        else:  # nothing may leave for another origin: record and refuse
            watch.foreign.append(url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.set_default_timeout(15_000)

    def on_console(msg: Any) -> None:
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            watch.problems.append(msg.text)  # CSP violations are reported here

    def on_request(req: Any) -> None:
        if req.url.startswith((base + "/v1/", base + "/console/whoami", base + "/console/render")):
            watch.api_requests.append((req.url, req.headers.get("authorization")))

    page.on("console", on_console)
    page.on("pageerror", lambda exc: watch.problems.append(f"pageerror: {exc}"))
    page.on("dialog", lambda d: (watch.problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", on_request)
    return context, page, watch


def sign_in(page: Any, base: str, key: str) -> None:
    page.goto(base + "/")
    page.locator("#page-signin").wait_for()
    page.fill("#signin-key", key)
    page.click("#signin-form button[type=submit]")
    page.locator("#page-try").wait_for()


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def api(served: Served, method: str, path: str, key: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", **kw.pop("headers", {})}
    return httpx.request(method, served.base_url + path, headers=headers, timeout=30, **kw)


def field_text(page: Any, scope: str, name: str) -> str:
    return str(page.locator(f"{scope} [data-field='{name}']").inner_text()).strip()


def submit_job(page: Any, urls: list[str]) -> str:
    page.click("nav >> text=Jobs")
    page.locator("#page-jobs").wait_for()
    page.fill("#job-urls", "\n".join(urls))
    page.click("#job-go")
    page.wait_for_url(re.compile(r"#/jobs/[0-9a-f]+$"))
    return str(page.url.rsplit("/", 1)[1])
