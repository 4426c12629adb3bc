"""/v1/crawl and /v1/map over HTTP, the MCP tools crawl and map, and sift.client."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from apphelpers import FLEET_KEY, auth, running_app
from crawlsite import Site, crawl_site
from mcphelpers import call, error_of, mcp_http_session
from sift.client import AsyncClient

# A crawl of the docs section: its exact pages (tests/test_crawl.py checks the rest).
DOCS = [
    "/docs/",
    "/docs/a.html",
    "/docs/b.html",
    "/docs/sub/",
    "/docs/hidden.html",
    "/docs/sub/c.html",
    "/docs/sub/d.html",
    "/docs/sub/deep/e.html",
]


async def _wait(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        view: dict[str, Any] = (await client.get(f"/v1/batch/{job_id}")).json()
        if view["status"] not in ("queued", "running"):
            return view
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.05)


async def test_crawl_and_map_over_http(tmp_path: Path) -> None:
    async with crawl_site(crawl_delay_s=0) as site:
        site_url = site.m("/docs/")
        async with (
            running_app(site.settings(tmp_path)) as base,
            httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY), timeout=60) as client,
        ):
            # No Idempotency-Key, bad fields, a refused start URL: 4xx, nothing created.
            r = await client.post("/v1/crawl", json={"url": site_url})
            assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_request")
            r = await client.post(
                "/v1/crawl",
                json={"url": site_url, "max_depth": 101, "exclude": ["[z-a]"], "x": 1},
                headers={"Idempotency-Key": "bad"},
            )
            assert r.status_code == 422
            message = r.json()["error"]["message"]
            assert message.startswith("invalid crawl request: unknown field x (known: ")
            assert "; exclude[0]: '[z-a]' is not a valid glob: " in message
            assert message.endswith("; max_depth: expected an integer from 0 to 100")
            url = "ftp://site.test/"
            r = await client.post(
                "/v1/crawl", json={"url": url}, headers={"Idempotency-Key": "bad"}
            )
            fetched = await client.post("/v1/fetch", json={"url": url})
            assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_url")
            assert r.json() == fetched.json()  # exactly /v1/fetch's answer
            # A start URL the policy refuses without DNS ([egress.resolve] maps the name to
            # loopback): 422 naming it, for a crawl and a map alike; /v1/fetch says 403.
            canary = f"http://canary.site.test:{site.canary_port}/"
            for route in ("/v1/crawl", "/v1/map"):
                r = await client.post(route, json={"url": canary}, headers={"Idempotency-Key": "b"})
                assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_request")
                assert r.json()["error"]["message"] == (
                    f"the start URL is refused before any fetch: {canary}: blocked_address "
                    "(its host, address or port is outside this caller's egress policy)"
                )
            fetched = await client.post("/v1/fetch", json={"url": canary})
            assert (fetched.status_code, fetched.json()["error"]["code"]) == (
                403,
                "blocked_address",
            )
            assert site.canary.accepted() == 0
            # A crawl: 202 with the job; the same key again is the same job (200).
            r = await client.post(
                "/v1/crawl", json={"url": site_url}, headers={"Idempotency-Key": "k"}
            )
            assert r.status_code == 202, r.text
            job = r.json()
            assert r.headers["location"] == f"/v1/batch/{job['id']}"
            assert (job["kind"], job["crawl"]["scope"], job["crawl"]["max_pages"]) == (
                "crawl",
                "prefix",
                100,
            )
            again = await client.post(
                "/v1/crawl", json={"url": site_url}, headers={"Idempotency-Key": "k"}
            )
            assert (again.status_code, again.json()["id"]) == (200, job["id"])
            view = await _wait(client, job["id"])
            assert view["status"] == "done" and view["targets_total"] == len(DOCS)
            page = (await client.get(f"/v1/batch/{job['id']}/results")).json()
            got = [(it["url"], it["depth"]) for it in page["items"]]
            assert sorted(u for u, _ in got) == sorted(site.m(p) for p in DOCS)
            assert page["items"][0]["parent"] is None
            lines = (await client.get(f"/v1/batch/{job['id']}/results.ndjson")).text.splitlines()
            assert len(lines) == len(DOCS)
            # A batch job says kind "batch" and its items carry no depth.
            b = await client.post(
                "/v1/batch",
                json={"targets": [site.m("/about.html")]},
                headers={"Idempotency-Key": "b"},
            )
            assert b.json()["kind"] == "batch" and "crawl" not in b.json()
            # Map: the start URL, the sitemap URLs, then the start page's links, in scope.
            r = await client.post("/v1/map", json={"url": site.m("/"), "scope": "host"})
            assert r.status_code == 200, r.text
            assert r.json() == {
                "url": site.m("/"),
                "urls": [
                    site.m(p)
                    for p in (
                        "/",
                        "/docs/hidden.html",
                        "/docs/a.html",
                        "/blog/3.html",
                        "/docs/",
                        "/blog/",
                        "/about.html",
                        "/old",
                        "/away",
                        "/trap/",
                    )
                ],
                "count": 10,
                "truncated": False,
                "complete": True,
            }
            r = await client.post(
                "/v1/map", json={"url": site.m("/"), "sitemap": False, "limit": 2, "scope": "host"}
            )
            assert r.json()["urls"] == [site.m("/"), site.m("/docs/")]
            assert r.json()["truncated"] is True
            r = await client.post("/v1/map", json={"url": site.m("/"), "limit": 0})
            assert r.status_code == 422
            assert site.main.hits["/private/x"] == 0


async def test_mcp_crawl_then_batch_results_and_map(tmp_path: Path) -> None:
    async with (
        crawl_site(crawl_delay_s=0) as site,
        running_app(site.settings(tmp_path)) as base,
        mcp_http_session(base, FLEET_KEY) as session,
    ):
        started = await call(session, "crawl", {"url": site.m("/docs/"), "max_depth": 1})
        assert started.is_error is False
        job = started.structured_content
        assert job is not None and job["created"] is True
        deadline = time.monotonic() + 60
        while True:
            status = (await call(session, "batch_status", {"id": job["id"]})).structured_content
            assert status is not None
            if status["status"] not in ("queued", "running"):
                break
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert status["status"] == "done"
        page = (await call(session, "batch_results", {"id": job["id"]})).structured_content
        assert page is not None
        items = sorted((it["url"], it["depth"], it["parent"]) for it in page["items"])
        assert items == sorted(
            [(site.m("/docs/"), 0, None)]
            + [(site.m(p), 1, 0) for p in ("/docs/a.html", "/docs/b.html", "/docs/sub/")]
            + [(site.m("/docs/hidden.html"), 1, 0)]
        )
        mapped = await call(session, "map", {"url": site.m("/docs/"), "sitemap": False})
        assert mapped.structured_content is not None
        assert mapped.structured_content["urls"] == [
            site.m(p) for p in ("/docs/", "/docs/a.html", "/docs/b.html", "/docs/sub/")
        ]
        bad = await call(session, "crawl", {"url": site.m("/"), "scope": "everything"})
        assert bad.is_error is True
        assert error_of(bad)["code"] == "invalid_request"


async def test_client_crawl_and_map(tmp_path: Path) -> None:
    site: Site
    async with (
        crawl_site(crawl_delay_s=0) as site,
        running_app(site.settings(tmp_path)) as base,
        AsyncClient(base, FLEET_KEY) as sift,
    ):
        job = await sift.crawl(site.m("/docs/sub/"), idempotency_key="c", max_depth=1)
        assert job.created and job.view.kind == "crawl"
        view = await job.wait(poll_s=0.05)
        assert view.status == "done"
        items = [it async for it in job.results()]
        assert [(it.url, it.depth, it.parent) for it in items] == [
            (site.m("/docs/sub/"), 0, None),
            (site.m("/docs/sub/c.html"), 1, 0),
            (site.m("/docs/sub/d.html"), 1, 0),
        ]
        mapped = await sift.map(site.m("/docs/sub/"), sitemap=False)
        assert mapped["urls"] == [
            site.m(p) for p in ("/docs/sub/", "/docs/sub/c.html", "/docs/sub/d.html")
        ]
