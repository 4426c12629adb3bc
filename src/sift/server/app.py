"""The FastAPI application: the API, the console and MCP over HTTP, wired in one place.

``create_app(settings, db, fetcher)`` builds the app over an opened database and an
unstarted fetcher; its lifespan starts them with the render pool, the batch store and the
service through ``sift.assembly.assemble``, and closes them at shutdown. Nothing here runs
at import time.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

from sift import __version__
from sift.api.auth import KeyRing, authenticate
from sift.api.batch_routes import install_batch_routes, start_batch
from sift.api.crawl_routes import install_crawl_routes
from sift.api.delivery_routes import install_delivery_routes
from sift.api.errors import install_error_handlers
from sift.api.fastlane import SiftApp
from sift.api.fetch_routes import install_fetch_routes
from sift.api.hostguard import HostGuard
from sift.api.observe import AccessLog, ObserveMiddleware
from sift.api.schema import ERROR_RESPONSES, Health, declare_bearer_auth, keyed
from sift.api.screenshot_routes import install_screenshot_routes
from sift.api.stats_routes import install_stats_routes
from sift.api.watch_routes import install_watch_routes
from sift.assembly import assemble, build_browser, build_render_pool
from sift.browser import Browser
from sift.config import Settings
from sift.console.routes import install_console
from sift.dcache import DB, AsyncDB
from sift.errors import RenderUnavailable, Unauthorized
from sift.fetch import Fetcher
from sift.jsonio import dumps
from sift.mcp.core import Core
from sift.mcp.http import McpHttp, install_mcp
from sift.metrics import Metrics
from sift.principal import Principal
from sift.store import BatchStore
from sift.workers import RenderPool

log = logging.getLogger("sift.api")


@dataclass
class _Wiring:
    """What the lifespan starts and closes: the parts ``create_app`` was handed or built,
    and the ``/mcp`` transport installed once the app exists."""

    settings: Settings
    db: DB
    fetcher: Fetcher
    render_pool: RenderPool | None
    browser: Browser
    keys: KeyRing
    metrics: Metrics
    access_log: AccessLog | None
    mcp_http: McpHttp | None = None


async def _owns_watch(app: FastAPI, principal: Principal, watch_id: str) -> bool:
    """The delivery log of a watch is its owner's: an owned watch with no event yet is an
    empty list, another caller's or a missing one 404."""
    watches = app.state.watches if hasattr(app.state, "watches") else None
    return watches is not None and await watches.owns(principal, watch_id)


def create_app(
    settings: Settings,
    db: DB,
    fetcher: Fetcher,
    *,
    render_pool: RenderPool | None = None,
    browser: Browser | None = None,
    keys: KeyRing | None = None,
) -> SiftApp:
    """Build the ASGI app; it owns ``db``, ``fetcher`` and ``render_pool`` and closes them.

    ``render_pool`` defaults to ``render_workers`` workers (0: one) started on first use
    (tests); ``sift serve``
    passes one worker per core, started with the app. ``keys`` defaults to the configured
    callers; ``sift serve`` passes a ``KeyRing`` that reloads on SIGHUP and knows the
    operator key.
    """
    keys = keys or KeyRing.from_settings(settings)
    metrics = Metrics()
    # Launched lazily, on the first page that needs it (absent when Chromium is not here).
    browser = browser or build_browser(settings, fetcher, metrics=metrics)
    access_log = AccessLog() if settings.access_log else None
    wiring = _Wiring(settings, db, fetcher, render_pool, browser, keys, metrics, access_log)
    app = SiftApp(
        title="sift",
        version=__version__,
        lifespan=partial(_lifespan, wiring),
        description="Clean, capped, cacheable web content for programs.",
        docs_url=None,  # /docs and /redoc come from the console, with assets served offline
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.keys = keys
    app.state.metrics = metrics
    install_error_handlers(app)
    declare_bearer_auth(app)
    install_batch_routes(app)
    install_crawl_routes(app)
    install_delivery_routes(app, owns=partial(_owns_watch, app))
    install_watch_routes(app)
    hot_routes = install_fetch_routes(app)
    install_screenshot_routes(app)
    install_stats_routes(app)
    install_console(app)
    wiring.mcp_http = install_mcp(
        app, settings, lambda: Core(app.state.service, app.state.batch, app.state.watches), keys
    )
    # Host/Origin refusals are observed (counted and logged) like any other answer: the
    # guard sits inside ObserveMiddleware, on both paths.
    app.add_middleware(HostGuard, settings=settings, keys=keys)
    app.add_middleware(ObserveMiddleware, metrics=metrics, access_log=access_log)
    app.set_hot_routes(
        hot_routes,
        lambda inner: ObserveMiddleware(
            HostGuard(inner, settings=settings, keys=keys), metrics=metrics, access_log=access_log
        ),
    )
    _install_ops_routes(app, wiring)
    return app


@asynccontextmanager
async def _lifespan(w: _Wiring, app: FastAPI) -> AsyncIterator[None]:
    """Start the parts (``sift.assembly.assemble``: the database worker thread and the batch
    store, the render pool, the fetcher's connection pools, the service), then the batch
    runner; at shutdown stop the runner first, then close the parts in reverse."""
    settings, keys = w.settings, w.keys
    assert w.mcp_http is not None  # create_app installs it before the app can start
    async with assemble(
        settings,
        db=w.db,
        fetcher=w.fetcher,
        render_pool=w.render_pool or build_render_pool(settings, settings.render_workers or 1),
        start_pool=w.render_pool is not None,
        browser=w.browser,
        metrics=w.metrics,
        store=True,
        webhooks=True,
        watches=True,
    ) as parts:
        app.state.store = parts.store
        app.state.deliverer = parts.deliverer
        app.state.watches = parts.watches
        if parts.deliverer is not None:  # a webhook goes out under its owner's class of now
            parts.deliverer.follow_callers(lambda: keys.callers)
        app.state.adb = parts.adb
        app.state.service = parts.service
        # Everything allocated so far (modules, schemas, settings) lives for the whole run:
        # move it out of the collector's reach so full collections stay short under load.
        # Collect first, so no garbage cycle is frozen with it.
        gc.collect()
        gc.freeze()
        assert parts.store is not None
        runner = await start_batch(app, settings, parts.store, parts.service)
        # sift serve: keys reload when their config file changes and on `kill -HUP` (which
        # `sift keys add/remove` send too).
        watcher = asyncio.create_task(keys.watch(), name="sift-keys-watch")
        if keys.reloadable:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, keys.reload)
        try:
            async with w.mcp_http.run():  # the /mcp transport's task group
                yield
        finally:
            watcher.cancel()
            if keys.reloadable:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            # Running targets and watch checks share one grace.
            grace_s = settings.batch.shutdown_grace_s
            scheduler = parts.watches.scheduler if parts.watches is not None else None
            await asyncio.gather(
                runner.stop(grace_s), *([scheduler.stop(grace_s)] if scheduler else [])
            )
            if w.access_log is not None:
                w.access_log.flush()


def _install_ops_routes(app: SiftApp, w: _Wiring) -> None:
    """``GET /healthz`` and ``GET /metrics``."""
    settings, keys, metrics, browser = w.settings, w.keys, w.metrics, w.browser

    @app.get(
        "/healthz",
        tags=["ops"],
        summary="Liveness, database and render check",
        response_model=None,
        responses={200: {"model": Health}, 500: ERROR_RESPONSES[500], 503: ERROR_RESPONSES[503]},
    )
    async def healthz() -> Response:
        adb: AsyncDB = app.state.adb
        await adb.run(DB.check)
        broken = await app.state.service.render_pool.check()
        if broken is not None:
            raise RenderUnavailable(f"sift cannot render pages: {broken}")
        store: BatchStore = app.state.store
        if store.backend != "sqlite":  # the embedded store is the database just checked
            await store.check()
        body = {"ok": True, "version": __version__, "browser": browser.state}
        return Response(dumps(body), media_type="application/json")

    @app.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
        openapi_extra=keyed(),  # when metrics_require_key is set
    )
    async def get_metrics(request: Request) -> Response:
        # Traffic by class and route is for the operator: with keys, a fleet key (or the
        # local operator key) unless opened; anonymous mode has no keys to ask for.
        if settings.metrics_require_key and not keys.anonymous:
            principal = authenticate(keys, request.headers.get("authorization"))
            if principal.caller_class != "fleet":
                raise Unauthorized(
                    "GET /metrics needs a fleet caller's key (metrics_require_key = true)",
                    hint="Send 'Authorization: Bearer <key>' with the key of a fleet caller.",
                )
        adb: AsyncDB = app.state.adb
        stats = await adb.run(DB.stats)
        metrics.cache_bytes.set(stats.get("bytes", 0))
        metrics.cache_evictions.set(stats.get("evictions", 0))
        store: BatchStore = app.state.store
        batch = stats if store.backend == "sqlite" else await store.batch_stats()
        metrics.batch_bytes.set(batch.get("batch_bytes", 0))
        work = getattr(store, "work", None)
        counters: dict[str, int] = {}
        if work is not None:
            counters = {
                "fenced_writes": work.fenced_writes,
                "reaped": work.reaped,
                "interrupted": work.interrupted,
            }
        runner = app.state.batch.runner
        latencies: list[float] = getattr(runner, "claim_seconds", [])
        if hasattr(runner, "leases_lost"):
            counters["leases_lost"] = runner.leases_lost
        metrics.record_store(store.backend, counters, latencies)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")
