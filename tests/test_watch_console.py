"""The console's Watches view in real headless Chromium against a real `sift serve`: add a
watch through the form, see it listed, open it, see its checks, delete it — under the
console's CSP, with no request leaving the server's origin (the ``fleet`` helpers check)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browserhelpers import CHROMIUM, require_browser
from consolehelpers import SHOTS, Watch, api, new_context, shot, sign_in
from servehelpers import Served, sift_serve, write_config
from syncupstream import SyncUpstream, serve_pages

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages({"/price": ("<p>price: 10 <b>&lt;script&gt;</b></p>", "text/html")}) as up:
        yield up


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp: Path = tmp_path_factory.mktemp("watch-console")
    extra = "min_interval_s = 1\n[watch]\ntick_s = 0.05\njitter_s = 0\n"
    with sift_serve(tmp, config=write_config(tmp, extra)) as s:
        yield s


@pytest.fixture
def fleet(served: Served) -> Iterator[tuple[Any, Watch]]:
    require_browser()
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM)
        context, page, watch = new_context(chromium, served.base_url)
        sign_in(page, served.base_url, served.fleet_key)
        yield page, watch
        context.close()
        chromium.close()
    assert watch.foreign == []
    assert watch.problems == []


def test_add_list_show_and_delete_a_watch(
    fleet: tuple[Any, Watch], served: Served, upstream: SyncUpstream
) -> None:
    page, _ = fleet
    url = f"{upstream.base_url}/price"
    page.click("nav >> text=Watches")
    page.locator("#page-watches").wait_for()
    page.locator("#watches-empty").wait_for()
    page.fill("#watch-url", url)
    page.fill("#watch-every", "1s")
    page.fill("#watch-ignore", ".clock")
    page.click("#watch-go")
    page.wait_for_url(re.compile(r"#/watches/[0-9a-f]{24}$"))
    wid = page.url.rsplit("/", 1)[1]
    # The scheduler checks it at once; the page polls and shows the check.
    page.locator("#watch-events li[data-seq='1']").wait_for()
    first = page.locator("#watch-events li[data-seq='1']").inner_text()
    assert " HTTP 200" in first and first.startswith("#1 ")
    assert page.locator("#watch-view dd.url").first.inner_text() == url
    assert page.locator("#watch-view code").inner_text() == ".clock"
    shot(page, "watch")
    page.click("nav >> text=Watches")
    page.locator(f"#watches-table tr[data-watch='{wid}']").wait_for()
    assert page.locator(f"#watches-table tr[data-watch='{wid}'] a").inner_text() == url
    page.click(f"#watches-table tr[data-watch='{wid}'] a")
    page.locator("#watch-delete").wait_for()
    page.click("#watch-delete")
    page.wait_for_url(re.compile(r"#/watches$"))
    page.locator("#watches-empty").wait_for()
    gone = api(served, "GET", f"/v1/watches/{wid}", served.fleet_key)
    assert gone.status_code == 404
