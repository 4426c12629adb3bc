"""The one error envelope on every batch route and every failure it can provoke."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

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
from sift.config import BatchSettings
from test_api_errors import check_envelope
from upstream import Upstream


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Upstream]]:
    release = asyncio.Event()
    async with Upstream(host=PUBLIC_HOST) as up:

        async def hang(request: web.Request) -> web.StreamResponse:
            await release.wait()
            return web.Response(text="late", content_type="text/plain")

        up.route("/hang", hang)
        settings = make_settings(tmp_path, upstream_port=up.port)
        settings = dataclasses.replace(
            settings,
            batch=BatchSettings(live_jobs_total=3, max_request_bytes=4096, shutdown_grace_s=0.1),
        )
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            yield client, up
        release.set()


async def test_every_batch_failure_has_the_envelope(
    env: tuple[httpx.AsyncClient, Upstream],
) -> None:
    client, up = env
    fleet, restricted = auth(FLEET_KEY), auth(RESTRICTED_KEY)
    # A public name (for the test egress), so the jobs of both classes stay live.
    ok = {"targets": [f"http://{PUBLIC_NAME}:{up.port}/hang"]}

    def idem(key: str, h: dict[str, str] = fleet) -> dict[str, str]:
        return {**h, "Idempotency-Key": key}

    cases: list[tuple[str, str, dict[str, str], object, int, str]] = [
        ("POST", "/v1/batch", {"Idempotency-Key": "k"}, ok, 401, "unauthorized"),
        ("GET", "/v1/batch/x", {"Authorization": "Bearer wrong"}, None, 401, "unauthorized"),
        ("DELETE", "/v1/batch/x", {}, None, 401, "unauthorized"),
        ("GET", "/v1/batch/x/results.ndjson", {}, None, 401, "unauthorized"),
        ("POST", "/v1/batch", fleet, ok, 422, "invalid_request"),  # no Idempotency-Key
        ("POST", "/v1/batch", idem("k" * 256), ok, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("a\tb"), ok, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {"targets": []}, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {"targets": "x"}, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {"urls": ["x"]}, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {**ok, "options": []}, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {**ok, "options": {"url": "x"}}, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {**ok, "options": {"offset": -1}}, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {"targets": ["gopher://x/"]}, 422, "invalid_request"),
        ("POST", "/v1/batch", idem("k"), {"targets": ["x"] * 10_001}, 413, "request_too_large"),
        (
            "POST",
            "/v1/batch",
            idem("k", restricted),
            {"targets": ["x"] * 501},
            413,
            "request_too_large",
        ),
        (
            "POST",
            "/v1/batch",
            idem("k"),
            {"targets": [up.url("/?" + "x" * 5000)]},
            413,
            "request_too_large",
        ),
        ("GET", "/v1/batch/nope", fleet, None, 404, "not_found"),
        ("GET", "/v1/batch/nope/results", fleet, None, 404, "not_found"),
        ("GET", "/v1/batch/nope/results.ndjson", fleet, None, 404, "not_found"),
        ("DELETE", "/v1/batch/nope", fleet, None, 404, "not_found"),
        ("GET", "/v1/batch/nope/results?limit=0", fleet, None, 422, "invalid_request"),
        ("GET", "/v1/batch/nope/results?limit=1001", fleet, None, 422, "invalid_request"),
        ("GET", "/v1/batch/nope/results?offset=-1", fleet, None, 422, "invalid_request"),
        ("GET", "/v1/batch/nope/results?offset=x", fleet, None, 422, "invalid_request"),
        ("PUT", "/v1/batch", fleet, None, 405, "method_not_allowed"),
        ("POST", "/v1/batch/x", fleet, None, 405, "method_not_allowed"),
        # Quotas: restricted may hold 2 live jobs; the server 3 in total.
        ("POST", "/v1/batch", idem("q1", restricted), ok, 202, ""),
        ("POST", "/v1/batch", idem("q2", restricted), ok, 202, ""),
        ("POST", "/v1/batch", idem("q3", restricted), ok, 429, "quota_exceeded"),
        ("POST", "/v1/batch", idem("f1"), ok, 202, ""),
        ("POST", "/v1/batch", idem("f2"), ok, 503, "service_busy"),
    ]
    for method, path, headers, body, status, code in cases:
        kwargs: dict[str, object] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        r = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
        if status == 202:
            assert r.status_code == 202, r.text
            continue
        check_envelope(r, status, code)
        if status in (429, 503):
            assert r.headers["retry-after"].isdigit()
    for raw in (b"", b"{", b"[]", b'"x"', b"\xff\xfe"):
        r = await client.post("/v1/batch", content=raw, headers=idem("raw"))
        check_envelope(r, 422, "invalid_request")
