"""``GET /v1/stats``: the cache and batch numbers as JSON, for fleet callers (and the operator).

``/metrics`` says the same to Prometheus; this route exists for people and small tools (the
web console draws its cache page from it) that should not parse the exposition format.
Only aggregates: no URL, caller name or job id is in it, yet it is still refused to
restricted callers (and the anonymous one) — how busy a shared sift is, and with how much
cached, is the operator's business.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from sift import __version__
from sift.api.auth import authenticate
from sift.api.schema import ERROR_RESPONSES, keyed
from sift.dcache import DB, AsyncDB
from sift.errors import Unauthorized
from sift.jsonio import dumps
from sift.metrics import Metrics
from sift.store import BatchStore

CACHE_OUTCOMES = ("hit", "miss", "revalidated")


class CacheStats(BaseModel):
    bytes: int = Field(description="Stored bytes of cached bodies, renders and screenshots.")
    max_bytes: int = Field(description="The content cache's byte budget.")
    pages: int
    bodies: int
    renders: int
    robots: int = Field(description="Stored robots.txt entries.")
    screenshots: int = Field(description="Screenshots held (format screenshot).")
    evictions: int = Field(description="Entries evicted since the server started.")
    outcomes: dict[str, int] = Field(
        description="Fetch answers by their envelope's cache field (hit, miss, revalidated) "
        "since the server started."
    )
    totals: dict[str, int] = Field(
        description="The same counts since the database was created (what `sift stats` shows)."
    )


class BatchStats(BaseModel):
    bytes: int = Field(description="Bytes of stored batch results.")
    max_bytes: int = Field(description="The batch store's byte budget.")
    jobs: int = Field(description="Jobs held, every caller's (all nodes', on a shared store).")
    live_jobs: int = Field(description="Queued or running jobs, every caller's.")


class Stats(BaseModel):
    """Aggregates only: no URLs, callers or job ids."""

    version: str
    browser: str = Field(description="absent, ready or broken (see /healthz).")
    browser_pages: int = Field(description="Pages loaded in the browser, ever.")
    now: int = Field(description="The server's clock, unix seconds.")
    cache: CacheStats
    batch: BatchStats


def _cache_outcomes(metrics: Metrics) -> dict[str, int]:
    get = metrics.registry.get_sample_value
    return {o: int(get("sift_cache_total", {"result": o}) or 0) for o in CACHE_OUTCOMES}


def install_stats_routes(app: FastAPI) -> None:
    async def stats(request: Request) -> Response:
        principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
        if principal.caller_class != "fleet":
            raise Unauthorized(
                "GET /v1/stats needs a fleet caller's key (or the operator key)",
                hint="Send 'Authorization: Bearer <key>' with the key of a fleet caller; the "
                "operator key of a running sift serve is in DATA_DIR/operator.json.",
            )
        adb: AsyncDB = request.app.state.adb
        raw = await adb.run(DB.stats)  # the content cache is this node's
        counters = await request.app.state.service.counter_totals()
        store: BatchStore = request.app.state.store  # the batch store may be shared (PostgreSQL)
        batch = raw if store.backend == "sqlite" else await store.batch_stats()
        live = await store.live_batch_jobs_total()
        settings = request.app.state.settings
        browser = request.app.state.service.browser
        body: dict[str, Any] = {
            "version": __version__,
            "browser": "absent" if browser is None else browser.state,
            "browser_pages": counters.get("browser_pages", 0),
            "now": int(time.time()),
            "cache": {
                "bytes": raw.get("bytes", 0),
                "max_bytes": raw.get("max_bytes", 0),
                "pages": raw.get("pages", 0),
                "bodies": raw.get("bodies", 0),
                "renders": raw.get("renders", 0),
                "robots": raw.get("robots", 0),
                "screenshots": raw.get("shots", 0),
                "evictions": raw.get("evictions", 0),
                "outcomes": _cache_outcomes(request.app.state.metrics),
                "totals": {o: counters.get(o, 0) for o in CACHE_OUTCOMES},
            },
            "batch": {
                "bytes": batch.get("batch_bytes", 0),
                "max_bytes": settings.batch.max_bytes,
                "jobs": batch.get("batch_jobs", 0),
                "live_jobs": live,
            },
        }
        return Response(dumps(body), media_type="application/json")

    app.add_api_route(
        "/v1/stats",
        stats,
        methods=["GET"],
        tags=["ops"],
        summary="Cache and batch numbers as JSON (fleet callers and the operator only)",
        response_model=None,
        responses={200: {"model": Stats}, **ERROR_RESPONSES},
        openapi_extra=keyed(),
    )
