"""Callers cannot affect each other through shared state (issue 12, section 2), over real HTTP.

Every test runs the real app (uvicorn on 127.0.0.1) against local upstreams. Two lab
settings make forbidden targets testable without leaving loopback: ``127.0.1.0/24`` counts
as public (the restricted caller's "internet"), and ``internal.test`` is mapped by
``[egress.resolve]`` to ``127.0.0.1`` — a private address only a fleet caller with
``allow_private`` may reach. A loopback upstream there is a canary for the restricted caller
(its hit count must stay 0) and a real upstream for the fleet caller.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import types
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
from servehelpers import sift_serve, write_config
from sift.config import ClassesSettings, ClassSettings, EgressSettings, Settings
from sift.keys import add_caller
from upstream import Upstream

PAGE = (
    "<html><head><title>Page</title></head><body><article><h1>Hello</h1>"
    "<p>A paragraph long enough to be the content of this page.</p></article></body></html>"
)
ALLOW_ALL = b"User-agent: *\nAllow: /\n"


def _with_internal_name(settings: Settings) -> Settings:
    egress = EgressSettings(
        extra_public_cidrs=settings.egress.extra_public_cidrs,
        resolve=types.MappingProxyType(
            {**settings.egress.resolve, "internal.test": ("127.0.0.1",)}
        ),
    )
    return dataclasses.replace(settings, egress=egress)


async def post(client: httpx.AsyncClient, key: str, **body: Any) -> httpx.Response:
    return await client.post("/v1/fetch", json=body, headers=auth(key))


async def wait_job(client: httpx.AsyncClient, key: str, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        view: dict[str, Any] = (await client.get(f"/v1/batch/{job_id}", headers=auth(key))).json()
        if view["status"] not in ("queued", "running"):
            return view
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.02)


# -- robots.txt per egress scope ----------------------------------------------------------


async def test_robots_refusal_never_denies_a_fleet_caller(tmp_path: Path) -> None:
    """The restricted caller is refused internal.test (answered as a name that does not
    resolve, issue 24 finding 11); no robots outcome is shared with the fleet caller."""
    async with Upstream("127.0.0.1") as internal:
        internal.page("/robots.txt", ALLOW_ALL, content_type="text/plain")
        internal.page("/page", PAGE)
        settings = _with_internal_name(make_settings(tmp_path, upstream_port=internal.port))
        url = f"http://internal.test:{internal.port}/page"
        async with running_app(settings) as base, httpx.AsyncClient(base_url=base) as client:
            for _ in range(2):  # the second answer must not come from a stored robots outcome
                r = await post(client, RESTRICTED_KEY, url=url)
                assert (r.status_code, r.json()["error"]["code"]) == (502, "dns_failure")
            assert internal.hits.total() == 0
            fleet = await post(client, FLEET_KEY, url=url)
            assert fleet.status_code == 200, fleet.text
            assert fleet.json()["title"] == "Page"
            assert (internal.hits["/robots.txt"], internal.hits["/page"]) == (1, 1)
            # And the other way round: the fleet caller's stored robots.txt and page do not
            # let the restricted caller in.
            r = await post(client, RESTRICTED_KEY, url=url)
            assert (r.status_code, r.json()["error"]["code"]) == (502, "dns_failure")
            assert internal.hits.total() == 2


# -- single flight and the page cache, per policy -------------------------------------------


@pytest.fixture
async def two_ports() -> AsyncIterator[tuple[Upstream, Upstream]]:
    """``main`` (a port the restricted caller may use) and ``side`` (one it may not), both
    on the pseudo-public address: only the port rule can refuse ``side``."""
    async with Upstream(PUBLIC_HOST) as main, Upstream(PUBLIC_HOST) as side:
        side.page("/final", PAGE)
        main.redirect("/hop", f"http://{PUBLIC_NAME}:{side.port}/final")
        yield main, side


def _same_egress_settings(tmp_path: Path, port: int) -> Settings:
    """Fleet without allow_private: fleet and restricted differ only in ports and redirects."""
    classes = ClassesSettings(restricted=ClassSettings(extra_ports=(port,)))
    settings = make_settings(tmp_path, upstream_port=port)
    batch = dataclasses.replace(settings.batch, shutdown_grace_s=0.2)
    return dataclasses.replace(settings, classes=classes, batch=batch)


async def test_cached_page_is_not_served_to_a_caller_whose_policy_refuses_a_hop(
    tmp_path: Path, two_ports: tuple[Upstream, Upstream]
) -> None:
    main, side = two_ports
    url = f"http://{PUBLIC_NAME}:{main.port}/hop"
    settings = _same_egress_settings(tmp_path, main.port)
    async with (
        running_app(settings) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as client,
    ):
        fleet = await post(client, FLEET_KEY, url=url)
        assert fleet.status_code == 200, fleet.text
        env = fleet.json()
        assert (env["final_url"], env["cache"]) == (
            f"http://{PUBLIC_NAME}:{side.port}/final",
            "miss",
        )
        again = await post(client, FLEET2_KEY, url=url)
        assert again.json()["cache"] == "hit"  # same policy: shared as before

        r = await post(client, RESTRICTED_KEY, url=url)
        assert (r.status_code, r.json()["error"]["code"]) == (403, "blocked_address")
        # A continuation of the fleet caller's snapshot is no way around it either.
        cont = await post(client, RESTRICTED_KEY, url=url, digest=env["digest"])
        assert (cont.status_code, cont.json()["error"]["code"]) == (410, "snapshot_gone")
        # Nor is a batch target.
        sub = await client.post(
            "/v1/batch",
            json={"targets": [url]},
            headers={**auth(RESTRICTED_KEY), "Idempotency-Key": "hop"},
        )
        assert sub.status_code == 202, sub.text
        view = await wait_job(client, RESTRICTED_KEY, sub.json()["id"])
        assert view["status"] == "failed"
        items = (
            await client.get(f"/v1/batch/{sub.json()['id']}/results", headers=auth(RESTRICTED_KEY))
        ).json()["items"]
        assert items[0]["error"]["code"] == "blocked_address"
        # The restricted caller's redirects reached main, never the side port.
        assert (main.hits["/hop"], side.hits["/final"]) == (3, 1)


async def test_single_flight_never_joins_a_fetch_under_another_policy(
    tmp_path: Path, two_ports: tuple[Upstream, Upstream]
) -> None:
    main, side = two_ports
    arrived: list[asyncio.Event] = [asyncio.Event(), asyncio.Event()]
    release = asyncio.Event()

    async def gated(request: web.Request) -> web.StreamResponse:
        arrived[min(main.hits["/gated"], 2) - 1].set()
        await release.wait()
        return web.Response(status=302, headers={"Location": side.url("/final", PUBLIC_NAME)})

    main.route("/gated", gated)
    url = f"http://{PUBLIC_NAME}:{main.port}/gated"
    settings = _same_egress_settings(tmp_path, main.port)
    async with (
        running_app(settings) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as client,
    ):
        fleet = asyncio.create_task(post(client, FLEET_KEY, url=url))
        await asyncio.wait_for(arrived[0].wait(), 10)
        restricted = asyncio.create_task(post(client, RESTRICTED_KEY, url=url))
        # The restricted caller runs its own fetch (before the fix it joined the fleet's).
        await asyncio.wait_for(arrived[1].wait(), 10)
        release.set()
        f, r = await fleet, await restricted
    assert f.status_code == 200, f.text
    assert (r.status_code, r.json()["error"]["code"]) == (403, "blocked_address")
    assert (main.hits["/gated"], side.hits["/final"]) == (2, 1)


async def test_a_short_timeout_waiter_does_not_fail_the_shared_fetch(
    tmp_path: Path,
) -> None:
    arrived = asyncio.Event()
    release = asyncio.Event()
    async with Upstream(PUBLIC_HOST) as up:

        async def slow(request: web.Request) -> web.StreamResponse:
            arrived.set()
            await release.wait()
            return web.Response(text=PAGE, content_type="text/html")

        up.route("/slow", slow)
        url = f"http://{PUBLIC_NAME}:{up.port}/slow"
        settings = make_settings(tmp_path, upstream_port=up.port)
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            first = asyncio.create_task(post(client, FLEET_KEY, url=url, timeout_s=1.0))
            await asyncio.wait_for(arrived.wait(), 10)
            # Another caller of the same class joins the flight the impatient one started.
            patient = asyncio.create_task(post(client, FLEET2_KEY, url=url, timeout_s=25))
            codes = [(await first).json()["error"]["code"]]
            for _ in range(3):  # the impatient caller keeps looping
                r = await post(client, FLEET_KEY, url=url, timeout_s=0.25)
                codes.append(r.json()["error"]["code"])
            assert codes == ["upstream_timeout"] * 4
            release.set()
            done = await patient
            assert done.status_code == 200, done.text
            assert done.json()["cache"] == "miss"
            # The shared fetch ran once and is cached for the impatient caller too.
            hit = await post(client, FLEET_KEY, url=url, timeout_s=0.25)
            assert (hit.status_code, hit.json()["cache"]) == (200, "hit")
        assert up.hits["/slow"] == 1


# -- per-caller fairness on /v1/fetch and MCP fetch -----------------------------------------


@pytest.mark.slow
async def test_one_caller_cannot_hold_every_fetch_slot(tmp_path: Path) -> None:
    release = asyncio.Event()
    arrivals: asyncio.Queue[str] = asyncio.Queue()
    async with Upstream(PUBLIC_HOST) as up:
        up.page("/page", PAGE)

        async def hang(request: web.Request) -> web.StreamResponse:
            arrivals.put_nowait(request.path)
            await release.wait()
            return web.Response(text=PAGE, content_type="text/html")

        up.route("/hang", hang, prefix=True)
        extra = (
            f"[classes.restricted]\nmax_inflight = 2\nextra_ports = [{up.port}]\n"
            f'[egress]\nextra_public_cidrs = ["127.0.1.0/24"]\n'
            f'[egress.resolve]\n"{PUBLIC_NAME}" = ["{PUBLIC_HOST}"]\n'
        )
        cfg, fleet_key, agent_key = write_config(tmp_path, extra)
        agent2_key = add_caller(cfg, "agent2", "restricted")
        with sift_serve(tmp_path, config=(cfg, fleet_key, agent_key)) as served:
            async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as client:
                hang_url = f"http://{PUBLIC_NAME}:{up.port}/hang"
                # Two slow fetches, one per method (both go through the fast lane).
                held = [
                    asyncio.create_task(post(client, agent_key, url=f"{hang_url}/1")),
                    asyncio.create_task(
                        client.get(
                            "/v1/fetch", params={"url": f"{hang_url}/2"}, headers=auth(agent_key)
                        )
                    ),
                ]
                seen = {await asyncio.wait_for(arrivals.get(), 20) for _ in range(2)}
                assert seen == {"/hang/1", "/hang/2"}

                page = f"http://{PUBLIC_NAME}:{up.port}/page"
                over = await post(client, agent_key, url=page)
                assert over.status_code == 429
                assert over.headers["retry-after"] == "1"
                err = over.json()["error"]
                assert err["code"] == "rate_limited"
                assert err["message"] == (
                    "caller 'agent' already has 2 fetches in flight, "
                    "the most its class (restricted) allows"
                )
                assert "classes.restricted.max_inflight" in err["hint"]
                got = await client.get("/v1/fetch", params={"url": page}, headers=auth(agent_key))
                assert (got.status_code, got.json()["error"]["code"]) == (429, "rate_limited")
                async with mcp_http_session(served.base_url, agent_key) as session:
                    result = await call(session, "fetch", {"url": page})
                assert result.is_error is True
                assert texts(result)[0].splitlines()[:2] == [
                    f"rate_limited: {err['message']}",
                    f"hint: {err['hint']}",
                ]

                # Everyone else is served meanwhile: another restricted caller, and fleet.
                other = await post(client, agent2_key, url=page)
                assert (other.status_code, other.json()["title"]) == (200, "Page")
                fleet = await post(client, fleet_key, url=page)
                assert fleet.status_code == 200
                # One fetch per policy; the 429s never reached the upstream.
                assert up.hits["/page"] == 2

                release.set()
                assert [(await t).status_code for t in held] == [200, 200]
                # The slots are given back.
                again = await post(client, agent_key, url=page)
                assert (again.status_code, again.json()["cache"]) == (200, "hit")


# -- title and links within the output cap ----------------------------------------------------


async def test_title_and_links_respect_the_output_cap(tmp_path: Path) -> None:
    title = "é" * 3000  # 6000 UTF-8 bytes
    async with Upstream(PUBLIC_HOST) as up:
        links = [
            {"text": f"link {i:04d}", "url": f"http://{PUBLIC_NAME}:{up.port}/l/{i:05d}"}
            for i in range(3000)
        ]
        items = "".join(f'<li><a href="/l/{i:05d}">link {i:04d}</a></li>' for i in range(3000))
        up.page(
            "/many",
            f"<html><head><title>{title}</title></head><body><article><h1>Many</h1>"
            f"<p>A paragraph long enough to be the content of this page.</p><ul>{items}</ul>"
            "</article></body></html>",
        )
        url = f"http://{PUBLIC_NAME}:{up.port}/many"
        settings = make_settings(tmp_path, upstream_port=up.port)
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            r = await post(client, FLEET_KEY, url=url, links=True, max_bytes=1 << 20)
            assert r.status_code == 200, r.text
            full = r.json()
            # Within the fleet caller's limits nothing is cut: the snapshot holds it all.
            assert (full["title"], full["links"], full["warnings"]) == (
                title[:512],
                links,
                ["thin_content", "title_truncated"],
            )
            link_bytes = len(links[0]["text"] + links[0]["url"])  # ASCII, all the same length
            small = (await post(client, RESTRICTED_KEY, url=url, links=True, max_bytes=4000)).json()
            assert small["title"] == "é" * 512  # 1024 bytes: TITLE_MAX_BYTES
            assert small["links"] == links[: 4000 // link_bytes]
            assert small["warnings"] == ["thin_content", "title_truncated", "links_truncated"]
            tiny = (await post(client, RESTRICTED_KEY, url=url, links=True, max_bytes=101)).json()
            assert tiny["title"] == "é" * 50  # 101 bytes, cut on a character boundary
            assert len(tiny["content"].encode()) <= 101
            assert tiny["links"] == links[: 101 // link_bytes]
            # By count: the restricted class returns at most max_links (1000) links.
            big = (await post(client, RESTRICTED_KEY, url=url, links=True, max_bytes=65536)).json()
            assert (len(big["links"]), big["links"][-1]) == (1000, links[999])
            assert big["warnings"] == ["thin_content", "title_truncated", "links_truncated"]
            async with mcp_http_session(base, RESTRICTED_KEY) as session:
                result = await call(session, "fetch", {"url": url})
            footer = texts(result)[1].splitlines()
            assert footer[1] == "title: " + "é" * 512
            assert footer[-1] == "warnings: thin_content, title_truncated"


# -- batch politeness per normalised host ---------------------------------------------------


async def test_batch_politeness_counts_every_spelling_of_a_host_as_one(tmp_path: Path) -> None:
    running = 0
    most = 0
    async with Upstream(PUBLIC_HOST) as up:

        async def page(request: web.Request) -> web.StreamResponse:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.2)  # long enough for overlapping starts to show
            running -= 1
            return web.Response(text=PAGE, content_type="text/html")

        up.route("/p/", page, prefix=True)
        settings = make_settings(tmp_path, upstream_port=up.port)
        egress = EgressSettings(
            extra_public_cidrs=settings.egress.extra_public_cidrs,
            resolve=types.MappingProxyType(
                {**settings.egress.resolve, "xn--bcher-kva.test": (PUBLIC_HOST,)}
            ),
        )
        batch = dataclasses.replace(settings.batch, per_host=1, concurrency=8, shutdown_grace_s=0.2)
        settings = dataclasses.replace(settings, egress=egress, batch=batch)
        spellings = [
            "bücher.test",
            "BÜCHER.test.",
            "xn--bcher-kva.test",
            "XN--BCHER-KVA.TEST.",
            "ｂücher．test",
        ]
        targets = [f"http://{host}:{up.port}/p/{i}" for i, host in enumerate(spellings)]
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            sub = await client.post(
                "/v1/batch",
                json={"targets": targets},
                headers={**auth(FLEET_KEY), "Idempotency-Key": "idn"},
            )
            assert sub.status_code == 202, sub.text
            view = await wait_job(client, FLEET_KEY, sub.json()["id"])
        assert view["status"] == "done"
        assert sum(up.hits[f"/p/{i}"] for i in range(5)) == 5
        # batch.per_host = 1 held across every spelling (before: five hosts, five at once).
        assert most == 1


async def test_a_fetch_nobody_waits_for_any_more_is_cancelled(tmp_path: Path) -> None:
    """Giving up early leaves no work behind: otherwise a caller looping with tiny timeouts
    over slow URLs would pile up background fetches past its in-flight cap."""
    arrived = asyncio.Event()
    gone = asyncio.Event()
    async with Upstream(PUBLIC_HOST) as up:

        async def slow(request: web.Request) -> web.StreamResponse:
            arrived.set()
            try:
                await asyncio.Event().wait()  # never answers
            except asyncio.CancelledError:
                gone.set()  # sift closed the connection
                raise
            raise AssertionError("unreachable")

        up.route("/slow", slow)
        url = f"http://{PUBLIC_NAME}:{up.port}/slow"
        settings = make_settings(tmp_path, upstream_port=up.port)
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            # (3 s: time enough to reach the upstream on a loaded machine.)
            r = await post(client, RESTRICTED_KEY, url=url, timeout_s=3)
            assert (r.status_code, r.json()["error"]["code"]) == (504, "upstream_timeout")
            assert arrived.is_set()
            # Well before the class deadline (20 s), the upstream sees sift hang up.
            await asyncio.wait_for(gone.wait(), 10)
            # And the next request starts a fresh fetch rather than joining a cancelled one.
            r = await post(client, RESTRICTED_KEY, url=url, timeout_s=3)
            assert (r.status_code, r.json()["error"]["code"]) == (504, "upstream_timeout")
        assert up.hits["/slow"] == 2
