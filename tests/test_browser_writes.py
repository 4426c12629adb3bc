"""A restricted caller's page may read other origins but never write to them (issue 24,
finding 9): real Chromium, two loopback origins (one name, two ports), a canary counting
what arrives.

The page tries every way a page has to send a body elsewhere — fetch and XMLHttpRequest
(also from a dedicated worker), a PUT with its preflight, a form posted into a frame,
``sendBeacon``, a CSP violation report, and a same-origin POST that the page's own server
redirects (307) to the other origin. For a restricted caller none of them arrives; the
page's cross-origin GET and its same-origin POST do. The same page for a fleet caller is
the control: there every write arrives, so the test can fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from apphelpers import PUBLIC_HOST, PUBLIC_NAME
from browserhelpers import require_browser
from sift.browser import Browser
from sift.browser.writes import is_cross_origin_write, origin_of
from sift.config import BrowserSettings
from sift.fetch import Fetcher, StaticResolver, restricted_policy
from upstream import Upstream

WRITES = {"/fetch", "/put", "/xhr", "/worker", "/form", "/beacon", "/csp", "/redirected"}


def page_html(canary: str) -> str:
    return f"""<!doctype html><html><head><title>writes</title>
<style>p {{ color: red }}</style></head><body><p>writer</p>
<form id=f method=post action="{canary}/form" target=fr><input name=a value=b></form>
<iframe name=fr id=fr></iframe>
<script>
const C = "{canary}";
const done = (p) => p.then(() => 0, () => 0);
const frame = new Promise(r => document.getElementById('fr').addEventListener('load', r));
const jobs = [
  done(fetch(C + '/fetch', {{method: 'POST', mode: 'no-cors', body: 'x'}})),
  done(fetch(C + '/put', {{method: 'PUT', body: 'x'}})),
  new Promise(r => {{ const x = new XMLHttpRequest(); x.open('POST', C + '/xhr');
                     x.onloadend = r; x.send('x'); }}),
  done(fetch('/redir', {{method: 'POST', mode: 'no-cors', body: 'r'}})),
  done(fetch('/same', {{method: 'POST', body: 'same'}})),
  done(fetch(C + '/read', {{mode: 'no-cors'}})),
  new Promise(r => {{ const w = new Worker('/w.js'); w.onmessage = r; }}),
  Promise.race([frame, new Promise(r => setTimeout(r, 3000))]),
];
navigator.sendBeacon(C + '/beacon', 'b');
document.getElementById('f').submit();
Promise.all(jobs).then(() => {{
  const note = '<p id=done>shared worker: ' + typeof SharedWorker + '</p>';
  document.body.insertAdjacentHTML('beforeend', note);
}});
</script></body></html>"""


def worker_js(canary: str) -> str:
    return (
        f"fetch('{canary}/worker', {{method: 'POST', mode: 'no-cors', body: 'w'}})"
        ".catch(() => 0).then(() => postMessage('done'));"
    )


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent="sift-test",
        resolver=StaticResolver({}),
        extra_public_cidrs=["127.0.1.0/24"],
        static_hosts={PUBLIC_NAME: [PUBLIC_HOST]},
    ) as f:
        yield f


async def _ok(request: web.Request) -> web.StreamResponse:
    await request.read()
    return web.Response(text="ok")


def test_what_counts_as_a_cross_origin_write() -> None:
    page = "https://Example.org/app"
    assert origin_of(page) == ("https", "example.org", 443)
    assert origin_of("about:blank") is None
    assert not is_cross_origin_write("GET", "https://other.org/", page)
    assert not is_cross_origin_write("head", "https://other.org/", page)
    assert not is_cross_origin_write("POST", "https://example.org:443/api", page)
    assert is_cross_origin_write("POST", "https://example.org:8443/api", page)
    assert is_cross_origin_write("POST", "http://example.org/api", page)  # scheme differs
    assert is_cross_origin_write("OPTIONS", "https://other.org/", page)
    assert is_cross_origin_write("POST", "https://other.org/", "about:blank")  # opaque


@pytest.mark.slow
async def test_a_restricted_page_cannot_post_to_another_origin(fetcher: Fetcher) -> None:
    require_browser()
    async with Upstream(host=PUBLIC_HOST) as site, Upstream(host=PUBLIC_HOST) as canary:
        other = f"http://{PUBLIC_NAME}:{canary.port}"
        canary.route("/", _ok, prefix=True)
        csp = f"style-src 'none'; report-uri {other}/csp"
        site.page("/", page_html(other), headers={"Content-Security-Policy": csp})
        site.page("/w.js", worker_js(other), content_type="text/javascript")
        site.redirect("/redir", f"{other}/redirected", status=307)
        site.route("/same", _ok)
        browser = Browser(BrowserSettings(), fetcher)
        policy = restricted_policy(extra_ports=frozenset({site.port, canary.port}), timeout_s=30)

        async def load(caller_class: str) -> Any:
            return await browser.load(
                f"http://{PUBLIC_NAME}:{site.port}/",
                policy,
                caller="agent",
                caller_pages=1,
                caller_class=caller_class,
                deadline_s=25,
            )

        def arrived() -> set[str]:
            return {r.path_qs for r in canary.requests if r.method not in ("GET", "HEAD")}

        try:
            # The control: a fleet page's writes all arrive.
            page = await load("fleet")
            assert b'<p id="done">shared worker: undefined</p>' in page.body
            assert arrived() == WRITES
            assert {"/read", "/same"} <= set(site.hits) | set(canary.hits)
            canary.requests.clear()
            canary.hits.clear()
            site.hits.clear()
            # The same page for a restricted caller: no write leaves the browser.
            page = await load("restricted")
            assert b'<p id="done">shared worker: undefined</p>' in page.body
            assert arrived() == set()
            assert canary.hits["/read"] == 1  # reading another origin still works
            assert site.hits["/same"] == 1  # and so does writing to the page's own
            assert browser.last_writes is not None
            refused = {
                r.split(" ", 1)[0] + " " + r.rsplit("/", 1)[1] for r in browser.last_writes.refused
            }
            assert {
                "POST fetch",
                "OPTIONS put",
                "POST xhr",
                "POST worker",
                "POST form",
                "POST beacon",
                "POST redirected",
                "POST csp",
            } == refused, refused
        finally:
            await browser.close()
