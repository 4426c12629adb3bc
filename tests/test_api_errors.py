"""One error envelope: every route, every failure it can provoke, the same exact shape.

Each case asserts the status, the code, and that the body is exactly
``{"error": {"code", "message", "hint"}}`` with non-empty strings — never FastAPI's
``{"detail": …}``, never a traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from fastapi import FastAPI

from apphelpers import (
    FLEET_KEY,
    PUBLIC_HOST,
    PUBLIC_NAME,
    RESTRICTED_KEY,
    auth,
    make_settings,
    running_app,
)
from upstream import Upstream


def _boom_route(app: FastAPI) -> None:
    async def boom() -> None:
        raise RuntimeError("secret internal detail")

    app.add_api_route("/test-only/boom", boom, methods=["GET"])


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Upstream]]:
    async with Upstream(host=PUBLIC_HOST) as up:

        async def hang(request: web.Request) -> web.StreamResponse:
            await asyncio.sleep(30)
            return web.Response(text="late")

        up.route("/hang", hang)
        up.page("/robots.txt", "User-agent: *\nDisallow: /no\n", content_type="text/plain")
        up.page("/ok", "fine", content_type="text/plain")
        up.page("/bin", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, content_type="image/png")
        settings = make_settings(tmp_path, upstream_port=up.port)
        async with (
            running_app(settings, customize=_boom_route) as base,
            httpx.AsyncClient(base_url=base) as client,
        ):
            yield client, up


def check_envelope(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert list(body) == ["error"]
    assert sorted(body["error"]) == ["code", "hint", "message"]
    assert body["error"]["code"] == code
    assert all(isinstance(v, str) and v for v in body["error"].values())
    assert "Traceback" not in r.text


async def test_every_route_and_failure_has_the_envelope(
    env: tuple[httpx.AsyncClient, Upstream],
) -> None:
    client, up = env
    pub = f"http://{PUBLIC_NAME}:{up.port}"
    fleet, restricted = auth(FLEET_KEY), auth(RESTRICTED_KEY)
    cases: list[tuple[str, str, dict[str, str], object, int, str]] = [
        ("POST", "/v1/fetch", {}, {"url": f"{pub}/ok"}, 401, "unauthorized"),
        ("GET", "/v1/fetch", {"Authorization": "Bearer wrong"}, None, 401, "unauthorized"),
        ("POST", "/v1/fetch", restricted, {"url": "http://127.0.0.1/"}, 403, "blocked_address"),
        ("POST", "/v1/fetch", restricted, {"url": f"{pub}/no"}, 403, "robots_disallowed"),
        ("GET", "/nowhere", fleet, None, 404, "not_found"),
        ("DELETE", "/v1/fetch", fleet, None, 405, "method_not_allowed"),
        (
            "POST",
            "/v1/fetch",
            fleet,
            {"url": f"{pub}/ok", "offset": 1, "digest": "sha256:" + "1" * 64},
            410,
            "snapshot_gone",
        ),
        (
            "POST",
            "/v1/fetch",
            fleet,
            {"url": "x" * 100, "pad": "a" * (1 << 20)},
            413,
            "request_too_large",
        ),
        ("POST", "/v1/fetch", fleet, {"url": "gopher://x.test/"}, 422, "invalid_url"),
        ("POST", "/v1/fetch", fleet, {"url": f"{pub}/ok", "nope": 1}, 422, "invalid_request"),
        ("GET", "/v1/fetch", fleet, None, 422, "invalid_request"),
        (
            "POST",
            "/v1/fetch",
            fleet,
            {"url": f"{pub}/ok", "offset": 99},
            422,
            "offset_out_of_range",
        ),
        (
            "POST",
            "/v1/fetch",
            fleet,
            {"url": f"{pub}/ok", "selector": "a[["},
            422,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/fetch",
            restricted,
            {"url": f"{pub}/ok", "robots": False},
            422,
            "invalid_request",
        ),
        ("POST", "/v1/fetch", fleet, {"url": f"{pub}/bin"}, 502, "unsupported_content_type"),
        ("POST", "/v1/fetch", fleet, {"url": "http://127.0.0.1:1/"}, 502, "connect_failed"),
        ("POST", "/v1/fetch", fleet, {"url": "http://nowhere.test/"}, 502, "dns_failure"),
        (
            "POST",
            "/v1/fetch",
            fleet,
            {"url": f"{pub}/hang", "timeout_s": 0.3},
            504,
            "upstream_timeout",
        ),
        ("GET", "/v1/screenshots/sha256:" + "0" * 64, {}, None, 401, "unauthorized"),
        ("GET", "/v1/screenshots/sha256:" + "0" * 64, fleet, None, 404, "not_found"),
        ("GET", "/v1/screenshots/not-a-digest", restricted, None, 404, "not_found"),
        ("DELETE", "/v1/screenshots/sha256:" + "0" * 64, fleet, None, 405, "method_not_allowed"),
        ("GET", "/test-only/boom", fleet, None, 500, "internal_error"),
        # /v1/watches (docs/watches.md)
        ("GET", "/v1/watches", {"Authorization": "Bearer wrong"}, None, 401, "unauthorized"),
        (
            "POST",
            "/v1/watches",
            restricted,
            {"url": "http://127.0.0.1/", "every": "2h"},
            403,
            "blocked_address",
        ),
        ("GET", "/v1/watches/nope", fleet, None, 404, "not_found"),
        ("DELETE", "/v1/watches/nope", fleet, None, 404, "not_found"),
        ("PUT", "/v1/watches", fleet, None, 405, "method_not_allowed"),
        (
            "POST",
            "/v1/watches",
            fleet,
            {"url": "x", "pad": "a" * (64 << 10)},
            413,
            "request_too_large",
        ),
        ("POST", "/v1/watches", fleet, {"url": f"{pub}/ok", "every": 1}, 422, "invalid_request"),
        (
            "POST",
            "/v1/watches",
            fleet,
            {"url": "gopher://x.test/", "every": "1h"},
            422,
            "invalid_url",
        ),
        ("GET", "/v1/watches/nope?events=-1", fleet, None, 422, "invalid_request"),
    ]
    for method, path, headers, body, status, code in cases:
        kwargs: dict[str, object] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        r = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
        check_envelope(r, status, code)
        if code == "internal_error":
            assert "secret internal detail" not in r.text
    # Bodies that are not JSON objects.
    for raw in (b"", b"{", b"[]", b'"x"', b"\xff\xfe"):
        r = await client.post("/v1/fetch", content=raw, headers=fleet)
        check_envelope(r, 422, "invalid_request")
