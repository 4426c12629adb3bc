"""The render queue keeps callers apart, end to end (issue 24, finding 3).

Real app over real HTTP, real render workers, a real upstream on loopback. A restricted
caller floods the render workers with slow pages; another caller's plain page still
renders at once, on the turn kept for callers with nothing running, not behind one of the
flood's renders nor the whole flood. A render still queued at its request's deadline is
dropped with ``render_queue_timeout``; a client that hangs up frees its in-flight slot and
its place in the queue (or its worker) at once; ``POST /console/render`` counts against
``max_inflight``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

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
from sift.config import Settings
from sift.principal import Principal
from upstream import Upstream

pytestmark = pytest.mark.slow

# Deep nesting makes descendant combinators slow in libxml2: tens of seconds, so every
# render of it runs to the class's render time limit.
NESTED = "<html><body>" + "<div>" * 2000 + "<span>x</span>" * 100 + "</div>" * 2000
SLOW_SELECTOR = "div div div div span"
ARTICLE = (
    "<html><head><title>T</title></head><body><article><h1>Title</h1>"
    "<p>Hello fair world.</p></article></body></html>"
)
AGENT = Principal("agent", "restricted")


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as up:
        up.page("/nested", NESTED)
        up.page("/article", ARTICLE)
        yield up


def url(up: Upstream, path: str) -> str:
    return f"http://{PUBLIC_NAME}:{up.port}{path}"


def settings_for(tmp_path: Path, up: Upstream, workers: int, **restricted: Any) -> Settings:
    base = make_settings(tmp_path, upstream_port=up.port, render_workers=workers)
    cls = dataclasses.replace(base.classes.restricted, **restricted)
    return dataclasses.replace(base, classes=dataclasses.replace(base.classes, restricted=cls))


async def until(check: Callable[[], bool], what: str, within_s: float = 20.0) -> None:
    """Poll a counter of the server under test (there is no event to await from here)."""
    end = time.monotonic() + within_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {within_s} s: {what}")
        await asyncio.sleep(0.02)


class Attack:
    """Requests sent each on its own connection, abandoned together (the client hangs up)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.tasks: list[asyncio.Task[httpx.Response]] = []
        self.clients: list[httpx.AsyncClient] = []

    def send(self, path: str, body: dict[str, Any], key: str = RESTRICTED_KEY) -> None:
        client = httpx.AsyncClient(base_url=self.base, timeout=120)
        self.clients.append(client)
        self.tasks.append(asyncio.ensure_future(client.post(path, json=body, headers=auth(key))))

    async def hang_up(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for client in self.clients:
            await client.aclose()


@asynccontextmanager
async def serve(settings: Settings) -> AsyncIterator[tuple[str, FastAPI]]:
    apps: list[FastAPI] = []
    async with running_app(settings, customize=apps.append) as base:
        yield base, apps[0]


async def test_a_flood_of_slow_renders_does_not_hold_back_another_callers_render(
    tmp_path: Path, upstream: Upstream
) -> None:
    """Two render workers; the restricted caller sends 16 renders of a page that takes
    ~20 s to render (20.7 s measured on an idle core; its limit here is 60 s, so each runs
    its whole length). First come, first served, a fleet caller's plain page waited behind
    all 8 waves of them; in turn (no kept turn), it waited for one of the two running to
    end: ~20 s. With the turn kept for callers with nothing running
    (``render_reserved_workers``, 1) it starts at once, on a worker of its own: its fetch and
    render take well under a second. The generous bound, 8 s, allows for a loaded 2-core
    machine and is still far short of one flood render."""
    flood = 16
    settings = settings_for(tmp_path, upstream, 2, render_timeout_s=60.0, max_inflight=flood)
    assert settings.render_reserved_workers == 1  # the default
    async with serve(settings) as (base, app):
        pool = app.state.service.render_pool
        assert (pool.workers, pool.turns) == (2, 3)
        attack = Attack(base)
        async with httpx.AsyncClient(base_url=base, timeout=120) as victim:
            warm = await victim.post(
                "/v1/fetch", json={"url": url(upstream, "/article")}, headers=auth(FLEET_KEY)
            )
            assert warm.status_code == 200
            try:
                for i in range(flood):
                    body = {"url": url(upstream, f"/nested?{i}"), "selector": SLOW_SELECTOR}
                    attack.send("/v1/fetch", body)
                await until(
                    lambda: pool.queued("agent") == flood - 2 and pool.admitted == 2,
                    "the flood holds both workers and queues the rest",
                )
                started = time.monotonic()
                r = await victim.post(
                    "/v1/fetch",
                    json={"url": url(upstream, "/article"), "format": "text"},
                    headers=auth(FLEET_KEY),
                )
                elapsed = time.monotonic() - started
                assert (r.status_code, r.json()["content"]) == (200, "Title\n\nHello fair world.")
                assert elapsed < 8.0, f"the victim's render took {elapsed:.1f} s"
                # The flood was still there: both its renders running, the rest queued.
                assert (pool.queued("agent"), pool.admitted) == (flood - 2, 2)
            finally:
                await attack.hang_up()
        # Every abandoned render left the queue or lost its worker; every slot is back.
        await until(lambda: pool.queued() == 0 and pool.admitted == 0, "the flood is gone")
        assert app.state.service.inflight.in_flight(AGENT) == 0


async def test_deadline_drop_hang_up_and_console_renders_in_flight(
    tmp_path: Path, upstream: Upstream
) -> None:
    """One render worker, held by a restricted render with a 30 s limit, and no turn kept
    for callers with nothing running (which would let the fleet render start at once: the
    queue's deadline is what is tested here)."""
    settings = settings_for(tmp_path, upstream, 1, render_timeout_s=30.0, max_inflight=2)
    settings = dataclasses.replace(settings, render_reserved_workers=0)
    async with serve(settings) as (base, app):
        service = app.state.service
        pool = service.render_pool
        attack = Attack(base)
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:

            async def post(path: str, key: str, **body: Any) -> httpx.Response:
                return await client.post(path, json=body, headers=auth(key))

            first = await post("/v1/fetch", FLEET2_KEY, url=url(upstream, "/article"))
            assert first.status_code == 200  # the page is cached: only its render is left
            try:
                attack.send(
                    "/v1/fetch", {"url": url(upstream, "/nested"), "selector": SLOW_SELECTOR}
                )
                await until(lambda: pool.admitted == 1, "the slow render holds the worker")
                # 1. Still queued when its request's deadline passes: dropped, clearly.
                late = await post(
                    "/v1/fetch",
                    FLEET2_KEY,
                    url=url(upstream, "/article"),
                    format="text",
                    timeout_s=0.5,
                )
                assert late.status_code == 503
                assert late.json()["error"]["code"] == "render_queue_timeout"
                assert late.headers["retry-after"] == "1"
                assert pool.queued() == 0
                # 2. The console's render counts against max_inflight (2 for this class).
                attack.send("/console/render", {"markdown": "[" * (1 << 20)})
                await until(lambda: service.inflight.in_flight(AGENT) == 2, "two in flight")
                third = await post("/console/render", RESTRICTED_KEY, markdown="*x*")
                assert third.status_code == 429
                assert third.json()["error"]["code"] == "rate_limited"
                assert pool.queued("agent") == 1
            finally:
                # 3. The client hangs up: its queued render leaves the queue and its running
                #    one loses its worker now, not at the 30 s limit.
                await attack.hang_up()
            await until(lambda: pool.admitted == 0, "the running render is stopped", 10.0)
            assert (pool.queued(), service.inflight.in_flight(AGENT)) == (0, 0)
            again = await post("/console/render", RESTRICTED_KEY, markdown="*ok*")
            assert again.json() == {"html": "<p><em>ok</em></p>\n"}
            assert pool.replaced == 1  # the abandoned render's worker, killed and replaced
