"""/v1/fetch over real HTTP against a local upstream: options, classes, cache, continuation."""

from __future__ import annotations

import asyncio
import dataclasses
import os
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
from sift.config import CacheSettings
from sift.render.pagekind import PAGE_TYPES
from upstream import Upstream

ARTICLE = """<!doctype html><html lang="en"><head><title>The Title</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>Heading</h1>
<p>First paragraph of the article, long enough to count as real content for the extractor.</p>
<p>Second paragraph with a <a href="/next">link to next</a> and <em>emphasis</em>.</p>
</article><footer>Copyright footer</footer></body></html>"""


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as up:
        up.page("/article", ARTICLE)
        yield up


@pytest.fixture
async def sift(tmp_path: Path, upstream: Upstream) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(tmp_path, upstream_port=upstream.port)
    async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
        yield client


def url(up: Upstream, path: str) -> str:
    return f"http://{PUBLIC_NAME}:{up.port}{path}"


async def fetch(client: httpx.AsyncClient, key: str, **body: Any) -> httpx.Response:
    return await client.post("/v1/fetch", json=body, headers=auth(key))


async def test_fetch_markdown_envelope(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    r = await fetch(sift, FLEET_KEY, url=url(upstream, "/article"))
    assert r.status_code == 200
    env = r.json()
    content = (
        "# Heading\n\nFirst paragraph of the article, long enough to count as real content for "
        f"the extractor.\n\nSecond paragraph with a [link to next]({url(upstream, '/next')}) "
        "and *emphasis*."
    )
    assert env == {
        "url": url(upstream, "/article"),
        "final_url": url(upstream, "/article"),
        "status": 200,
        "content_type": "text/html; charset=utf-8",
        "title": "The Title",
        "lang": "en",
        "format": "markdown",
        "content": content,
        "offset": 0,
        "bytes": len(content.encode()),
        "total_bytes": len(content.encode()),
        "truncated": False,
        "next_offset": None,
        "fetched_at": env["fetched_at"],
        "cache": "miss",
        "digest": env["digest"],
        "engine": "http",
        "page_type": env["page_type"],  # the shipped model's verdict: one of the types
        "metadata": {"lang": "en"},
        "warnings": [],
    }
    assert env["page_type"] in {*PAGE_TYPES, "other"}
    assert env["digest"].startswith("sha256:") and len(env["digest"]) == 71


async def test_cache_hit_then_fresh(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    u = url(upstream, "/article")
    first = (await fetch(sift, FLEET_KEY, url=u)).json()
    second = (await fetch(sift, FLEET_KEY, url=u, format="text")).json()
    assert (first["cache"], second["cache"]) == ("miss", "hit")
    assert upstream.hits["/article"] == 1
    assert second["content"].startswith("Heading\n\nFirst paragraph")
    third = (await fetch(sift, FLEET_KEY, url=u, max_age_s=0)).json()
    assert third["cache"] == "miss"
    assert upstream.hits["/article"] == 2
    assert third["digest"] == first["digest"]
    # The same request repeated is answered from the response cache — until the page it was
    # served from is replaced: then it is built again from the new snapshot.
    repeat = [(await fetch(sift, FLEET_KEY, url=u, format="text")).json() for _ in range(3)]
    assert [r["cache"] for r in repeat] == ["hit", "hit", "hit"]
    assert repeat[0]["fetched_at"] == third["fetched_at"]
    upstream.page("/article", ARTICLE.replace("First paragraph", "New first paragraph"))
    changed = (await fetch(sift, FLEET_KEY, url=u, max_age_s=0)).json()
    assert changed["digest"] != first["digest"]
    after = (await fetch(sift, FLEET_KEY, url=u, format="text")).json()
    assert after["cache"] == "hit"
    assert after["digest"] == changed["digest"]
    assert after["content"].startswith("Heading\n\nNew first paragraph")
    assert upstream.hits["/article"] == 3


async def test_get_with_query_parameters(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    r = await sift.get(
        "/v1/fetch",
        params={"url": url(upstream, "/article"), "format": "text", "max_bytes": "7"},
        headers=auth(FLEET_KEY),
    )
    assert r.status_code == 200
    env = r.json()
    assert (env["content"], env["bytes"], env["truncated"], env["next_offset"]) == (
        "Heading",
        7,
        True,
        7,
    )


async def test_formats_links_selector_exclude(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    u = url(upstream, "/article")
    raw = (await fetch(sift, FLEET_KEY, url=u, format="raw")).json()
    assert raw["content"] == ARTICLE
    links = (await fetch(sift, FLEET_KEY, url=u, links=True)).json()
    assert {"text": "link to next", "url": url(upstream, "/next")} in links["links"]
    whole = (await fetch(sift, FLEET_KEY, url=u, main_content=False, format="text")).json()
    assert "Copyright footer" in whole["content"]
    assert "Copyright footer" not in links["content"]
    sel = (
        await fetch(sift, FLEET_KEY, url=u, selector="footer", main_content=False, format="text")
    ).json()
    assert sel["content"] == "Copyright footer"
    exc = (
        await fetch(
            sift, FLEET_KEY, url=u, exclude=["article", "nav"], main_content=False, format="text"
        )
    ).json()
    assert exc["content"] == "Copyright footer"


async def test_restricted_clamp_and_robots_refusal(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    big = "word " * 40_000
    upstream.page("/big", big, content_type="text/plain")
    env = (await fetch(sift, RESTRICTED_KEY, url=url(upstream, "/big"), max_bytes=10 << 20)).json()
    assert env["warnings"] == ["clamped"]
    assert env["bytes"] <= 64 << 10
    assert env["total_bytes"] == len(big.encode())
    r = await fetch(sift, RESTRICTED_KEY, url=url(upstream, "/big"), robots=False)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_request"


async def test_restricted_never_reaches_loopback(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    async with Upstream(host="127.0.0.1") as private:
        private.page("/secret", "secret")
        for target in (private.url("/secret"), f"http://localhost:{private.port}/secret"):
            r = await fetch(sift, RESTRICTED_KEY, url=target)
            assert r.status_code == 403, target
            assert r.json()["error"]["code"] == "blocked_address"
        # A public page redirecting to loopback is refused at the hop.
        upstream.redirect("/to-private", private.url("/secret"))
        r = await fetch(sift, RESTRICTED_KEY, url=url(upstream, "/to-private"))
        assert r.status_code == 403
        assert private.hits["/secret"] == 0
        # The fleet caller of the test config may reach it; its cached copy is never
        # served to the restricted caller.
        ok = await fetch(sift, FLEET_KEY, url=private.url("/secret"))
        assert ok.status_code == 200
        again = await fetch(sift, RESTRICTED_KEY, url=private.url("/secret"))
        assert again.status_code == 403
        assert private.hits["/secret"] == 1


async def test_auth_failures(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    body = {"url": url(upstream, "/article")}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {FLEET_KEY}"}):
        r = await sift.post("/v1/fetch", json=body, headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized"
    assert upstream.hits["/article"] == 0


async def test_anonymous_mode(tmp_path: Path, upstream: Upstream) -> None:
    settings = dataclasses.replace(make_settings(tmp_path, upstream_port=upstream.port), callers=())
    async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
        ok = await client.post("/v1/fetch", json={"url": url(upstream, "/article")})
        assert ok.status_code == 200
        env = ok.json()
        assert env["bytes"] == env["total_bytes"]
        blocked = await client.post(
            "/v1/fetch", json={"url": f"http://127.0.0.1:{upstream.port}/article"}
        )
        assert blocked.status_code == 403


async def test_continuation_joins_and_is_pinned(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    lines = [f"line {i} " + "é" * (i % 7) + "字" * (i % 3) for i in range(3000)]
    original = "\n".join(lines)
    upstream.page("/long", original, content_type="text/plain; charset=utf-8")
    u = url(upstream, "/long")
    first = (await fetch(sift, FLEET_KEY, url=u, max_bytes=1000)).json()
    assert first["truncated"] is True
    pieces = [first["content"]]
    # The upstream changes mid-read; the read goes on in the pinned snapshot.
    upstream.page("/long", "changed\n" * 5000, content_type="text/plain")
    offset, digest = first["next_offset"], first["digest"]
    while offset is not None:
        env = (
            await fetch(
                sift, FLEET_KEY, url=u, max_bytes=1000, offset=offset, digest=digest, max_age_s=0
            )
        ).json()
        assert env["digest"] == digest
        assert env["offset"] == offset
        assert env["bytes"] <= 1000
        pieces.append(env["content"])
        offset = env["next_offset"]
    assert "".join(pieces) == original
    assert upstream.hits["/long"] == 1
    fresh = (await fetch(sift, FLEET_KEY, url=u, max_age_s=0)).json()
    assert fresh["digest"] != digest
    assert fresh["content"].startswith("changed\n")


async def test_snapshot_gone_and_offset_out_of_range(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    u = url(upstream, "/article")
    r = await fetch(sift, FLEET_KEY, url=u, offset=10, digest="sha256:" + "0" * 64)
    assert r.status_code == 410
    assert r.json()["error"]["code"] == "snapshot_gone"
    r = await fetch(sift, FLEET_KEY, url=u, offset=1 << 40)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "offset_out_of_range"


async def in_flight(client: httpx.AsyncClient) -> float:
    text = (await client.get("/metrics", headers=auth(FLEET_KEY))).text
    return float(
        next(ln for ln in text.splitlines() if ln.startswith("sift_requests_in_flight ")).split()[1]
    )


async def test_single_flight(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="slow body", content_type="text/plain")

    upstream.route("/slow", slow)
    tasks = [
        asyncio.create_task(fetch(sift, FLEET_KEY, url=url(upstream, "/slow"))) for _ in range(20)
    ]
    # Release the upstream only once all 20 requests are inside sift (the 21st in flight is
    # the metrics request itself): every one of them has joined the single flight by then.
    while upstream.hits["/slow"] == 0 or await in_flight(sift) < 21:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # each one's cache lookup (one database round trip) is done
    release.set()
    responses = await asyncio.gather(*tasks)
    assert [r.status_code for r in responses] == [200] * 20
    assert {r.json()["content"] for r in responses} == {"slow body"}
    assert upstream.hits["/slow"] == 1


async def test_revalidation_with_conditional_get(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    conditional: list[str] = []

    async def tagged(request: web.Request) -> web.StreamResponse:
        if request.headers.get("If-None-Match") == '"v1"':
            conditional.append(request.headers["If-None-Match"])
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(text="tagged body", content_type="text/plain", headers={"ETag": '"v1"'})

    upstream.route("/tagged", tagged)
    u = url(upstream, "/tagged")
    first = (await fetch(sift, FLEET_KEY, url=u)).json()
    second = (await fetch(sift, FLEET_KEY, url=u, max_age_s=0)).json()
    assert (first["cache"], second["cache"]) == ("miss", "revalidated")
    assert conditional == ['"v1"']
    assert second["content"] == "tagged body"
    assert second["digest"] == first["digest"]


async def test_eviction_under_a_tiny_budget(tmp_path: Path, upstream: Upstream) -> None:
    budget = 40_000
    settings = make_settings(
        tmp_path, upstream_port=upstream.port, cache=CacheSettings(max_bytes=budget)
    )
    for i in range(8):  # incompressible bodies, so the budget binds
        upstream.page(f"/r{i}", os.urandom(6000).hex(), content_type="text/plain")
    async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
        for i in range(8):
            r = await fetch(client, FLEET_KEY, url=url(upstream, f"/r{i}"))
            assert r.status_code == 200
        metrics = (await client.get("/metrics", headers=auth(FLEET_KEY))).text
    bytes_line = next(ln for ln in metrics.splitlines() if ln.startswith("sift_cache_bytes "))
    evictions = next(ln for ln in metrics.splitlines() if ln.startswith("sift_cache_evictions "))
    assert float(bytes_line.split()[1]) <= budget
    assert float(evictions.split()[1]) >= 5


async def test_upstream_error_pages_are_content(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    upstream.page("/gone", "<html><body><p>Not here</p></body></html>", status=404)
    env = (await fetch(sift, FLEET_KEY, url=url(upstream, "/gone"), format="text")).json()
    assert (env["status"], env["content"]) == (404, "Not here")
    again = (await fetch(sift, FLEET_KEY, url=url(upstream, "/gone"), format="text")).json()
    assert (again["status"], again["cache"], upstream.hits["/gone"]) == (404, "hit", 1)
    # A 503 (or 429) says "not now": it is content too, but never served from the cache.
    upstream.page("/busy", "<html><body><p>Try later</p></body></html>", status=503)
    first = (await fetch(sift, FLEET_KEY, url=url(upstream, "/busy"), format="text")).json()
    second = (await fetch(sift, FLEET_KEY, url=url(upstream, "/busy"), format="text")).json()
    assert (first["status"], first["content"], second["cache"]) == (503, "Try later", "miss")
    assert upstream.hits["/busy"] == 2


async def test_upstream_failures_map_to_statuses(
    sift: httpx.AsyncClient, upstream: Upstream
) -> None:
    async def hang(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(text="late")

    upstream.route("/hang", hang)
    r = await fetch(sift, FLEET_KEY, url=url(upstream, "/hang"), timeout_s=0.3)
    assert (r.status_code, r.json()["error"]["code"]) == (504, "upstream_timeout")
    r = await fetch(sift, FLEET_KEY, url="http://127.0.0.1:1/")
    assert (r.status_code, r.json()["error"]["code"]) == (502, "connect_failed")
    r = await fetch(sift, FLEET_KEY, url="http://unknown.test/")
    assert (r.status_code, r.json()["error"]["code"]) == (502, "dns_failure")


async def test_robots_txt(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    upstream.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    upstream.page("/private/page", "private page", content_type="text/plain")
    r = await fetch(sift, RESTRICTED_KEY, url=url(upstream, "/private/page"))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "robots_disallowed")
    ok = await fetch(sift, FLEET_KEY, url=url(upstream, "/private/page"), robots=False)
    assert ok.status_code == 200
    assert upstream.hits["/private/page"] == 1


async def test_bad_requests(sift: httpx.AsyncClient) -> None:
    h = {**auth(FLEET_KEY), "Content-Type": "application/json"}
    cases = [
        (b"{not json", 422, "invalid_request"),
        (b"[1, 2]", 422, "invalid_request"),
        (b'{"url": "ftp://x.test/"}', 422, "invalid_url"),
        (b'{"url": "http://x.test/", "colour": 1}', 422, "invalid_request"),
        (
            b'{"url": "http://x.test/", "max_bytes": 99999999999999999999999}',
            422,
            "invalid_request",
        ),
        (
            b'{"url": "http://x.test/", "pad": "' + b"a" * (1 << 20) + b'"}',
            413,
            "request_too_large",
        ),
    ]
    for body, status, code in cases:
        r = await sift.post("/v1/fetch", content=body, headers=h)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), body[:60]


async def test_metrics_and_docs(sift: httpx.AsyncClient, upstream: Upstream) -> None:
    await fetch(sift, FLEET_KEY, url=url(upstream, "/article"))
    await fetch(sift, FLEET_KEY, url=url(upstream, "/article"))
    text = (await sift.get("/metrics", headers=auth(FLEET_KEY))).text
    assert 'sift_requests_total{caller_class="fleet",route="/v1/fetch",status="200"} 2.0' in text
    assert 'sift_cache_total{result="hit"} 1.0' in text
    assert 'sift_cache_total{result="miss"} 1.0' in text
    assert 'sift_upstream_responses_total{code="200"}' in text
    assert "sift_fetch_seconds_count 1.0" in text
    schema = (await sift.get("/openapi.json")).json()
    assert set(schema["paths"]["/v1/fetch"]) == {"get", "post"}
    assert (await sift.get("/docs")).status_code == 200
    assert (await sift.get("/healthz")).json()["ok"] is True
