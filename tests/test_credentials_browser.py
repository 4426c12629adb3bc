"""Caller headers and cookies in real Chromium: only on requests to the page's origin.

Two loopback origins on one host name, two ports — the hard case for cookies, whose jar is
keyed by host alone. The origin's page loads a script, a stylesheet, a frame and fetches
from the other origin, fetches its own API, and fetches a path of its own that redirects to
the other origin; it also has a cookie of its own, set by its server. The origin must see
the caller's headers and cookies (and its own cookie beside them); the other origin must
see none of them, on any request. A page whose top-level load is redirected to the other
origin sends them nowhere after, not even back to the origin. Both for a fleet caller and
for a restricted one (whose page also runs the write guard: both DevTools gates at once).
Through the app: the browser result is private, and no secret reaches a log or an error.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from apphelpers import (
    FLEET2_KEY,
    FLEET_KEY,
    PUBLIC_HOST,
    PUBLIC_NAME,
    auth,
    make_settings,
    running_app,
)
from browserhelpers import require_browser
from sift.browser import Browser
from sift.config import BrowserSettings
from sift.fetch import Fetcher, StaticResolver, restricted_policy
from sift.fetch.credentials import Credentials
from upstream import Upstream

pytestmark = pytest.mark.slow

TOKEN = "tok-Br0wserQ8"
COOKIE = "ck-Br0wserK3"
SECRETS = (TOKEN, COOKIE)
CREDS = Credentials(
    headers=(("Authorization", f"Bearer {TOKEN}"), ("X-Tenant", "blue")),
    cookies=(("sid", COOKIE),),
)
MEMBER = "Member area: the balance is 42 coins."
GUEST = "Please log in first."


def page_html(other: str) -> str:
    return f"""<!doctype html><html><head><title>account</title>
<script src="{other}/lib.js"></script><link rel=stylesheet href="{other}/style.css">
</head><body><p>Account page</p><iframe src="{other}/frame"></iframe>
<script>
const quiet = (p) => p.then(() => 0, () => 0);
Promise.all([
  fetch('/api/me').then(r => r.text()).then(t => {{
    document.body.insertAdjacentHTML('beforeend', '<p id=me>' + t + '</p>'); }}),
  quiet(fetch('{other}/api', {{mode: 'no-cors', credentials: 'include'}})),
  quiet(fetch('/leak', {{mode: 'no-cors'}})),
  quiet(fetch('/same', {{method: 'POST', body: 'x'}})),
  quiet(fetch('{other}/post', {{method: 'POST', mode: 'no-cors', body: 'x'}})),
]).then(() => document.body.insertAdjacentHTML('beforeend', '<p id=done>done</p>'));
</script></body></html>"""


AWAY_HTML = """<!doctype html><html><body><p>Away</p><script>
fetch('{site}/api/me').then(r => r.text(), () => 'failed').then(t =>
  document.body.insertAdjacentHTML('beforeend', '<p id=done>' + t + '</p>'));
</script></body></html>"""


def logged_in(request: web.Request) -> bool:
    return (
        request.headers.get("Authorization") == f"Bearer {TOKEN}"
        and request.cookies.get("sid") == COOKIE
    )


def carries_none(headers: dict[str, str]) -> bool:
    return (
        "authorization" not in headers
        and "x-tenant" not in headers
        and not any(s in v for v in headers.values() for s in SECRETS)
    )


async def _me(request: web.Request) -> web.StreamResponse:
    text = MEMBER if logged_in(request) else GUEST
    return web.Response(text=text, headers={"Access-Control-Allow-Origin": "*"})


async def _ok(request: web.Request) -> web.StreamResponse:
    await request.read()
    return web.Response(text="ok", content_type="text/plain")


@pytest.fixture
async def origins() -> AsyncIterator[tuple[Upstream, Upstream]]:
    async with Upstream(PUBLIC_HOST) as site, Upstream(PUBLIC_HOST) as other:
        base = f"http://{PUBLIC_NAME}:{site.port}"
        away = f"http://{PUBLIC_NAME}:{other.port}"
        site.page("/", page_html(away), headers={"Set-Cookie": "srv=own; Path=/"})
        site.route("/api/me", _me)
        site.route("/same", _ok)
        site.redirect("/leak", f"{away}/leaked")
        site.redirect("/go", f"{away}/away")
        site.page("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
        other.page("/away", AWAY_HTML.format(site=base))
        other.route("/", _ok, prefix=True)
        yield site, other


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent="sift-test",
        resolver=StaticResolver({}),
        extra_public_cidrs=["127.0.1.0/24"],
        static_hosts={PUBLIC_NAME: [PUBLIC_HOST]},
    ) as f:
        yield f


@pytest.mark.parametrize("caller_class", ["fleet", "restricted"])
async def test_only_requests_to_the_origin_carry_them(
    caller_class: str, origins: tuple[Upstream, Upstream], fetcher: Fetcher
) -> None:
    require_browser()
    site, other = origins
    browser = Browser(BrowserSettings(), fetcher)
    policy = restricted_policy(extra_ports=frozenset({site.port, other.port}), timeout_s=30)
    url = f"http://{PUBLIC_NAME}:{site.port}/"
    try:
        page = await browser.load(
            url,
            policy,
            caller="agent",
            caller_pages=1,
            caller_class=caller_class,
            deadline_s=25,
            wait_for="#done",
            credentials=CREDS,
        )
        assert f'<p id="me">{MEMBER}</p>'.encode() in page.body
        paths = ["/", "/api/me", "/leak", "/same"]
        for path in paths:
            (h,) = [r.headers for r in site.requests if r.path_qs == path]
            assert (h["authorization"], h["x-tenant"]) == (f"Bearer {TOKEN}", "blue"), path
            want = f"sid={COOKIE}" if path == "/" else f"srv=own; sid={COOKIE}"
            assert h["cookie"] == want, path
        assert browser.last_gate is not None
        assert sorted(browser.last_gate.sent) == sorted(
            site.url(p, host=PUBLIC_NAME) for p in paths
        )
        seen = {r.path_qs for r in other.requests}
        expected = {"/lib.js", "/style.css", "/frame", "/api", "/leaked"}
        # A restricted page never writes to another origin (writes.py, still at work).
        assert seen == (expected if caller_class == "restricted" else expected | {"/post"})
        assert all(carries_none(r.headers) for r in other.requests)
        assert [r.headers.get("cookie") for r in other.requests if r.path_qs == "/api"] == [
            "srv=own"  # the page's own cookie (a host-keyed jar): never the caller's
        ]

        # Redirected away at the top: nothing after, not even a request back to the origin.
        site.requests.clear()
        other.requests.clear()
        away = await browser.load(
            site.url("/go", host=PUBLIC_NAME),
            policy,
            caller="agent",
            caller_pages=1,
            caller_class=caller_class,
            deadline_s=25,
            wait_for="#done",
            credentials=CREDS,
        )
        assert f'<p id="done">{GUEST}</p>'.encode() in away.body
        (go,) = [r.headers for r in site.requests if r.path_qs == "/go"]
        assert go["authorization"] == f"Bearer {TOKEN}"
        assert [carries_none(r.headers) for r in site.requests if r.path_qs == "/api/me"] == [True]
        assert other.requests and all(carries_none(r.headers) for r in other.requests)
    finally:
        await browser.close()


async def test_through_the_app_private_and_never_logged(
    tmp_path: Path, origins: tuple[Upstream, Upstream], caplog: pytest.LogCaptureFixture
) -> None:
    require_browser()
    site, other = origins
    caplog.set_level(logging.DEBUG)
    settings = make_settings(tmp_path)
    body: dict[str, Any] = {
        "url": site.url("/"),
        "engine": "browser",
        "wait_for": "#done",
        "headers": dict(CREDS.headers),
        "cookies": dict(CREDS.cookies),
    }
    async with (
        running_app(settings) as base,
        httpx.AsyncClient(base_url=base, timeout=60, headers=auth(FLEET_KEY)) as client,
    ):
        r = await client.post("/v1/fetch", json=body)
        assert r.status_code == 200, r.text
        assert (r.json()["engine"], MEMBER in r.json()["content"]) == ("browser", True)
        bare = {k: v for k, v in body.items() if k not in ("headers", "cookies")}
        r = await client.post("/v1/fetch", json=bare, headers=auth(FLEET2_KEY))
        assert (r.json()["cache"], GUEST in r.json()["content"]) == ("miss", True)
        assert [r.path_qs for r in site.requests].count("/api/me") == 2
        failed = await client.post("/v1/fetch", json={**body, "wait_for": "#never", "timeout_s": 2})
        assert failed.json()["error"]["code"] in ("browser_timeout", "upstream_timeout")
    records = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text}" for r in caplog.records)
    for where in (failed.text, caplog.text, records):
        assert not any(s in where for s in SECRETS)
    assert all(carries_none(r.headers) for r in other.requests)
