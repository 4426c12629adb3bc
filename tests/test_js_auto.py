"""``engine: "auto"`` on real JavaScript apps: real production builds, real Chromium, loopback.

Each app under ``tests/fixtures/jsapps/`` (made by ``build.sh`` there with pinned versions:
React, Vue and Svelte with Vite, Angular's CLI, a Next.js static export rendered on the
client, and a plain ``document.write``/``innerHTML`` page) is served as built under
``/<name>/``. Over plain HTTP its visible text is empty; ``auto`` must notice, load it in the
browser, say why (``browser_used:<reason>``) and return exactly the sentence the app renders
(``texts.json``). A content-rich page carrying heavy scripts (bundles, module scripts, JSON
state, an empty widget mount) must stay on HTTP with no warning. The detector's rules one by
one are in ``tests/test_jsshell.py``.
"""

from __future__ import annotations

import dataclasses
import json
import mimetypes
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from apphelpers import PUBLIC_HOST, PUBLIC_NAME, RESTRICTED_KEY, auth, make_settings, running_app
from browserhelpers import require_browser
from upstream import Upstream

pytestmark = pytest.mark.slow

APPS_DIR = Path(__file__).parent / "fixtures" / "jsapps"
TEXTS: dict[str, str] = json.loads((APPS_DIR / "texts.json").read_text("utf-8"))
# Why auto used the browser, per app: the rule of render/jsshell.py that fires first.
REASONS = {
    "react": "noscript_only",  # Create-React-App's "enable JavaScript" line is the only text
    "vue": "empty_mount",
    "svelte": "empty_mount",
    "angular": "empty_mount",  # <app-root></app-root>: a custom element
    "next": "empty_mount",  # the client component's placeholder <div id="app-shell">
    "plain": "script_written",
}
APPS = [name for name in REASONS if (APPS_DIR / name / "index.html").exists()]

ARTICLE = " ".join(
    f"Paragraph {i}: the survey of the northern coast recorded tides, winds and the "
    "depth of every channel the boats could use between the islands."
    for i in range(12)
)
# Server-rendered text with everything a modern page also loads: bundles, a module entry,
# a module preload, hydration state, analytics inline code and an empty widget mount.
RICH_PAGE = (
    "<!doctype html><html><head><title>Coast survey</title>"
    '<script src="/static/vendor.js"></script><script src="/static/app.js" defer></script>'
    '<script type="module" src="/static/entry.js"></script>'
    '<link rel="modulepreload" href="/static/chunk.js">'
    "<script>window.__STATE__ = " + json.dumps({"items": list(range(400))}) + ";</script>"
    "</head><body><div id='root'><header><a href='/'>Home</a></header>"
    f"<article><h1>Coast survey</h1><p>{ARTICLE}</p></article></div>"
    "<div id='comments-widget'></div>"
    "<script>" + "document.getElementById('x') && track('view');" * 300 + "</script>"
    "</body></html>"
)


def _serve_dir(up: Upstream, name: str) -> None:
    root = APPS_DIR / name

    async def handler(request: web.Request) -> web.StreamResponse:
        rel = request.path.removeprefix(f"/{name}/") or "index.html"
        path = (root / rel).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return web.Response(status=404)
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return web.Response(body=path.read_bytes(), content_type=kind)

    up.route(f"/{name}/", handler, prefix=True)


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as up:
        for name in APPS:
            _serve_dir(up, name)
        up.page("/rich", RICH_PAGE)
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


async def fetch(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    r = await client.post("/v1/fetch", json=body, headers=auth(RESTRICTED_KEY))
    assert r.status_code == 200, r.text
    env: dict[str, Any] = r.json()
    return env


def test_every_framework_was_built() -> None:
    """The committed builds are all there (build.sh makes them; none is skipped)."""
    assert list(REASONS) == APPS


async def test_auto_renders_each_app_in_the_browser(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    for name in APPS:
        target = f"http://{PUBLIC_NAME}:{upstream.port}/{name}/"
        http = await fetch(sift, url=target, engine="http", format="text")
        assert TEXTS[name] not in http["content"], name
        assert "js_required_suspected" in http["warnings"], name
        env = await fetch(sift, url=target, format="text")
        assert (name, env["engine"]) == (name, "browser")
        assert TEXTS[name] in env["content"], (name, env["content"])
        assert env["warnings"] == [f"browser_used:{REASONS[name]}"], name


async def test_content_rich_page_with_heavy_scripts_stays_on_http(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    env = await fetch(sift, url=f"http://{PUBLIC_NAME}:{upstream.port}/rich", format="text")
    assert (env["engine"], env["warnings"]) == ("http", [])
    assert env["content"] == ARTICLE
    assert upstream.hits["/static/vendor.js"] == 0  # no browser ever loaded it


async def test_a_class_without_the_browser_is_told_why(tmp_path: Path, upstream: Upstream) -> None:
    """``classes.<class>.browser = false``: auto stays on HTTP and says so (no Chromium needed:
    the class is refused before the browser is looked at)."""
    settings = make_settings(tmp_path, upstream_port=upstream.port)
    classes = dataclasses.replace(
        settings.classes, restricted=dataclasses.replace(settings.classes.restricted, browser=False)
    )
    settings = dataclasses.replace(settings, classes=classes)
    async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
        env = await fetch(client, url=f"http://{PUBLIC_NAME}:{upstream.port}/vue/")
    assert (env["engine"], env["content"]) == ("http", "")
    assert env["warnings"] == ["js_required_suspected", "browser_not_allowed"]
