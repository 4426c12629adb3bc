"""The console's server side, over real HTTP against the real app (no browser here).

- the markdown sanitiser: hostile markdown comes out inert, exactly;
- security headers on the console's page, its assets and /docs; /docs is served from the
  package (its assets are here, nothing names another host);
- /console/whoami and /console/render: authentication as the API's, the render size bound;
- ``GET /v1/batch`` lists only the caller's jobs, newest first (the store method, on both
  backends, in test_dcache_batch.py);
- ``GET /v1/stats``: refused to restricted callers, exact numbers for a fleet caller;
- every file of console/static/ is in the wheel (package data).

The browser tests are in test_console_browser.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import subprocess
import sys
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from apphelpers import (
    FLEET2_KEY,
    FLEET_KEY,
    PUBLIC_HOST,
    RESTRICTED_KEY,
    auth,
    make_settings,
    running_app,
)
from sift.console.markdown import render_markdown
from sift.console.routes import RENDER_MAX_BYTES
from sift.console.security import CONSOLE_CSP, DOCS_CSP
from upstream import Upstream

STATIC = Path(__file__).resolve().parent.parent / "src" / "sift" / "console" / "static"


# -- the sanitiser --------------------------------------------------------------------------


def test_html_in_markdown_is_text_not_markup() -> None:
    md = '<script>alert(1)</script>\n\n<img src=x onerror="alert(2)"> and <b onclick=x>b</b>'
    assert render_markdown(md) == (
        "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
        '<p>&lt;img src=x onerror="alert(2)"&gt; and &lt;b onclick=x&gt;b&lt;/b&gt;</p>\n'
    )


def test_script_links_are_not_links_and_relative_ones_resolve() -> None:
    md = "[a](javascript:alert(1)) [b](data:text/html,x) [c](/next) [d](https://x.example/)"
    assert render_markdown(md, "https://site.example/dir/page") == (
        "<p>[a](javascript:alert(1)) [b](data:text/html,x) "
        '<a href="https://site.example/next" target="_blank" rel="noopener noreferrer">c</a> '
        '<a href="https://x.example/" target="_blank" rel="noopener noreferrer">d</a></p>\n'
    )
    # Without a page URL a relative link has nothing to resolve against: dropped.
    assert (
        render_markdown("[c](/next)")
        == '<p><a target="_blank" rel="noopener noreferrer">c</a></p>\n'
    )


def test_images_become_links_and_structure_survives() -> None:
    md = (
        '# T\n\n![a "q" <b>](http://i.example/x.png)\n\n'
        "| h |\n|---|\n| <i>v</i> |\n\n```\n<script>x</script>\n```"
    )
    assert render_markdown(md) == (
        "<h1>T</h1>\n"
        '<p><a href="http://i.example/x.png" target="_blank" rel="noopener noreferrer">'
        '[image: a "q" &lt;b&gt;]</a></p>\n'
        "<table>\n<thead>\n<tr>\n<th>h</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n"
        "<td>&lt;i&gt;v&lt;/i&gt;</td>\n</tr>\n</tbody>\n</table>\n"
        "<pre><code>&lt;script&gt;x&lt;/script&gt;\n</code></pre>\n"
    )


# -- the served app -------------------------------------------------------------------------


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Upstream]]:
    async with Upstream(host=PUBLIC_HOST) as up:
        up.page("/a", "<html><body><article><h1>A</h1><p>" + "words " * 80 + "</p></article>")
        up.page("/b", "plain text body", content_type="text/plain")
        settings = make_settings(tmp_path, upstream_port=up.port)
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=60) as client,  # a render worker starts
        ):
            yield client, up


def _security(r: httpx.Response, csp: str) -> None:
    assert r.headers["content-security-policy"] == csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert r.headers["x-frame-options"] == "DENY"


async def test_console_page_and_assets_carry_a_strict_policy(
    env: tuple[httpx.AsyncClient, Upstream],
) -> None:
    client, _ = env
    r = await client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    _security(r, CONSOLE_CSP)
    assert "script-src 'self';" in CONSOLE_CSP and "frame-ancestors 'none'" in CONSOLE_CSP
    assert "unsafe" not in CONSOLE_CSP
    # No inline script or style in the page: the policy would block it.
    assert re.findall(r"<script(?![^>]*\bsrc=)", r.text) == []
    assert "style=" not in r.text and "<style" not in r.text
    referenced = re.findall(r'(?:src|href)="(/console/[^"]+)"', r.text)
    assert sorted(referenced) == ["/console/app.js", "/console/console.css", "/console/icon.svg"]
    types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
    for path in [*referenced, *(f"/console/{p.name}" for p in STATIC.glob("*.js"))]:
        a = await client.get(path)
        assert a.status_code == 200, path
        _security(a, CONSOLE_CSP)
        assert a.headers["content-type"] == types.get(Path(path).suffix, "image/svg+xml")
    # JavaScript modules import only each other, relatively: nothing from another origin.
    for js in STATIC.glob("*.js"):
        for target in re.findall(r'from "([^"]+)"', js.read_text()):
            assert target.startswith("./") and (STATIC / target[2:]).is_file(), (js, target)
    missing = await client.get("/console/nope.js")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    # Pages are served at their own paths only.
    assert (await client.get("/console/index.html")).status_code == 404


async def test_docs_are_served_from_the_package(env: tuple[httpx.AsyncClient, Upstream]) -> None:
    client, _ = env
    r = await client.get("/docs")
    assert r.status_code == 200
    _security(r, DOCS_CSP)
    urls = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    assert "/docs/assets/swagger-ui-bundle.js" in urls and "/console/docs-init.js" in urls
    for u in urls:
        a = await client.get(u)
        assert a.status_code == 200, u
    bundle = await client.get("/docs/assets/swagger-ui-bundle.js")
    assert len(bundle.content) > 500_000  # the real Swagger UI, not a stand-in
    assert (await client.get("/redoc")).status_code == 404
    assert "/docs" not in (await client.get("/openapi.json")).json()["paths"]


async def test_whoami_authenticates_like_the_api(env: tuple[httpx.AsyncClient, Upstream]) -> None:
    client, _ = env
    r = await client.get("/console/whoami", headers=auth(FLEET_KEY))
    assert r.json() == {
        "caller": "indexer",
        "class": "fleet",
        "anonymous": False,
        "anonymous_mode": False,
    }
    _security(r, CONSOLE_CSP)
    r = await client.get("/console/whoami", headers=auth(RESTRICTED_KEY))
    assert (r.json()["caller"], r.json()["class"]) == ("agent", "restricted")
    for headers in ({}, auth("wrong")):
        r = await client.get("/console/whoami", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized"


async def test_whoami_in_anonymous_mode(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, callers=())
    async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
        r = await client.get("/console/whoami")
        assert r.json() == {
            "caller": "anonymous",
            "class": "restricted",
            "anonymous": True,
            "anonymous_mode": True,
        }
        # A browser page of this origin passes the Host/Origin guard; another site's does not.
        origin = {"Origin": base}
        ok = await client.post("/console/render", json={"markdown": "*x*"}, headers=origin)
        assert ok.json() == {"html": "<p><em>x</em></p>\n"}
        evil = {"Origin": "https://evil.example"}
        refused = await client.post("/console/render", json={"markdown": "x"}, headers=evil)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "origin_not_allowed"


async def test_render_is_bounded_and_checked(env: tuple[httpx.AsyncClient, Upstream]) -> None:
    client, _ = env
    h = auth(RESTRICTED_KEY)
    r = await client.post("/console/render", json={"markdown": "# t", "base_url": None}, headers=h)
    assert r.json() == {"html": "<h1>t</h1>\n"}
    r = await client.post("/console/render", json={"markdown": "x"})
    assert r.status_code == 401
    r = await client.post("/console/render", json={"markdown": 3}, headers=h)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_request"
    big = {"markdown": "x" * RENDER_MAX_BYTES}
    r = await client.post("/console/render", json=big, headers=h)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"
    # The refusal leaves the server working.
    r = await client.post("/console/render", json={"markdown": "ok"}, headers=h)
    assert r.json() == {"html": "<p>ok</p>\n"}


async def test_a_render_past_its_time_limit_is_killed(tmp_path: Path) -> None:
    base = make_settings(tmp_path)
    quick = dataclasses.replace(base.classes.restricted, render_timeout_s=2.0)
    settings = dataclasses.replace(
        base, classes=dataclasses.replace(base.classes, restricted=quick)
    )
    h = auth(RESTRICTED_KEY)
    async with running_app(settings) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        # A megabyte of "[" takes markdown-it-py tens of seconds: far past 2 s.
        r = await client.post("/console/render", json={"markdown": "[" * (1 << 20)}, headers=h)
        assert r.status_code == 504
        assert r.json()["error"]["code"] == "render_timeout"
        # The killed worker is replaced: the next render works.
        r = await client.post("/console/render", json={"markdown": "*ok*"}, headers=h)
        assert r.json() == {"html": "<p><em>ok</em></p>\n"}


# -- GET /v1/batch --------------------------------------------------------------------------


async def _wait_done(client: httpx.AsyncClient, job_id: str, key: str) -> dict[str, object]:
    for _ in range(500):
        view: dict[str, object] = (
            await client.get(f"/v1/batch/{job_id}", headers=auth(key))
        ).json()
        if view["status"] not in ("queued", "running"):
            return view
        await asyncio.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish")


async def test_job_list_is_the_callers_own_newest_first(
    env: tuple[httpx.AsyncClient, Upstream],
) -> None:
    client, up = env
    ids = []
    for n, key in enumerate((FLEET_KEY, FLEET2_KEY, FLEET_KEY)):
        r = await client.post(
            "/v1/batch",
            json={"targets": [up.url("/a"), up.url("/b")]},
            headers={**auth(key), "Idempotency-Key": f"k{n}"},
        )
        assert r.status_code == 202
        ids.append(r.json()["id"])
        await _wait_done(client, ids[-1], key)
    mine = (await client.get("/v1/batch", headers=auth(FLEET_KEY))).json()["items"]
    # created_at may tie within a second: newest first falls back to insertion order.
    assert [j["id"] for j in mine] == [ids[2], ids[0]]
    assert [(j["status"], j["targets_done"], j["counts"]["done"]) for j in mine] == [
        ("done", 2, 2),
        ("done", 2, 2),
    ]
    other = (await client.get("/v1/batch", headers=auth(FLEET2_KEY))).json()["items"]
    assert [j["id"] for j in other] == [ids[1]]
    assert (await client.get("/v1/batch", headers=auth(RESTRICTED_KEY))).json() == {"items": []}
    one = (await client.get("/v1/batch?limit=1", headers=auth(FLEET_KEY))).json()["items"]
    assert [j["id"] for j in one] == [ids[2]]
    for bad in ("0", "201", "x"):
        r = await client.get(f"/v1/batch?limit={bad}", headers=auth(FLEET_KEY))
        assert r.status_code == 422
        assert r.json()["error"]["code"] == "invalid_request"
    assert (await client.get("/v1/batch")).status_code == 401


# -- GET /v1/stats --------------------------------------------------------------------------


async def test_stats_for_fleet_only_with_exact_numbers(
    env: tuple[httpx.AsyncClient, Upstream],
) -> None:
    client, up = env
    for key in (RESTRICTED_KEY, "wrong"):
        r = await client.get("/v1/stats", headers=auth(key))
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized"
    assert (await client.get("/v1/stats")).status_code == 401
    h = auth(FLEET_KEY)
    for _ in range(3):
        assert (
            await client.post("/v1/fetch", json={"url": up.url("/a")}, headers=h)
        ).status_code == 200
    await client.post("/v1/fetch", json={"url": up.url("/b")}, headers=h)
    stats = (await client.get("/v1/stats", headers=h)).json()
    assert stats["cache"]["outcomes"] == {"hit": 2, "miss": 2, "revalidated": 0}
    assert stats["cache"]["totals"] == {"hit": 2, "miss": 2, "revalidated": 0}
    assert (stats["cache"]["robots"], stats["browser_pages"]) == (1, 0)
    assert stats["cache"]["pages"] == 2
    assert stats["cache"]["bodies"] == 2
    assert 0 < stats["cache"]["bytes"] <= stats["cache"]["max_bytes"]
    assert stats["batch"] == {
        "bytes": 0,
        "max_bytes": make_settings(Path("x")).batch.max_bytes,
        "jobs": 0,
        "live_jobs": 0,
    }
    assert set(stats) == {"version", "browser", "browser_pages", "now", "cache", "batch"}
    # Aggregates only: no URL of any caller in it.
    assert up.url("/") not in (await client.get("/v1/stats", headers=h)).text


# -- packaging ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_wheel_holds_every_console_asset(tmp_path: Path, repo_root: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",  # with the venv's setuptools: no download (loopback only)
            "--no-index",
            "-q",
            "-w",
            str(tmp_path),
            str(repo_root),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("sift_fetch-*.whl")  # the distribution: sift-fetch
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"sift/console/static/{p.name}" for p in STATIC.iterdir() if p.is_file()}
    assert len(expected) >= 10
    assert expected <= names, expected - names
