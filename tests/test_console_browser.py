"""The web console in a real browser: Debian's Chromium driven by Playwright against a real
``sift serve`` and a local upstream, loopback only.

One server (fleet and restricted keys), one upstream and one browser for the module; a
fresh browser context (so a fresh session storage) per test. Every test also checks that
the page asked nothing of another origin (no CDN, no fonts) and broke no CSP rule.
Screenshots of every page go to build/console-screenshots/ (gitignored) for people to
look at.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browserhelpers import CHROMIUM, require_browser
from consolehelpers import SHOTS, Watch, api, field_text, new_context, shot, sign_in, submit_job
from servehelpers import Served, sift_serve
from syncupstream import SyncUpstream, serve_pages

pytestmark = pytest.mark.slow
LONG = "\n".join(
    f"<p>Paragraph {i}: " + "the quick brown fox jumps over the lazy dog " * 6 + "</p>"
    for i in range(40)
)
XSS = (
    "<html><head><title>Hostile</title></head><body><article><h1>Hostile page</h1>"
    "<p>Text &lt;script&gt;window.pwned=1&lt;/script&gt; and "
    '&lt;img src=x onerror="window.pwned=2"&gt; and a '
    '<a href="javascript:window.pwned=3">script link</a>, in a paragraph long enough to be '
    "the main content of this page for certain, with more words after it.</p>"
    "<pre><code>&lt;script&gt;window.pwned=4&lt;/script&gt;</code></pre>"
    '<img src="x" onerror="window.pwned=5" alt="bad">'
    "</article></body></html>"
)
PAGES = {
    "/article": (
        "<html lang='en'><head><title>An article</title><meta name='author' content='Ada "
        "Lovelace'><meta name='description' content='A long page to read in parts.'></head>"
        "<body><article><h1>Hello</h1>"
        f"<p>Some <b>bold</b> text.</p>{LONG}</article></body></html>",
        "text/html; charset=utf-8",
    ),
    "/plain": ("A plain text body.\n", "text/plain"),
    "/xss": (XSS, "text/html; charset=utf-8"),
    "/more": (
        "<html><head><title>More</title></head><body><article><h1>List</h1>"
        "<p id='first'>The first paragraph of a page that shows more on request.</p>"
        "<button id='more' onclick=\"document.getElementById('first').insertAdjacentHTML("
        "'afterend', '<p>A second paragraph the button added.</p>')\">More</button>"
        "</article></body></html>",
        "text/html; charset=utf-8",
    ),
}
HANG = frozenset({"/hang/1", "/hang/2", "/hang/3"})


def _site_page(title: str, *links: str) -> tuple[str, str]:
    items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    body = f"<h1>{title}</h1><p>The {title} page of a small site.</p><ul>{items}</ul>"
    return f"<html><head><title>{title}</title></head><body>{body}</body></html>", "text/html"


# A small site to crawl and map: /site/ links a, b, c; a links d (depth 2) and back home.
SITE = {
    "/site/": _site_page("Home", "a.html", "b.html", "c.html"),
    "/site/a.html": _site_page("A", "d.html", "/site/"),
    "/site/b.html": _site_page("B"),
    "/site/c.html": _site_page("C"),
    "/site/d.html": _site_page("D"),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages(
        {**PAGES, **SITE, **{p: ("late", "text/plain") for p in HANG}}, hang=HANG
    ) as up:
        yield up


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, upstream: SyncUpstream) -> Iterator[Served]:
    with sift_serve(tmp_path_factory.mktemp("console")) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


@pytest.fixture
def fleet(browser: Any, served: Served) -> Iterator[tuple[Any, Watch]]:
    context, page, watch = new_context(browser, served.base_url)
    sign_in(page, served.base_url, served.fleet_key)
    yield page, watch
    context.close()
    assert watch.foreign == []
    assert watch.problems == []


# -- sign in, try a URL, read on ----------------------------------------------------------


def test_sign_in_try_a_url_and_read_on(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    page, watch = fleet
    assert page.locator("#who").inner_text() == "ops · fleet"
    assert page.evaluate("sessionStorage.getItem('sift.key')") == served.fleet_key
    url = upstream.base_url + "/article"
    page.fill("#try-url", url)
    page.fill("#try-max", "1500")
    page.check("#try-fresh")
    page.click("#try-go")
    page.locator("#try-rendered h1").wait_for()
    assert field_text(page, "#try-result", "Status") == "200"
    assert field_text(page, "#try-result", "Cache").startswith("miss")
    assert field_text(page, "#try-result", "Title") == "An article"
    assert field_text(page, "#try-result", "Warnings") == "none"
    # The same request through the API now: the same snapshot, so the same slices.
    first = api(served, "POST", "/v1/fetch", served.fleet_key, json={"url": url, "max_bytes": 1500})
    env = first.json()
    assert env["cache"] == "hit" and env["truncated"] is True
    assert field_text(page, "#try-result", "Digest") == env["digest"]
    # The page's type and metadata, as the API gives them.
    assert env["metadata"] == {
        "description": "A long page to read in parts.",
        "author": "Ada Lovelace",
        "lang": "en",
    }
    assert field_text(page, "#try-result", "Page type") == env["page_type"] == "article"
    shown = page.locator("#try-result dl.metadata")
    assert shown.locator("dt").all_inner_texts() == ["description", "author", "lang"]
    assert shown.locator("dd").all_inner_texts() == [
        "A long page to read in parts.",
        "Ada Lovelace",
        "en",
    ]
    assert page.locator("#try-raw").text_content() == env["content"]
    assert page.locator("#try-rendered h1").inner_text() == "Hello"
    body = {"url": url, "max_bytes": 1500, "offset": env["next_offset"], "digest": env["digest"]}
    second = api(served, "POST", "/v1/fetch", served.fleet_key, json=body).json()
    page.click("#try-more")
    page.wait_for_function(
        "n => document.getElementById('try-raw').textContent.length === n",
        arg=len(env["content"]) + len(second["content"]),
    )
    assert page.locator("#try-raw").text_content() == env["content"] + second["content"]
    assert page.locator("#try-shown").inner_text() == (
        f"Showing {second['next_offset'] / 1024:.1f} KiB of {env['total_bytes'] / 1024:.1f} KiB"
    )
    shot(page, "try")
    # The key went only as a header, on every API call, and never into a URL.
    assert watch.api_requests
    for req_url, authorization in watch.api_requests:
        assert served.fleet_key not in req_url
        if authorization is None:  # only the sign-in page's "is a key needed?" question
            assert req_url == served.base_url + "/console/whoami"
        else:
            assert authorization == f"Bearer {served.fleet_key}", req_url
    assert served.fleet_key not in page.url


def test_try_with_page_actions(fleet: tuple[Any, Watch], upstream: SyncUpstream) -> None:
    page, _ = fleet
    page.fill("#try-url", upstream.base_url + "/more")
    page.click("#page-try summary")
    page.fill("#try-actions", "[{nope")  # refused in the page: nothing is sent
    page.click("#try-go")
    page.locator("#try-error").wait_for()
    assert page.locator("#try-error").inner_text().startswith("error: Page actions are not valid")
    page.fill("#try-actions", '[{"action": "hover"}]')  # refused by the server, step named
    page.click("#try-go")
    page.locator("#try-error .code").wait_for()
    assert (
        page.locator("#try-error")
        .inner_text()
        .startswith("invalid_request: invalid options: actions[0]: action: expected one of click, ")
    )
    page.fill("#try-actions", '[{"action": "click", "selector": "#more"}]')
    page.click("#try-go")
    page.locator("#try-result [data-field='Actions']").wait_for()
    assert field_text(page, "#try-result", "Engine") == "browser"
    assert re.fullmatch(r"click: done, \d+ ms", field_text(page, "#try-result", "Actions"))
    assert "A second paragraph the button added." in page.locator("#try-raw").text_content()
    assert upstream.hits["/more"] == 1  # the two refusals never reached it


def test_a_screenshot_beside_the_text(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    """Format screenshot: the picture (fetched with the key, shown as a data: image within
    the console's CSP) beside the rendered markdown, from one browser load."""
    page, watch = fleet
    page.fill("#try-url", upstream.base_url + "/article")
    page.select_option("#try-format", "screenshot")
    page.select_option("#try-engine", "browser")
    page.click("#try-go")
    img = page.locator("#try-shot")
    img.wait_for()
    page.wait_for_function("() => document.getElementById('try-shot').complete")
    size = img.evaluate("i => [i.naturalWidth, i.naturalHeight]")
    assert size == [1280, 720]
    assert page.locator("#try-rendered h1").inner_text() == "Hello"
    assert field_text(page, "#try-result", "Engine") == "browser"
    assert field_text(page, "#try-result", "Screenshot").startswith("png 1280×720, ")
    shots = [u for u, _ in watch.api_requests if "/v1/screenshots/sha256:" in u]
    assert len(shots) == 1
    shot(page, "try-screenshot")


def test_an_error_shows_code_message_and_hint(
    fleet: tuple[Any, Watch], served: Served, refused_port: int
) -> None:
    page, _ = fleet
    url = f"http://127.0.0.1:{refused_port}/nothing-listens"
    page.fill("#try-url", url)
    page.click("#try-go")
    page.locator("#try-error").wait_for()
    expected = api(served, "POST", "/v1/fetch", served.fleet_key, json={"url": url}).json()
    err = expected["error"]
    assert err["code"] == "connect_failed"
    assert page.locator("#try-error .code").inner_text() == "connect_failed"
    text = page.locator("#try-error").inner_text()
    assert err["hint"] in text
    assert page.locator("#try-result").is_hidden()


# -- jobs -----------------------------------------------------------------------------------


def test_submit_a_job_and_watch_it_reach_done(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    page, _ = fleet
    urls = [upstream.base_url + "/article", upstream.base_url + "/plain"]
    job_id = submit_job(page, urls)
    page.locator("#job-status .badge.done").wait_for()
    assert page.locator("#job-h").inner_text() == f"Job {job_id}"
    bar = page.locator("#job-view progress")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("2", "2")
    assert page.locator("[data-count=done]").inner_text().split() == ["done", "2"]
    rows = page.locator("#targets-table tbody tr")
    assert rows.count() == 2
    assert [rows.nth(i).locator("td.url").inner_text() for i in range(2)] == urls
    # View a result: the stored envelope, shown like "Try a URL".
    page.click("[aria-label='View the result of target 1']")
    page.locator("#target-raw").wait_for()
    assert page.locator("#target-raw").text_content() == "A plain text body.\n"
    assert field_text(page, "#target-result", "Final URL") == urls[1]
    shot(page, "job")
    # The list shows it, done, with a full progress bar.
    page.click("text=← All jobs")
    row = page.locator(f"#jobs-table tr[data-job='{job_id}']")
    row.wait_for()
    assert row.locator(".badge").inner_text() == "done"
    assert row.locator("progress").get_attribute("value") == "2"
    shot(page, "jobs")


def test_a_failed_targets_error_and_the_ndjson_download(
    fleet: tuple[Any, Watch],
    served: Served,
    upstream: SyncUpstream,
    tmp_path: Path,
    refused_port: int,
) -> None:
    page, _ = fleet
    closed = f"http://127.0.0.1:{refused_port}/gone"
    job_id = submit_job(page, [upstream.base_url + "/plain", closed])
    page.locator("#job-status .badge.partial").wait_for()
    row = page.locator("#targets-table tr[data-idx='1']")
    assert row.locator("code").inner_text() == "connect_failed"
    page.click("[aria-label='Error details of target 1']")
    page.locator("#target-error").wait_for()
    items = api(served, "GET", f"/v1/batch/{job_id}/results", served.fleet_key).json()["items"]
    err = items[1]["error"]
    assert err["code"] == "connect_failed"
    assert page.locator("#target-error .code").inner_text() == "connect_failed"
    assert err["message"] in page.locator("#target-error").inner_text()
    assert err["hint"] in page.locator("#target-error").inner_text()
    assert err["hint"] in row.inner_text()  # the table says what to do too
    # results.ndjson: fetched with the key, saved as a file, byte for byte the API's.
    with page.expect_download() as info:
        page.click("#job-download")
    download = info.value
    assert download.suggested_filename == f"{job_id}.ndjson"
    saved = tmp_path / "results.ndjson"
    download.save_as(saved)
    expected = api(served, "GET", f"/v1/batch/{job_id}/results.ndjson", served.fleet_key)
    assert saved.read_bytes() == expected.content
    assert [json.loads(line)["status"] for line in saved.read_text().splitlines()] == [
        "done",
        "failed",
    ]


def test_cancel_a_job(fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream) -> None:
    page, _ = fleet
    job_id = submit_job(page, [upstream.base_url + p for p in sorted(HANG)])
    page.locator("#job-status .badge.running").wait_for()
    cancel = page.locator("#job-cancel")
    assert cancel.is_enabled()
    # By keyboard: the live view redraws every second, and focus must stay on the button.
    cancel.focus()
    for _ in range(2):
        with page.expect_response(lambda r: r.url.endswith(f"/v1/batch/{job_id}")):
            pass
    page.locator("#job-status .badge.running").wait_for()
    assert page.evaluate("() => document.activeElement.id") == "job-cancel"
    page.keyboard.press("Enter")
    page.locator("#job-status .badge.cancelled").wait_for()
    assert page.locator("#job-cancel").is_disabled()
    view = api(served, "GET", f"/v1/batch/{job_id}", served.fleet_key).json()
    assert view["status"] == "cancelled"
    assert view["counts"]["cancelled"] == 3
    assert page.locator("[data-count=cancelled]").inner_text().split() == ["cancelled", "3"]


# -- crawls and maps ---------------------------------------------------------------------


def start_crawl(page: Any, url: str, max_pages: str, max_depth: str) -> str:
    page.click("nav >> text=Crawl & map")
    page.locator("#page-crawl").wait_for()
    page.fill("#crawl-url", url)
    page.fill("#crawl-max-pages", max_pages)
    page.fill("#crawl-max-depth", max_depth)
    page.select_option("#crawl-format", "text")
    page.click("#crawl-go")
    page.wait_for_url(re.compile(r"#/jobs/[0-9a-f]+$"))
    return str(page.url.rsplit("/", 1)[1])


def _targets(page: Any) -> list[tuple[str, str, str]]:
    rows = page.locator("#targets-table tbody tr")
    return [
        tuple(
            rows.nth(i).locator(sel).inner_text()
            for sel in ("[data-depth]", "[data-parent]", "td.url")
        )
        for i in range(rows.count())
    ]


def test_start_a_crawl_and_see_it_labelled(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    """Issue 21 #14: a crawl is started from the console and shown as a crawl — its start
    URL and limits, each page's depth and parent, and whether it reached max_pages."""
    page, _ = fleet
    site = upstream.base_url + "/site/"
    first_idem = page.input_value("#crawl-idem")
    capped = start_crawl(page, site, "3", "2")
    page.locator("#job-status .badge.done").wait_for()
    view = api(served, "GET", f"/v1/batch/{capped}", served.fleet_key).json()
    assert (view["kind"], view["targets_total"]) == ("crawl", 3)
    assert view["crawl"] == {
        "url": site, "scope": "prefix", "max_pages": 3, "max_depth": 2,
        "include": [], "exclude": [], "sitemap": True,
    }  # fmt: skip
    items = api(served, "GET", f"/v1/batch/{capped}/results", served.fleet_key).json()["items"]
    assert {i["result"]["format"] for i in items} == {"text"}  # the form's options went along
    assert page.locator("#job-h").inner_text() == f"Crawl {capped}"
    assert page.locator("#job-kind").inner_text() == "crawl"
    assert field_text(page, "#job-view", "Start URL") == site
    assert field_text(page, "#job-view", "Scope") == (
        "prefix (the start URL's host, at its path or below)"
    )
    assert field_text(page, "#job-view", "Max depth") == "2 links from the start page"
    assert field_text(page, "#job-view", "Pages") == (
        "max_pages reached the crawl stopped adding pages at 3; a larger max_pages may find more"
    )
    assert _targets(page) == [
        ("0", "start page", site), ("1", "#0", site + "a.html"), ("1", "#0", site + "b.html"),
    ]  # fmt: skip
    assert [(i["depth"], i["parent"]) for i in items] == [(0, None), (1, 0), (1, 0)]
    shot(page, "crawl-job")
    # The same site with room to spare: every page, no "reached" sign.
    assert page.input_value("#crawl-idem") not in ("", first_idem)  # a fresh key per crawl
    whole = start_crawl(page, site, "10", "2")
    page.locator("#job-status .badge.done").wait_for()
    assert field_text(page, "#job-view", "Pages") == "5 found, at most 10"
    assert page.locator("#job-view .tag.reached").count() == 0
    assert _targets(page) == [
        ("0", "start page", site), ("1", "#0", site + "a.html"), ("1", "#0", site + "b.html"),
        ("1", "#0", site + "c.html"), ("2", "#1", site + "d.html"),
    ]  # fmt: skip
    # The list labels both as crawls; only the first reached its max_pages.
    page.click("nav >> text=Jobs")
    for job_id, reached in ((capped, ["max_pages reached"]), (whole, [])):
        row = page.locator(f"#jobs-table tr[data-job='{job_id}']")
        row.wait_for()
        kind = row.locator("td.kind")
        assert kind.locator(".tag.crawl").inner_text() == "crawl"
        assert kind.locator(".tag.reached").all_inner_texts() == reached
        assert kind.locator(".url").inner_text() == site
    assert page.locator(f"#jobs-table tr[data-job='{capped}'] td.kind .muted").inner_text() == (
        "prefix · depth ≤ 2 · pages ≤ 3"
    )
    shot(page, "jobs")


def test_map_a_site_and_fetch_its_urls_as_a_batch(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    page, _ = fleet
    site = upstream.base_url + "/site/"
    page.click("nav >> text=Crawl & map")
    page.fill("#map-url", site)
    page.click("#map-go")
    page.locator("#map-urls").wait_for()
    expected = api(served, "POST", "/v1/map", served.fleet_key, json={"url": site}).json()
    assert expected["urls"] == [site, site + "a.html", site + "b.html", site + "c.html"]
    assert page.locator("#map-urls li").all_inner_texts() == expected["urls"]
    assert page.locator("#map-summary").inner_text() == "4 URLs; every URL found."
    # A limit below what the site has: the answer says it was cut.
    page.fill("#map-limit", "2")
    page.click("#map-go")
    page.wait_for_function("() => document.querySelectorAll('#map-urls li').length === 2")
    assert page.locator("#map-summary").inner_text() == (
        "2 URLs; more were found than the limit lets through."
    )
    shot(page, "map")
    page.click("#map-to-batch")
    page.locator("#page-jobs").wait_for()
    assert page.input_value("#job-urls") == f"{site}\n{site}a.html"


# -- who sees what --------------------------------------------------------------------------


def test_a_restricted_caller_sees_neither_fleet_jobs_nor_the_cache(
    browser: Any, served: Served, upstream: SyncUpstream
) -> None:
    secret = upstream.base_url + "/plain?fleet-only-target"
    r = api(
        served,
        "POST",
        "/v1/batch",
        served.fleet_key,
        json={"targets": [secret]},
        headers={"Idempotency-Key": "fleet-secret"},
    )
    fleet_job = r.json()["id"]
    context, page, watch = new_context(browser, served.base_url)
    try:
        sign_in(page, served.base_url, served.restricted_key)
        assert page.locator("#who").inner_text() == "agent · restricted"
        page.click("nav >> text=Jobs")
        page.locator("#jobs-empty").wait_for()
        assert fleet_job not in page.content() and secret not in page.content()
        # Opening the fleet job by its id answers exactly as a job that does not exist.
        page.goto(f"{served.base_url}/#/jobs/{fleet_job}")
        page.locator("#job-view-error").wait_for()
        assert page.locator("#job-view-error .code").inner_text() == "not_found"
        assert secret not in page.content()
        page.click("nav >> text=Cache & health")
        page.locator("#cache-restricted").wait_for()
        assert page.locator("#health-version").inner_text() == "0.1.0"
        assert page.locator("#cache-bar").count() == 0
        shot(page, "cache-restricted")
        assert all("/v1/stats" not in u for u, _ in watch.api_requests)
    finally:
        context.close()
    assert watch.foreign == [] and watch.problems == []


def test_the_anonymous_view(browser: Any, tmp_path: Path, upstream: SyncUpstream) -> None:
    cfg = tmp_path / "sift.toml"
    cfg.write_text("")  # no callers: anonymous restricted mode on loopback
    with sift_serve(tmp_path, config=(cfg, "", "")) as anon:
        context, page, watch = new_context(browser, anon.base_url)
        try:
            # No key needed: the console opens as the anonymous caller and says so.
            page.goto(anon.base_url + "/")
            page.locator("#page-try").wait_for()
            assert page.locator("#who").inner_text() == "anonymous · restricted"
            # Signed out, the sign-in page offers a key or going on without one.
            page.click("#signout")
            page.locator("#signin-anon").wait_for()
            shot(page, "signin-anonymous")
            page.click("#signin-anon-go")
            page.locator("#page-try").wait_for()
            assert page.locator("#who").inner_text() == "anonymous · restricted"
            # Loopback is no public address: the anonymous caller is refused, and told why.
            before = upstream.hits["/plain"]
            page.fill("#try-url", upstream.base_url + "/plain")
            page.click("#try-go")
            page.locator("#try-error").wait_for()
            assert page.locator("#try-error .code").inner_text() == "blocked_address"
            assert "What to do:" in page.locator("#try-error").inner_text()
            page.click("nav >> text=Jobs")
            page.locator("#jobs-empty").wait_for()
            assert upstream.hits["/plain"] == before  # refused before any connection
        finally:
            context.close()
        assert watch.foreign == [] and watch.problems == []
        # Same-origin requests passed the Host/Origin guard: none was refused.
        assert all(a is None for _, a in watch.api_requests)


# -- safety -------------------------------------------------------------------------------


def test_a_hostile_page_runs_no_script(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    page, watch = fleet
    for fmt in ("markdown", "html", "raw"):
        page.fill("#try-url", upstream.base_url + "/xss")
        page.select_option("#try-format", fmt)
        page.click("#try-go")
        page.locator("#try-raw").wait_for()
        if fmt == "markdown":
            page.locator("#try-rendered h1").wait_for()
            rendered = page.locator("#try-rendered")
            assert rendered.locator("script, img, iframe, [onerror], [onclick]").count() == 0
            assert "window.pwned=1" in rendered.inner_text()  # shown as text
            links = rendered.locator("a")
            hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
            assert all(h is None or h.startswith("http") for h in hrefs), hrefs
            for i in range(links.count()):
                if links.nth(i).inner_text() == "script link":
                    links.nth(i).click()
        raw = page.locator("#try-raw")
        assert raw.locator("*").count() == 0  # text only
        if fmt == "raw":
            assert raw.text_content() == XSS
        assert page.evaluate("typeof window.pwned") == "undefined", fmt
    assert [p for p in watch.problems if "pwned" in p] == []


def test_docs_work_offline(browser: Any, served: Served) -> None:
    context, page, watch = new_context(browser, served.base_url)
    try:
        page.goto(served.base_url + "/docs")
        page.locator(".opblock").first.wait_for()
        paths = api(served, "GET", "/openapi.json", served.fleet_key).json()["paths"]
        operations = sum(len(ops) for ops in paths.values())
        assert page.locator(".opblock").count() == operations
        shot(page, "docs")
    finally:
        context.close()
    assert watch.foreign == []
    assert watch.problems == []


def test_docs_authorize_then_try_it_out(browser: Any, served: Served) -> None:
    """/docs offers Authorize (the schema declares bearer auth, issue 21 §8), and "Try it
    out" then sends the key: the server, which has keys, answers 200, not 401."""
    context, page, watch = new_context(browser, served.base_url)
    try:
        page.goto(served.base_url + "/docs")
        page.locator("button.authorize").first.click()
        page.locator(".modal-ux input[type=text], .modal-ux input[type=password]").first.fill(
            served.fleet_key
        )
        page.locator(".modal-ux button.authorize").first.click()
        page.locator(".modal-ux button.btn-done").first.click()
        stats = page.locator("#operations-ops-stats_v1_stats_get")
        stats.locator(".opblock-summary").click()
        stats.locator("button.try-out__btn").click()
        stats.locator("button.execute").click()
        status = stats.locator(".live-responses-table .response .response-col_status")
        status.first.wait_for()
        assert status.first.inner_text().strip() == "200"
        assert (served.base_url + "/v1/stats", f"Bearer {served.fleet_key}") in watch.api_requests
    finally:
        context.close()
    assert watch.foreign == []
    assert watch.problems == []


def test_the_cache_page(fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream) -> None:
    page, _ = fleet
    api(served, "POST", "/v1/fetch", served.fleet_key, json={"url": upstream.base_url + "/plain"})
    page.click("nav >> text=Cache & health")
    page.locator("#cache-bar").wait_for()
    page.wait_for_function("() => document.querySelectorAll('#hit-chart circle').length >= 2")
    stats = api(served, "GET", "/v1/stats", served.fleet_key).json()
    bar = page.locator("#cache-bar")
    assert bar.get_attribute("max") == str(stats["cache"]["max_bytes"])
    assert int(bar.get_attribute("value")) == stats["cache"]["bytes"]
    o = stats["cache"]["outcomes"]
    answered = o["hit"] + o["miss"] + o["revalidated"]
    rate = round((o["hit"] + o["revalidated"]) / answered * 100)
    assert page.locator("#hit-rate").inner_text() == f"{rate} %"
    assert page.locator("#cache-fields [data-stat=pages]").inner_text() == str(
        stats["cache"]["pages"]
    )
    assert page.locator("#live-jobs").inner_text() == str(stats["batch"]["live_jobs"])
    shot(page, "cache")


# -- accessibility and small screens --------------------------------------------------------

UNNAMED = re.compile(
    r"^\s*- (textbox|combobox|checkbox|button|spinbutton|link|progressbar|region)(?! \")",
    re.M,
)
CONTROLS = (
    "a[href], button:not([disabled]), input:not([type=hidden]), select, textarea, [tabindex='0']"
)


def _check_page(page: Any, name: str) -> None:
    """Every control on the page has an accessible name and is reached by Tab."""
    tree = page.locator("body").aria_snapshot()
    assert UNNAMED.findall(tree) == [], f"{name}: unnamed controls in\n{tree}"
    total = page.evaluate(
        """sel => { let n = 0; for (const el of document.querySelectorAll(sel)) {
             if (el.offsetParent !== null || el.getClientRects().length) el.dataset.kb = n++; }
           return n; }""",
        CONTROLS,
    )
    page.evaluate("document.activeElement && document.activeElement.blur()")
    reached: set[str] = set()
    for _ in range(total + 5):
        page.keyboard.press("Tab")
        kb = page.evaluate("document.activeElement && document.activeElement.dataset.kb")
        if kb is not None:
            reached.add(kb)
    assert len(reached) == total, f"{name}: {total - len(reached)} controls not reached by Tab"


def test_every_control_is_labelled_and_keyboard_reachable(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    page, _ = fleet
    page.fill("#try-url", upstream.base_url + "/article")
    page.fill("#try-max", "1000")
    page.click("#try-go")
    page.locator("#try-rendered h1").wait_for()
    for summary in page.locator("#page-try summary").all():
        summary.click()  # open the page actions, so their field is checked too
    _check_page(page, "try")
    job_id = submit_job(page, [upstream.base_url + "/plain"])
    page.locator("#job-status .badge.done").wait_for()
    _check_page(page, "job")
    page.goto(f"{served.base_url}/#/jobs")
    page.locator(f"#jobs-table tr[data-job='{job_id}']").wait_for()
    _check_page(page, "jobs")
    page.goto(f"{served.base_url}/#/crawl")
    page.locator("#page-crawl").wait_for()
    for summary in page.locator("#page-crawl summary").all():
        summary.click()  # open the path filters, so their fields are checked too
    _check_page(page, "crawl")
    page.goto(f"{served.base_url}/#/cache")
    page.locator("#cache-bar").wait_for()
    _check_page(page, "cache")
    page.click("#signout")
    page.locator("#page-signin").wait_for()
    assert page.evaluate("sessionStorage.getItem('sift.key')") is None
    shot(page, "signin")
    _check_page(page, "signin")


def test_works_at_360_px(browser: Any, served: Served, upstream: SyncUpstream) -> None:
    context, page, watch = new_context(browser, served.base_url, width=360)
    try:
        sign_in(page, served.base_url, served.fleet_key)
        page.fill("#try-url", upstream.base_url + "/article")
        page.fill("#try-max", "1000")
        page.click("#try-go")
        page.locator("#try-rendered h1").wait_for()
        widths = {"try": page.evaluate("document.documentElement.scrollWidth")}
        shot(page, "try-360")
        for name in ("jobs", "cache"):
            page.goto(f"{served.base_url}/#/{name}")
            page.locator(f"#page-{name}").wait_for()
            page.wait_for_load_state("networkidle")
            widths[name] = page.evaluate("document.documentElement.scrollWidth")
            shot(page, f"{name}-360")
        assert widths == {"try": 360, "jobs": 360, "cache": 360}
    finally:
        context.close()
    assert watch.foreign == [] and watch.problems == []


# Every control and link inside the page's main part, with its box where it lies outside
# the viewport's width (left of 0 or right of innerWidth): clipped or scrolled out of view.
OFFSCREEN = """() => {
  const out = [];
  const controls = "main button, main a, main input, main select, main progress";
  for (const el of document.querySelectorAll(controls)) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;  // not displayed
    if (r.left < 0 || r.right > window.innerWidth)
      out.push(`${el.tagName} ${el.id || el.textContent.trim()}: ${r.left}..${r.right}`);
  }
  for (const wrap of document.querySelectorAll("main .table-wrap"))
    if (wrap.scrollWidth > wrap.clientWidth) out.push(`${wrap.id} scrolls: ${wrap.scrollWidth}`);
  return out;
}"""


WIDER = """() => [...document.querySelectorAll("body *")]
  .filter((el) => el.getBoundingClientRect().right > window.innerWidth
    || el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX === "visible")
  .map((el) => `${el.tagName}.${el.className} ${el.getBoundingClientRect().right} `
    + `${el.scrollWidth}/${el.clientWidth}: ${el.textContent.slice(0, 80)}`)"""


def settle_to_width(page: Any, width: int, timeout_ms: int = 10_000) -> None:
    """Wait until the document is no wider than ``width`` (a layout that never fits fails
    the assertions that follow once this gives up).

    Polled from here: ``page.wait_for_function`` polls its predicate in the page through
    ``eval()``, which the console's CSP refuses once the first look has failed (a loaded
    machine, a layout still settling); ``page.evaluate`` is not subject to it."""
    fits = f"() => document.documentElement.scrollWidth <= {width}"
    deadline = time.monotonic() + timeout_ms / 1000
    while not page.evaluate(fits) and time.monotonic() < deadline:
        page.wait_for_timeout(50)


def test_at_360_px_the_job_tables_keep_their_buttons_on_screen(
    browser: Any, served: Served, upstream: SyncUpstream, refused_port: int
) -> None:
    """Issue 21 #14: at 360 px the targets table clipped its buttons (they sat in a
    sideways-scrolling box, off screen). Every button and link of the job pages and the job
    list must lie inside the viewport, and no table may scroll sideways."""
    closed = f"http://127.0.0.1:{refused_port}/gone"
    body = {"url": upstream.base_url + "/site/", "max_pages": 3}
    idem = {"Idempotency-Key": "narrow-crawl"}
    crawl = api(served, "POST", "/v1/crawl", served.fleet_key, json=body, headers=idem).json()
    batch = api(
        served,
        "POST",
        "/v1/batch",
        served.fleet_key,
        json={"targets": [upstream.base_url + "/plain", closed]},
        headers={"Idempotency-Key": "narrow-batch"},
    ).json()
    context, page, watch = new_context(browser, served.base_url, width=360)
    try:
        sign_in(page, served.base_url, served.fleet_key)
        for job_id, status in ((crawl["id"], "done"), (batch["id"], "partial")):
            page.goto(f"{served.base_url}/#/jobs/{job_id}")
            page.locator(f"#job-status .badge.{status}").wait_for()
            assert page.locator("#targets-table button").count() >= 2
            # The page re-renders as its polls answer (on a busy machine a measure can fall
            # mid-render): the settled layout is what must fit, so wait for it, then check.
            settle_to_width(page, 360)
            assert page.evaluate(OFFSCREEN) == [], job_id
            assert page.evaluate("document.documentElement.scrollWidth") == 360, page.evaluate(
                WIDER
            )
            shot(page, f"job-{status}-360")
        page.goto(f"{served.base_url}/#/jobs")
        page.locator(f"#jobs-table tr[data-job='{crawl['id']}']").wait_for()
        assert page.evaluate(OFFSCREEN) == []
        assert page.evaluate("document.documentElement.scrollWidth") == 360
        shot(page, "jobs-crawl-360")
        page.goto(f"{served.base_url}/#/crawl")
        page.fill("#map-url", body["url"])
        page.click("#map-go")
        page.locator("#map-urls").wait_for()
        assert page.evaluate(OFFSCREEN) == []
        assert page.evaluate("document.documentElement.scrollWidth") == 360
        shot(page, "crawl-360")
    finally:
        context.close()
    assert watch.foreign == [] and watch.problems == []
