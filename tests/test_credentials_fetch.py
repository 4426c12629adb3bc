"""Caller headers and cookies over plain HTTP, through the real app: real loopback upstreams
that record every header they see, two origins (one address, two ports).

What is proven: the origin sees them, exactly; a second origin never does (after a redirect,
nor on a hop back to the origin after one); robots.txt and sitemap fetches never do; the
result is private to its caller (the cache and a shared fetch never hand it to another,
continuation still works for its own caller); restricted callers are refused unless the
operator allows it; a query string is refused; the secret is in no log line, no metric and
no error envelope; and the same through batch, crawl, MCP and the Python client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import time
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
    RESTRICTED_KEY,
    auth,
    make_settings,
    running_app,
)
from mcphelpers import call, mcp_http_session, texts
from sift.client import AsyncClient
from upstream import Upstream

TOKEN = "tok-7Hq2Wm9xPz"
COOKIE = "ck-4Rt8Yu1Ls0"
SECRETS = (TOKEN, COOKIE)
CREDS: dict[str, Any] = {
    "headers": {"Authorization": f"Bearer {TOKEN}", "X-Tenant": "blue"},
    "cookies": {"sid": COOKIE, "theme": "dark"},
}
MEMBER = "Member area: the balance is 42 coins and the next invoice is due in March."
GUEST = "Please log in to see this account; this page needs a session of its own."
LEDGER = " ".join(f"Ledger line {i} lists a private payment of {i} coins." for i in range(60))


def logged_in(request: web.Request) -> bool:
    return (
        request.headers.get("Authorization") == f"Bearer {TOKEN}"
        and request.cookies.get("sid") == COOKIE
    )


def html(text: str) -> str:
    return f"<html><body><article><h1>Account</h1><p>{text}</p></article></body></html>"


def install_site(site: Upstream, other: Upstream) -> None:
    """The origin: an account page that shows its text only to the session, redirects (to
    itself, to the other origin, and off and back), robots.txt."""

    async def account(request: web.Request) -> web.StreamResponse:
        return web.Response(
            text=html(MEMBER if logged_in(request) else GUEST), content_type="text/html"
        )

    async def ledger(request: web.Request) -> web.StreamResponse:
        text = LEDGER if logged_in(request) else GUEST
        return web.Response(text=text, content_type="text/plain")

    site.route("/account", account)
    site.route("/ledger", ledger)
    site.page("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
    site.redirect("/to-self", "/account")
    site.redirect("/to-other", other.url("/landing"))
    site.redirect("/bounce", other.url("/back"))
    other.redirect("/back", site.url("/account?via=bounce"))
    other.page("/landing", html("The other origin's landing page, open to all."))
    other.page("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")


def headers_at(up: Upstream, path_qs: str) -> list[dict[str, str]]:
    return [r.headers for r in up.requests if r.path_qs == path_qs]


def carries_none(headers: dict[str, str]) -> bool:
    return (
        "authorization" not in headers
        and "x-tenant" not in headers
        and not any(s in v for v in headers.values() for s in SECRETS)
    )


async def post(client: httpx.AsyncClient, key: str, **body: Any) -> httpx.Response:
    return await client.post("/v1/fetch", json=body, headers=auth(key))


def content(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    text: str = r.json()["content"]
    return text


@pytest.fixture
async def origins() -> AsyncIterator[tuple[Upstream, Upstream]]:
    async with Upstream() as site, Upstream() as other:
        install_site(site, other)
        yield site, other


@pytest.fixture
async def sift(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        running_app(make_settings(tmp_path)) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as client,
    ):
        yield client


async def test_sent_to_the_origin_only(
    origins: tuple[Upstream, Upstream], sift: httpx.AsyncClient
) -> None:
    site, other = origins
    assert MEMBER in content(await post(sift, FLEET_KEY, url=site.url("/account"), **CREDS))
    r = await post(sift, FLEET_KEY, url=site.url("/to-self"), **CREDS)
    assert MEMBER in content(r) and r.json()["final_url"] == site.url("/account")
    r = await post(sift, FLEET_KEY, url=site.url("/to-other"), **CREDS)
    assert r.json()["final_url"] == other.url("/landing")
    # Off the origin and back: the hop back was chosen by the other origin; it goes bare.
    r = await post(sift, FLEET_KEY, url=site.url("/bounce"), **CREDS)
    assert GUEST in content(r) and r.json()["final_url"] == site.url("/account?via=bounce")

    want = {"authorization": f"Bearer {TOKEN}", "x-tenant": "blue"}
    for path in ("/account", "/to-self", "/to-other", "/bounce"):
        for h in headers_at(site, path):
            assert {k: h[k] for k in want} == want
            assert h["cookie"] == f"sid={COOKIE}; theme=dark"
    assert len(headers_at(site, "/account")) == 2  # asked, and through /to-self
    assert [carries_none(h) for h in headers_at(site, "/account?via=bounce")] == [True]
    assert [carries_none(h) for h in headers_at(site, "/robots.txt")] == [True]
    assert sorted(r.path_qs for r in other.requests) == ["/back", "/landing", "/robots.txt"]
    assert all(carries_none(r.headers) for r in other.requests)


async def test_a_private_result_never_reaches_another_caller(
    origins: tuple[Upstream, Upstream], sift: httpx.AsyncClient
) -> None:
    site, _ = origins
    url = site.url("/account")

    async def fetch(key: str, **body: Any) -> tuple[str, str]:
        r = await post(sift, key, url=url, **body)
        env = r.json()
        return ("member" if MEMBER in content(r) else "guest"), env["cache"]

    assert await fetch(FLEET_KEY, **CREDS) == ("member", "miss")
    assert await fetch(FLEET2_KEY) == ("guest", "miss")  # not the cached private copy
    assert await fetch(FLEET2_KEY, **CREDS) == ("member", "miss")  # same secrets: its own
    assert await fetch(FLEET_KEY, **CREDS) == ("member", "hit")  # its own copy: cached
    assert await fetch(FLEET_KEY) == ("guest", "hit")  # the public copy, shared as ever
    other_login = {**CREDS, "cookies": {"sid": COOKIE + "2"}}
    assert await fetch(FLEET_KEY, **other_login) == ("guest", "miss")  # another login
    assert site.hits["/account"] == 4


async def test_continuation_is_the_callers_own(
    origins: tuple[Upstream, Upstream], sift: httpx.AsyncClient
) -> None:
    site, _ = origins
    url = site.url("/ledger")
    first = (await post(sift, FLEET_KEY, url=url, max_bytes=300, **CREDS)).json()
    assert first["truncated"] is True and first["content"].startswith("Ledger line 0 ")
    more = {"offset": first["next_offset"], "digest": first["digest"], "max_bytes": 300}
    r = await post(sift, FLEET_KEY, url=url, **more, **CREDS)
    assert r.status_code == 200, r.text
    assert (r.json()["digest"], r.json()["offset"]) == (first["digest"], first["next_offset"])
    for key, body in ((FLEET2_KEY, {}), (FLEET2_KEY, CREDS), (FLEET_KEY, {})):
        r = await post(sift, key, url=url, **more, **body)
        assert (r.status_code, r.json()["error"]["code"]) == (410, "snapshot_gone")
        assert not any(s in r.text for s in SECRETS)
    assert site.hits["/ledger"] == 1


async def test_never_joined_into_another_callers_fetch(tmp_path: Path) -> None:
    arrived: list[asyncio.Event] = [asyncio.Event() for _ in range(3)]
    release = asyncio.Event()
    async with Upstream() as site:

        async def gated(request: web.Request) -> web.StreamResponse:
            arrived[sum(e.is_set() for e in arrived)].set()
            await release.wait()
            return web.Response(
                text=html(MEMBER if logged_in(request) else GUEST), content_type="text/html"
            )

        site.route("/gated", gated)
        url = site.url("/gated")
        async with (
            running_app(make_settings(tmp_path)) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            a = asyncio.create_task(post(client, FLEET_KEY, url=url, **CREDS))
            await asyncio.wait_for(arrived[0].wait(), 10)
            # Another caller, with and without the same secrets: each its own fetch (joined
            # into the first, they would never reach the upstream and this wait would fail).
            b = asyncio.create_task(post(client, FLEET2_KEY, url=url))
            await asyncio.wait_for(arrived[1].wait(), 10)
            c = asyncio.create_task(post(client, FLEET2_KEY, url=url, **CREDS))
            await asyncio.wait_for(arrived[2].wait(), 10)
            # Control: a public fetch of the same page is shared (flight or cache).
            d = asyncio.create_task(post(client, FLEET_KEY, url=url))
            release.set()
            got = [content(await t) for t in (a, b, c, d)]
    assert [MEMBER in g for g in got] == [True, False, True, False]
    assert site.hits["/gated"] == 3


async def test_restricted_only_when_the_operator_allows(tmp_path: Path) -> None:
    async with Upstream(PUBLIC_HOST) as up:
        up.route("/account", lambda r: _account(r))
        up.page("/robots.txt", "User-agent: *\nAllow: /\n", content_type="text/plain")
        url = f"http://{PUBLIC_NAME}:{up.port}/account"
        settings = make_settings(tmp_path, upstream_port=up.port)
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            r = await post(client, RESTRICTED_KEY, url=url, **CREDS)
            assert r.status_code == 422
            assert r.json()["error"] == {
                "code": "invalid_request",
                "message": "headers, cookies: the restricted class may not send its own "
                "headers or cookies",
                "hint": "Drop headers and cookies, or ask the operator to set "
                "classes.restricted.credentials = true.",
            }
            # GET: never in a query string, whoever asks.
            r = await client.get(
                "/v1/fetch", params={"url": url, "headers": TOKEN}, headers=auth(FLEET_KEY)
            )
            assert (r.status_code, r.json()["error"]["message"]) == (
                422,
                "invalid options: headers: not accepted in a query string (URLs end up in "
                "logs); send it in the JSON body of POST /v1/fetch",
            )
        assert up.hits["/account"] == 0
        restricted = dataclasses.replace(settings.classes.restricted, credentials=True)
        allowed = dataclasses.replace(
            settings,
            classes=dataclasses.replace(settings.classes, restricted=restricted),
            data_dir=str(tmp_path / "allowed"),
        )
        async with (
            running_app(allowed) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            r = await post(client, RESTRICTED_KEY, url=url, **CREDS)
            assert MEMBER in content(r)
        assert up.hits["/account"] == 1


async def _account(request: web.Request) -> web.StreamResponse:
    return web.Response(
        text=html(MEMBER if logged_in(request) else GUEST), content_type="text/html"
    )


async def test_no_secret_in_logs_metrics_or_errors(
    origins: tuple[Upstream, Upstream],
    sift: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    refused_port: int,
) -> None:
    site, _ = origins
    caplog.set_level(logging.DEBUG)
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await never.wait()
        raise AssertionError("unreachable")

    site.route("/hang", hang)
    site.redirect("/to-closed", f"http://127.0.0.1:{refused_port}/x")
    assert MEMBER in content(await post(sift, FLEET_KEY, url=site.url("/account"), **CREDS))
    answers = [
        await post(sift, FLEET_KEY, url=site.url("/hang"), timeout_s=0.5, **CREDS),
        await post(sift, FLEET_KEY, url=site.url("/to-closed"), **CREDS),
        await post(sift, FLEET_KEY, url=f"http://127.0.0.1:{refused_port}/", **CREDS),
        await post(sift, FLEET_KEY, url=site.url("/a"), headers={"X-K": f"{TOKEN}\r\nX: 1"}),
        await post(sift, FLEET_KEY, url=site.url("/a"), cookies={"sid": f"{COOKIE};x"}),
        await post(sift, FLEET_KEY, url=site.url("/a"), headers={f"A: {TOKEN}": "v"}),
        await post(sift, FLEET_KEY, url=site.url("/a"), headers={"Host": TOKEN}),
        await post(sift, RESTRICTED_KEY, url=site.url("/a"), **CREDS),
    ]
    codes = [(r.status_code, r.json()["error"]["code"]) for r in answers]
    assert codes == [
        (504, "upstream_timeout"),
        (502, "connect_failed"),
        (502, "connect_failed"),
        *[(422, "invalid_request")] * 5,
    ]
    metrics = (await sift.get("/metrics", headers=auth(FLEET_KEY))).text
    assert "sift_" in metrics
    out, err = capfd.readouterr()
    records = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text}" for r in caplog.records)
    assert len(caplog.records) > 0  # DEBUG was captured (the guard logs its refusals)
    for where in (*(r.text for r in answers), metrics, out, err, caplog.text, records):
        assert not any(s in where for s in SECRETS)


async def test_batch_and_crawl_keep_them_on_the_origin(
    origins: tuple[Upstream, Upstream], sift: httpx.AsyncClient
) -> None:
    site, other = origins
    site.page(
        "/",
        f'<html><body><article><p>Start page with links.</p><a href="/account">mine</a>'
        f'<a href="{other.url("/landing")}">theirs</a></article></body></html>',
    )
    site.page("/robots.txt", f"User-agent: *\nAllow: /\nSitemap: {site.url('/sitemap.xml')}\n")
    site.page(
        "/sitemap.xml",
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{site.url('/ledger')}</loc></url></urlset>",
        content_type="application/xml",
    )
    h = {**auth(FLEET_KEY), "Idempotency-Key": "creds"}
    r = await sift.post(
        "/v1/batch", json={"targets": [site.url("/account")], "options": CREDS}, headers=h
    )
    assert r.status_code == 202, r.text
    batch = await wait_items(sift, r.json()["id"])
    assert [MEMBER in it["result"]["content"] for it in batch] == [True]
    r = await sift.post(
        "/v1/crawl",
        json={"url": site.url("/"), "scope": "domain", "max_depth": 1, "options": CREDS},
        headers={**h, "Idempotency-Key": "crawl"},
    )
    assert r.status_code == 202, r.text
    crawled = {it["url"]: it["result"]["content"] for it in await wait_items(sift, r.json()["id"])}
    assert sorted(crawled) == sorted(
        [site.url("/"), site.url("/account"), site.url("/ledger"), other.url("/landing")]
    )
    assert MEMBER in crawled[site.url("/account")]
    assert crawled[site.url("/ledger")].startswith("Ledger line 0 ")
    assert all(carries_none(r.headers) for r in other.requests)
    for path in ("/robots.txt", "/sitemap.xml"):
        assert headers_at(site, path) and all(carries_none(x) for x in headers_at(site, path))
    # The crawl's /account was the batch's private copy (same caller, same secrets: its key).
    assert [carries_none(x) for x in headers_at(site, "/account")] == [False]


async def wait_items(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        view = (await client.get(f"/v1/batch/{job_id}", headers=auth(FLEET_KEY))).json()
        if view["status"] not in ("queued", "running"):
            break
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.02)
    assert view["status"] == "done", view
    page = await client.get(f"/v1/batch/{job_id}/results", headers=auth(FLEET_KEY))
    items: list[dict[str, Any]] = page.json()["items"]
    return items


async def test_mcp_and_the_python_client(
    tmp_path: Path, origins: tuple[Upstream, Upstream]
) -> None:
    site, _ = origins
    async with running_app(make_settings(tmp_path)) as base:
        async with mcp_http_session(base, FLEET_KEY) as session:
            got = await call(
                session, "fetch", {"url": site.url("/ledger"), "max_bytes": 200, **CREDS}
            )
            body, footer = texts(got)
            assert body.startswith("Ledger line 0 ")
            assert "headers=<the same headers as this call>" in footer
            assert "cookies=<the same cookies as this call>" in footer
            assert not any(s in footer for s in SECRETS)
        async with AsyncClient(base, FLEET_KEY) as client:
            env = await client.fetch(site.url("/account"), **CREDS)
            assert MEMBER in env.content
            pieces = [
                e.content async for e in client.read(site.url("/ledger"), max_bytes=900, **CREDS)
            ]
            assert "".join(pieces).startswith("Ledger line 0 ") and len(pieces) > 1
    assert site.hits["/ledger"] == 1  # one caller, one set of secrets: its own cached copy


async def test_sift_fetch_header_and_cookie_flags(
    tmp_path: Path, origins: tuple[Upstream, Upstream]
) -> None:
    """``sift fetch -H … --cookie …`` in-process as the operator; a bad -H exits 2 without
    echoing it."""
    site, _ = origins
    base = [sys.executable, "-m", "sift.cli", "fetch", "--data-dir", str(tmp_path / "d")]

    async def run(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            *base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    code, out, err = await run(
        site.url("/account"),
        "-H",
        f"Authorization: Bearer {TOKEN}",
        "-H",
        "X-Tenant: blue",
        "--cookie",
        f"sid={COOKIE}",
        "-H",
        "Cookie: theme=dark",
    )
    assert (code, MEMBER in out) == (0, True), (err, out)
    (h,) = headers_at(site, "/account")
    assert (h["authorization"], h["x-tenant"]) == (f"Bearer {TOKEN}", "blue")
    assert h["cookie"] == f"sid={COOKIE}; theme=dark"
    code, out, err = await run(site.url("/account"), "-H", f"Bearer {TOKEN}")
    assert (code, out, err) == (2, "", "sift fetch: -H #1 is not 'Name: value'\n")
