"""The browser engine end to end: real Chromium, real local upstreams, loopback only.

- a JavaScript page whose text arrives by ``fetch()`` after 200 ms: ``http`` returns the
  shell with ``js_required_suspected``; ``auto`` and ``browser`` return the text;
- cache keys include the engine, continuation works on browser snapshots;
- bounds: a page that never finishes, one that allocates without end, one with thousands
  of subrequests, one opening popups — each ends in time with a clear outcome, and the
  next page loads;
- the browser killed mid-request: that request fails cleanly, the next one succeeds;
- no browser: ``engine=browser`` is ``browser_unavailable`` with how to install it, and
  ``auto`` stays HTTP with the warning ``browser_unavailable``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from apphelpers import (
    FLEET_KEY,
    PUBLIC_HOST,
    PUBLIC_NAME,
    RESTRICTED_KEY,
    auth,
    make_settings,
    running_app,
)
from browserhelpers import browser_pids, require_browser
from sift.browser import Browser
from sift.config import BrowserSettings
from sift.errors import BrowserFailed, BrowserTimeout, TooLarge
from sift.fetch import Fetcher, StaticResolver, restricted_policy
from upstream import Upstream

pytestmark = pytest.mark.slow

TEXT = "Rendered by JavaScript: the quarterly figures arrived after a short delay."
# Over 2000 characters of inline script and almost no text: a JavaScript shell.
JS_PAGE = f"""<!doctype html><html><head><title>Shell</title></head><body>
<div id="app">Loading…</div>
<script>
/* {"application bundle " * 120} */
setTimeout(async () => {{
  const data = await (await fetch("/data.json")).json();
  document.getElementById("app").innerHTML =
    "<article><h1>Figures</h1><p>" + data.text + "</p><p>" + data.more + "</p></article>";
}}, 200);
</script></body></html>"""
DATA = {"text": TEXT, "more": "A second paragraph, long enough to be main content for sure."}


def add_js_page(up: Upstream) -> None:
    up.page("/app", JS_PAGE)

    async def data(request: web.Request) -> web.StreamResponse:
        return web.json_response(DATA)

    up.route("/data.json", data)


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as up:
        add_js_page(up)
        yield up


@pytest.fixture
async def sift(tmp_path: Path, upstream: Upstream) -> AsyncIterator[httpx.AsyncClient]:
    require_browser()
    settings = make_settings(tmp_path, upstream_port=upstream.port)
    async with (
        running_app(settings) as base,
        httpx.AsyncClient(base_url=base, timeout=60) as client,
    ):
        yield client


def url(up: Upstream, path: str) -> str:
    return f"http://{PUBLIC_NAME}:{up.port}{path}"


async def fetch(client: httpx.AsyncClient, key: str, **body: Any) -> httpx.Response:
    return await client.post("/v1/fetch", json=body, headers=auth(key))


async def test_js_page_by_engine(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    target = url(upstream, "/app")
    http = (await fetch(sift, RESTRICTED_KEY, url=target, engine="http")).json()
    assert (http["engine"], http["content"]) == ("http", "Loading…")
    assert http["warnings"] == ["js_required_suspected"]
    assert upstream.hits["/data.json"] == 0

    # auto says why it used the browser: "Loading…" and a script that writes innerHTML.
    for engine, warnings in (("auto", ["browser_used:script_written"]), ("browser", [])):
        r = await fetch(sift, RESTRICTED_KEY, url=target, engine=engine)
        assert r.status_code == 200, r.text
        env = r.json()
        assert env["engine"] == "browser"
        assert env["content"] == f"# Figures\n\n{TEXT}\n\n{DATA['more']}"
        assert env["warnings"] == warnings
        assert env["final_url"] == target
    # auto loaded it (miss), browser found it cached (same egress scope, same engine)
    assert upstream.hits["/data.json"] == 1
    again = (await fetch(sift, RESTRICTED_KEY, url=target, engine="browser")).json()
    assert (again["cache"], again["engine"]) == ("hit", "browser")
    # The HTTP snapshot is still the HTTP one: the engine is part of every cache key.
    http2 = (await fetch(sift, RESTRICTED_KEY, url=target, engine="http")).json()
    assert (http2["cache"], http2["content"], http2["digest"]) == (
        "hit",
        "Loading…",
        http["digest"],
    )
    assert again["digest"] != http["digest"]

    # auto on a shell whose browser load fails (it navigates itself to loopback): the HTTP
    # result, fetched under the same guard, with a warning.
    upstream.page(
        "/shell-escapes",
        JS_PAGE.replace(
            "<body>",
            f'<body><meta http-equiv="refresh" content="0;url=http://127.0.0.1:{upstream.port}/">',
        ),
    )
    fallback = (await fetch(sift, RESTRICTED_KEY, url=url(upstream, "/shell-escapes"))).json()
    assert (fallback["engine"], fallback["warnings"]) == (
        "http",
        ["js_required_suspected", "browser_failed"],
    )

    health = (await sift.get("/healthz")).json()
    assert health["browser"] == "ready"
    metrics = (await sift.get("/metrics", headers=auth(FLEET_KEY))).text
    assert 'sift_browser_pages_total{result="ok"} 1.0' in metrics


async def test_continuation_on_a_browser_snapshot(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    target = url(upstream, "/app")
    first = (await fetch(sift, FLEET_KEY, url=target, engine="browser", max_bytes=20)).json()
    assert first["truncated"] is True
    rest = (
        await fetch(
            sift,
            FLEET_KEY,
            url=target,
            engine="browser",
            offset=first["next_offset"],
            digest=first["digest"],
            max_bytes=100_000,
        )
    ).json()
    assert first["content"] + rest["content"] == f"# Figures\n\n{TEXT}\n\n{DATA['more']}"
    assert (rest["engine"], rest["digest"]) == ("browser", first["digest"])
    # auto finds the browser snapshot by its digest too
    auto = (
        await fetch(
            sift, FLEET_KEY, url=target, offset=first["next_offset"], digest=first["digest"]
        )
    ).json()
    assert (auto["engine"], auto["content"]) == ("browser", rest["content"])


async def test_wait_for_and_blocked_top_level(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    target = url(upstream, "/app")
    env = (
        await fetch(sift, RESTRICTED_KEY, url=target, engine="browser", wait_for="article p")
    ).json()
    assert env["content"].startswith("# Figures")
    late = await fetch(
        sift, RESTRICTED_KEY, url=target, engine="browser", wait_for="#never", timeout_s=3
    )
    assert (late.status_code, late.json()["error"]["code"]) == (504, "browser_timeout")
    # A redirect from the pseudo-public page to loopback: refused inside the browser.
    upstream.redirect("/to-loopback", f"http://127.0.0.1:{upstream.port}/app")
    blocked = await fetch(sift, RESTRICTED_KEY, url=url(upstream, "/to-loopback"), engine="browser")
    assert (blocked.status_code, blocked.json()["error"]["code"]) == (403, "blocked_address")
    # The restricted caller's top-level URL is checked before the browser sees it.
    direct = await fetch(sift, RESTRICTED_KEY, url="http://127.0.0.1:1/", engine="browser")
    assert (direct.status_code, direct.json()["error"]["code"]) == (403, "blocked_address")
    bad = await fetch(sift, RESTRICTED_KEY, url=target, engine="http", wait_for="p")
    assert bad.json()["error"]["code"] == "invalid_request"


async def test_no_browser(tmp_path: Path, upstream: Upstream) -> None:
    settings = make_settings(tmp_path, upstream_port=upstream.port)
    settings = dataclasses.replace(
        settings, browser=BrowserSettings(executable=str(tmp_path / "no-chromium"))
    )
    async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
        r = await fetch(client, RESTRICTED_KEY, url=url(upstream, "/app"), engine="browser")
        assert r.status_code == 503
        error = r.json()["error"]
        assert error["code"] == "browser_unavailable"
        assert "apt-get install --no-install-recommends chromium-headless-shell" in error["hint"]
        auto = (await fetch(client, RESTRICTED_KEY, url=url(upstream, "/app"))).json()
        assert (auto["engine"], auto["warnings"]) == (
            "http",
            ["js_required_suspected", "browser_unavailable"],
        )
        assert (await client.get("/healthz")).json()["browser"] == "absent"


# -- bounds, at the browser itself ------------------------------------------------------


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent="sift-test",
        resolver=StaticResolver({}),
        extra_public_cidrs=["127.0.1.0/24"],
        static_hosts={PUBLIC_NAME: [PUBLIC_HOST]},
    ) as f:
        yield f


def hostile_routes(up: Upstream) -> None:
    async def never_ends(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        await resp.write(b"<html><body><p>start of a page that never ends")
        await asyncio.sleep(3600)
        return resp

    up.route("/never-ends", never_ends)
    up.page(
        "/memory",
        "<p>hungry</p><script>const a = []; for (;;) a.push(new Array(1e6).fill(1.5));</script>",
    )
    up.page(
        "/flood",
        "<p>flood</p><script>for (let i = 0; i < 3000; i++) fetch('/r/' + i);</script>",
    )
    up.route("/r/", _ok, prefix=True)
    up.page("/big-dom", "<p>big</p><script>document.body.append('x'.repeat(3 << 20));</script>")
    up.page("/big-bytes", "<p>heavy</p><script>fetch('/blob').then(r => r.text());</script>")
    up.page("/blob", b"y" * (3 << 20), content_type="text/plain")
    up.page(
        "/popups",
        "<p>popups</p><script>for (let i = 0; i < 50; i++) window.open('/app?' + i);</script>",
    )


async def _ok(request: web.Request) -> web.StreamResponse:
    return web.Response(text="r")


async def test_bounds_each_end_cleanly(upstream: Upstream, fetcher: Fetcher) -> None:
    require_browser()
    hostile_routes(upstream)
    settings = BrowserSettings(
        max_subresources=100,
        page_heap_bytes=64 << 20,
        max_dom_bytes=1 << 20,
        max_page_bytes=2 << 20,
    )
    browser = Browser(settings, fetcher)
    policy = restricted_policy(extra_ports=frozenset({upstream.port}), timeout_s=30)

    async def load(path: str, deadline_s: float = 20) -> Any:
        return await browser.load(
            url(upstream, path), policy, caller="agent", caller_pages=1, deadline_s=deadline_s
        )

    async def next_page_works() -> None:
        page = await load("/app")
        assert TEXT.encode() in page.body

    try:
        with pytest.raises(BrowserTimeout, match="within 3 s"):
            await load("/never-ends", deadline_s=3)
        await next_page_works()
        with pytest.raises(BrowserFailed, match="crashed"):
            await load("/memory", deadline_s=20)
        await next_page_works()
        with pytest.raises(TooLarge, match="more than 100 requests"):
            await load("/flood", deadline_s=25)
        assert sum(n for p, n in upstream.hits.items() if p.startswith("/r/")) < 100
        await next_page_works()
        with pytest.raises(TooLarge, match=r"DOM exceeds 1048576 bytes"):
            await load("/big-dom")
        with pytest.raises(TooLarge, match=r"moved more than 2097152 bytes"):
            await load("/big-bytes")
        await next_page_works()
        hits_before = upstream.hits["/app"]
        page = await load("/popups")
        assert b"<p>popups</p>" in page.body
        assert upstream.hits["/app"] == hits_before  # no popup ever loaded
        await next_page_works()
        assert browser.slots.open == 0
    finally:
        await browser.close()


async def test_browser_killed_mid_request(upstream: Upstream, fetcher: Fetcher) -> None:
    require_browser()
    arrived = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        arrived.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    upstream.route("/slow", slow)
    browser = Browser(BrowserSettings(), fetcher)
    policy = restricted_policy(extra_ports=frozenset({upstream.port}), timeout_s=30)

    async def load(path: str) -> Any:
        return await browser.load(
            url(upstream, path), policy, caller="agent", caller_pages=1, deadline_s=20
        )

    try:
        task = asyncio.ensure_future(load("/slow"))
        await asyncio.wait_for(arrived.wait(), 20)
        pids = browser_pids()
        assert pids, "no Chromium process found under this test"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrowserFailed, match="browser exited"):
            await task
        page = await load("/app")
        assert TEXT.encode() in page.body
        assert browser.launcher.launches == 2
    finally:
        await browser.close()


async def test_batch_targets_choose_their_engine(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    target = url(upstream, "/app")
    body = {
        "targets": [
            {"url": target, "options": {"wait_for": "article p"}},
            {"url": target, "options": {"engine": "http"}},
        ],
        "options": {"engine": "browser"},
    }
    r = await sift.post(
        "/v1/batch", json=body, headers={**auth(FLEET_KEY), "Idempotency-Key": "js-1"}
    )
    assert r.status_code in (200, 201, 202), r.text
    job = r.json()
    for _ in range(600):
        view = (await sift.get(f"/v1/batch/{job['id']}", headers=auth(FLEET_KEY))).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.05)
    assert view["status"] == "done", view
    items = (await sift.get(f"/v1/batch/{job['id']}/results", headers=auth(FLEET_KEY))).json()
    results = [i["result"] for i in items["items"]]
    assert [(e["engine"], e["content"]) for e in results] == [
        ("browser", f"# Figures\n\n{TEXT}\n\n{DATA['more']}"),
        ("http", "Loading…"),
    ]


async def test_proxy_listeners_are_off_limits(fetcher: Fetcher) -> None:
    """A guard proxy's listener is sift's own address while it listens: not even a caller
    allowed to reach loopback may point sift at it."""
    from sift.browser.proxy import GuardProxy, ProxyLimits
    from sift.errors import Blocked
    from sift.fetch import FetchPolicy

    fleet = FetchPolicy(allow_private=True)
    proxy = GuardProxy(fetcher, fleet, ProxyLimits(10, 1 << 20, 1.0))
    address = (await proxy.start()).removeprefix("http://")
    with pytest.raises(Blocked):
        fetcher.check_url(f"http://{address}/", fleet)
    await proxy.close()
    assert fetcher.check_url(f"http://{address}/", fleet).port == int(address.split(":")[1])


async def test_page_slots_per_caller_per_class_and_total() -> None:
    """Pages open at once: the caller's, its class's and the overall bound each hold a
    page back until a slot frees."""
    from sift.browser.limits import PageSlots

    slots = PageSlots(total=3)
    release = asyncio.Event()
    entered: list[str] = []

    async def page(caller: str, cls: str) -> None:
        async with slots.take(caller, 1, cls, 2):
            entered.append(caller)
            await release.wait()

    tasks = [
        asyncio.ensure_future(page(c, k))
        for c, k in [("a", "restricted"), ("a", "restricted"), ("b", "restricted"),
                     ("c", "restricted"), ("d", "fleet"), ("e", "fleet")]
    ]  # fmt: skip
    for _ in range(20):
        await asyncio.sleep(0)
    # a's second page waits for a; c waits for the class (a + b); e waits for the total.
    assert sorted(entered) == ["a", "b", "d"]
    assert slots.open == 3
    release.set()
    await asyncio.gather(*tasks)
    assert sorted(entered) == ["a", "a", "b", "c", "d", "e"]
    assert slots.open == 0


async def test_a_browser_that_cannot_start_is_broken(fetcher: Fetcher) -> None:
    require_browser()  # Playwright must be there; the "browser" is /bin/false
    from sift.errors import BrowserUnavailable

    browser = Browser(BrowserSettings(executable="/bin/false", netns="off"), fetcher)
    policy = restricted_policy()
    try:
        assert browser.state == "ready"  # startable, as far as anyone can tell yet
        with pytest.raises(BrowserUnavailable, match="failed to start"):
            await browser.load(
                "http://pub.test/", policy, caller="agent", caller_pages=1, deadline_s=20
            )
        assert browser.state == "broken"
    finally:
        await browser.close()


async def test_wait_for_pages_are_stored_under_their_url(
    sift: httpx.AsyncClient, upstream: Upstream, tmp_path: Path
) -> None:
    """The page entry of a wait_for load (a selector with spaces) keeps the page's URL."""
    target = url(upstream, "/app")
    env = (await fetch(sift, FLEET_KEY, url=target, engine="browser", wait_for="article p")).json()
    assert env["url"] == target
    with sqlite3.connect(tmp_path / "sift.db") as db:
        urls = {row[0] for row in db.execute("SELECT url FROM page")}
    assert urls == {target}
