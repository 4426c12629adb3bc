"""The MCP watch tools (``watch``, ``watches``, ``changes``) over streamable HTTP with the
SDK's real client, on a real app whose scheduler runs on the real clock."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from apphelpers import FLEET_KEY, RESTRICTED_KEY, auth, running_app
from mcphelpers import call, error_of, mcp_http_session
from sift.config import WatchSettings
from upstream import Upstream
from watchrig import watch_settings


@pytest.fixture
async def base(tmp_path: Path) -> AsyncIterator[str]:
    settings = dataclasses.replace(
        watch_settings(tmp_path), watch=WatchSettings(tick_s=0.05, jitter_s=0.0)
    )
    async with running_app(settings) as url:
        yield url


async def test_watch_watches_and_changes_share_the_api(base: str) -> None:
    async with (
        Upstream() as up,
        mcp_http_session(base, FLEET_KEY) as session,
        httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY)) as api,
    ):
        up.page("/m", b"<p>over mcp</p>")
        made = await call(session, "watch", {"url": up.url("/m"), "every": "1s", "ignore": [".ad"]})
        assert made.is_error is False, made.content
        watch = made.structured_content
        assert watch is not None
        assert (watch["url"], watch["every_s"], watch["ignore"]) == (up.url("/m"), 1.0, [".ad"])
        listed = (await call(session, "watches", {})).structured_content
        assert listed is not None and [w["id"] for w in listed["items"]] == [watch["id"]]
        # The same watch on the API.
        assert (await api.get(f"/v1/watches/{watch['id']}")).status_code == 200
        deadline = time.monotonic() + 30
        while True:
            got = (await call(session, "changes", {"id": watch["id"]})).structured_content
            assert got is not None
            if len(got["events"]) >= 2:
                break
            assert time.monotonic() < deadline, got
            await asyncio.sleep(0.05)
        assert (got["id"], got["url"]) == (watch["id"], up.url("/m"))
        assert [e["outcome"] for e in got["events"][:2]] == ["ok", "ok"]
        assert got["events"][0]["seq"] > got["events"][1]["seq"]
        # The page never changed: every check was new or same (or bore no change field).
        quiet = await call(session, "changes", {"id": watch["id"], "only_changes": True})
        assert quiet.structured_content is not None
        assert quiet.structured_content["events"] == []


async def test_tool_refusals(base: str) -> None:
    async with mcp_http_session(base, RESTRICTED_KEY) as session:
        err = error_of(await call(session, "watch", {"url": "http://127.0.0.1:8/", "every": "1h"}))
        assert err["code"] == "blocked_address"
        err = error_of(await call(session, "watch", {"url": "https://a.test/", "every": "0.5"}))
        assert (err["code"], err["message"]) == (
            "invalid_request",
            "every: 0.5 s is shorter than this caller's minimum interval of 1 s",
        )
        err = error_of(await call(session, "changes", {"id": "nope"}))
        assert (err["code"], err["message"]) == ("not_found", "no watch 'nope'")
        err = error_of(await call(session, "changes", {"id": "nope", "limit": 0}))
        assert err["message"] == "limit: expected an integer from 1 to 100"
