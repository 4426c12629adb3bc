"""``POST /v1/crawl`` and ``POST /v1/map`` (docs/crawl.md).

A crawl is a batch job of kind ``crawl``: this route starts it (``crawl.submit``) and the
``/v1/batch/{id}`` routes do the rest — status, results, NDJSON, cancel — unchanged. A map
is answered synchronously (``crawl.map``), under the caller's in-flight limit like a fetch.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from sift.api.auth import authenticate
from sift.api.batch_routes import _json
from sift.api.batch_schema import BatchJobView, idempotency_parameter
from sift.api.crawl_schema import MapResult, crawl_request_body, map_request_body
from sift.api.fetch_routes import read_json
from sift.api.schema import ERROR_RESPONSES, keyed
from sift.batch.submit import check_idem_key
from sift.crawl.crawler import Crawler
from sift.crawl.map import map_site
from sift.crawl.spec import parse_map
from sift.crawl.submit import submit_crawl


def install_crawl_routes(app: FastAPI) -> None:
    async def crawl(request: Request) -> Response:
        principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
        idem_key = check_idem_key(request.headers.get("idempotency-key"))
        settings = request.app.state.settings
        body = await read_json(request, settings.max_request_bytes)
        jobs = request.app.state.batch
        view, created = await submit_crawl(
            jobs, request.app.state.service, principal, idem_key, body, int(time.time())
        )
        if created:
            return _json(view, 202, {"Location": f"/v1/batch/{view['id']}"})
        return _json(view)

    async def map_(request: Request) -> Response:
        principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
        settings = request.app.state.settings
        spec = parse_map(await read_json(request, settings.max_request_bytes))
        service = request.app.state.service
        crawler = Crawler(request.app.state.batch.store, service)
        with service.inflight.hold(principal):
            result = await map_site(crawler, service, principal, spec)
        return _json(result)

    errors: dict[int | str, dict[str, Any]] = dict(ERROR_RESPONSES)
    common: dict[str, Any] = {"tags": ["crawl"], "response_model": None}
    app.add_api_route(
        "/v1/crawl",
        crawl,
        methods=["POST"],
        summary="Crawl a site: a batch job that grows as links are found (idempotent per "
        "Idempotency-Key); follow it on /v1/batch/{id}",
        status_code=202,
        responses={
            202: {"model": BatchJobView, "description": "Crawl job created"},
            200: {"model": BatchJobView, "description": "The live job with this key"},
            **errors,
        },
        openapi_extra={
            **keyed(),
            "requestBody": crawl_request_body(),
            "parameters": idempotency_parameter(),
        },
        **common,
    )
    app.add_api_route(
        "/v1/map",
        map_,
        methods=["POST"],
        summary="The URLs of a site found quickly (sitemaps and the start page's links)",
        responses={200: {"model": MapResult}, **errors},
        openapi_extra={**keyed(), "requestBody": map_request_body()},
        **common,
    )
