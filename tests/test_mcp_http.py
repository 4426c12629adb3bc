"""`/mcp` on a running `sift serve`: the MCP SDK's streamable-HTTP client, bearer keys.

Same keys, same classes, same core as `/v1/*`: a page fetched through the API is a cache
hit through MCP, a job submitted through MCP is the caller's job on `/v1/batch`, and the
restricted caller is refused loopback with exactly the error `/v1/fetch` gives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from mcp import ClientSession

from mcphelpers import call, error_of, mcp_http_session, texts
from servehelpers import Served, sift_serve
from sift.options import MAX_INT
from upstream import Upstream

PAGE = (
    "<html><head><title>Over HTTP</title></head><body><article><h1>Heading</h1>"
    "<p>A paragraph long enough to be the main content of this small test page.</p>"
    "</article></body></html>"
)
CONTENT = "# Heading\n\nA paragraph long enough to be the main content of this small test page."


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with sift_serve(tmp_path_factory.mktemp("serve")) as s:
        yield s


def mcp_http(served: Served, key: str) -> AbstractAsyncContextManager[ClientSession]:
    return mcp_http_session(served.base_url, key)


async def test_every_tool_over_http_shares_the_core(served: Served) -> None:
    api = httpx.AsyncClient(
        base_url=served.base_url, headers={"Authorization": f"Bearer {served.fleet_key}"}
    )
    async with Upstream() as up, api:
        up.page("/page", PAGE)
        up.page("/other", PAGE.replace("Over HTTP", "Other"))
        url = up.url("/page")
        # Fetched once through the API ...
        first = await api.post("/v1/fetch", json={"url": url, "max_bytes": 32768})
        assert (first.status_code, first.json()["cache"]) == (200, "miss")
        async with mcp_http(served, served.fleet_key) as session:
            tools = await session.list_tools()
            assert {t.name for t in tools.tools} == {
                "fetch",
                "batch_submit",
                "batch_status",
                "batch_results",
                "crawl",
                "map",
                "watch",
                "watches",
                "changes",
            }
            # ... and served from the cache through MCP.
            got = await call(session, "fetch", {"url": url})
            assert got.is_error is False
            content, foot = texts(got)
            assert content == CONTENT
            digest = first.json()["digest"]
            # Too short to have a kind: "other", and no metadata, so no "page:" line.
            assert (first.json()["page_type"], first.json()["metadata"]) == ("other", {})
            assert foot == (
                "---\n"
                "title: Over HTTP\n"
                f"final_url: {url}\n"
                "status: 200 | text/html; charset=utf-8 | cache hit\n"
                "bytes: 0-82 of 82 | truncated: no\n"
                f"digest: {digest}"
            )
            assert up.hits["/page"] == 1

            urls = [url, up.url("/other")]
            job = (
                await call(session, "batch_submit", {"urls": urls, "idempotency_key": "http-1"})
            ).structured_content
            assert job is not None and job["created"] is True
            for _ in range(400):
                view = (await call(session, "batch_status", {"id": job["id"]})).structured_content
                assert view is not None
                if view["status"] not in ("queued", "running"):
                    break
                await asyncio.sleep(0.05)  # the job runs in the server process
            assert view["status"] == "done"
            results = (await call(session, "batch_results", {"id": job["id"]})).structured_content
            assert results is not None
            assert [(i["idx"], i["title"], i["digest"] == digest) for i in results["items"]] == [
                (0, "Over HTTP", True),
                (1, "Other", False),
            ]
            assert results["next_offset"] is None
        # The job is the caller's job on /v1/batch too; another caller cannot see it.
        status = await api.get(f"/v1/batch/{job['id']}")
        assert (status.status_code, status.json()["status"]) == (200, "done")
        other = await api.get(
            f"/v1/batch/{job['id']}",
            headers={"Authorization": f"Bearer {served.restricted_key}"},
        )
        assert other.status_code == 404
        assert up.hits["/page"] == 1  # the batch reused the cached page


async def test_restricted_caller_is_refused_loopback_as_on_the_api(served: Served) -> None:
    async with Upstream() as up:
        up.page("/page", PAGE)
        url = up.url("/page")
        async with httpx.AsyncClient(base_url=served.base_url) as api:
            refused = await api.post(
                "/v1/fetch",
                json={"url": url},
                headers={"Authorization": f"Bearer {served.restricted_key}"},
            )
        assert refused.status_code == 403
        async with mcp_http(served, served.restricted_key) as session:
            result = await call(session, "fetch", {"url": url})
        assert result.is_error is True
        assert result.structured_content is None
        assert result.meta == {"sift/error": refused.json()["error"]}
        err = refused.json()["error"]
        assert err["code"] == "blocked_address"
        assert texts(result) == [f"blocked_address: {err['message']}\nhint: {err['hint']}"]
        assert up.hits["/page"] == 0


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-key"])
async def test_mcp_needs_a_key(served: Served, authorization: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(base_url=served.base_url) as api:
        response = await api.post("/mcp", json=request, headers=headers)
    # 403, not 401: MCP clients answer a 401 with an OAuth sign-in sift does not offer.
    assert response.status_code == 403
    assert "www-authenticate" not in response.headers
    assert response.json()["error"]["code"] == "unauthorized"


async def test_options_are_checked_as_the_schema_says(served: Served) -> None:
    """A bad option is a tool error with code, message and hint — never accepted silently
        (batch_submit's options name the fetch options that shape a page: robots, offset … are
    not among them)."""
    url = "http://127.0.0.1:9/never-fetched"
    small = f"max_bytes: must be between 4 and {MAX_INT}"
    cases = [
        ("fetch", {"url": url, "max_bytes": 3}, f"invalid options: {small}"),
        ("batch_submit", {"urls": [url], "options": {"max_bytes": 2}}, f"options: {small}"),
        (
            "batch_submit",
            {"urls": [url], "options": {"robots": False}},
            "options: unknown option robots",
        ),
        (
            "batch_submit",
            {"urls": [url], "options": {"offset": 5, "links": True}},
            "options: unknown option links, offset",
        ),
        (
            "batch_submit",
            {"urls": [url], "options": {"format": "pdf"}},
            "options: format: expected one of markdown, text, html, raw, screenshot",
        ),
        (
            "batch_submit",
            {"urls": [url], "options": {"actions": [{"action": "click"}]}},
            "options: actions[0]: click needs selector",
        ),
        (
            "batch_submit",
            {"urls": [url], "options": {"headers": {"Host": "x"}}},
            "options: headers: Host is not allowed (sift frames the request itself)",
        ),
    ]
    async with mcp_http(served, served.fleet_key) as session:
        for tool, args, message in cases:
            err = error_of(await call(session, tool, args))
            assert (err["code"], err["message"]) == ("invalid_request", message)


async def test_message_size_is_bounded_by_the_callers_class(served: Served) -> None:
    """Issue 24 finding 8: /mcp took 16 MiB from any class. A restricted caller's limit is
    its batch limit (64 KiB + 500 targets x 2 KiB = 1,089,536 bytes, above the 1 MiB of
    max_request_bytes); one byte more is refused 413 in the envelope, with or without a
    Content-Length, and a fleet caller's message of that size is served."""
    limit = (64 << 10) + 500 * (2 << 10)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {}}}
    skeleton = json.dumps({**request, "params": {"_meta": {"pad": ""}}}).encode()
    padded = {**request, "params": {"_meta": {"pad": "x" * (limit + 1 - len(skeleton))}}}
    body = json.dumps(padded).encode()
    assert len(body) == limit + 1

    def headers(key: str) -> dict[str, str]:
        return {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {key}",
        }

    async def chunked() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 65536):
            yield body[i : i + 65536]

    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as api:
        declared = await api.post("/mcp", content=body, headers=headers(served.restricted_key))
        streamed = await api.post("/mcp", content=chunked(), headers=headers(served.restricted_key))
        fleet = await api.post("/mcp", content=body, headers=headers(served.fleet_key))
    assert declared.status_code == 413
    assert declared.json()["error"] == {
        "code": "request_too_large",
        "message": (
            f"an MCP message of {limit + 1} bytes exceeds this caller's limit of {limit} bytes"
        ),
        "hint": "Send a smaller request: fewer targets or a smaller body.",
    }
    assert streamed.status_code == 413
    assert streamed.json()["error"]["message"] == (
        f"an MCP message exceeds this caller's limit of {limit} bytes"
    )
    assert fleet.status_code == 200
    assert "fetch" in {tool["name"] for tool in fleet.json()["result"]["tools"]}
