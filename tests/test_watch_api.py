"""/v1/watches over real HTTP (a real app on loopback, its scheduler running on the real
clock with a short minimum interval): create, list, show, delete and their refusals."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apphelpers import FLEET2_KEY, FLEET_KEY, PUBLIC_NAME, RESTRICTED_KEY, auth, running_app
from sift.config import WatchSettings
from upstream import Upstream
from watchrig import watch_settings


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Upstream]]:
    async with Upstream(host="127.0.1.1") as up:
        settings = watch_settings(tmp_path, max_watches=3, upstream_port=up.port)
        settings = dataclasses.replace(
            settings, watch=WatchSettings(tick_s=0.05, jitter_s=0.0, events_kept=5)
        )
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            yield client, up


def _url(up: Upstream, path: str) -> str:
    return f"http://{PUBLIC_NAME}:{up.port}{path}"


async def _until(client: httpx.AsyncClient, key: str, wid: str, checks: int) -> dict[str, Any]:
    """Poll the watch until it has ``checks`` checks (the real scheduler runs them)."""
    deadline = time.monotonic() + 30
    while True:
        view: dict[str, Any] = (await client.get(f"/v1/watches/{wid}", headers=auth(key))).json()
        if view["checks"] >= checks:
            return view
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.05)


async def test_create_list_show_delete(env: tuple[httpx.AsyncClient, Upstream]) -> None:
    client, up = env
    up.page("/p", b"<p>watched</p>")
    url = _url(up, "/p")
    r = await client.post(
        "/v1/watches",
        json={"url": url, "every": "1s", "options": {"format": "text"}, "ignore": [".clock"]},
        headers=auth(RESTRICTED_KEY),
    )
    assert r.status_code == 201, r.text
    created = r.json()
    wid = created["id"]
    assert r.headers["location"] == f"/v1/watches/{wid}"
    assert {k: created[k] for k in ("url", "every_s", "options", "ignore", "webhook")} == {
        "url": url,
        "every_s": 1.0,
        "options": {"format": "text"},
        "ignore": [".clock"],
        "webhook": None,
    }
    assert "webhook_secret" not in created
    # The scheduler checks it at once, then every second.
    shown = await _until(client, RESTRICTED_KEY, wid, 2)
    assert shown["events"][-1]["seq"] == 1 and shown["events"][-1]["outcome"] == "ok"
    assert shown["events"][-1]["http_status"] == 200
    assert shown["failures"] == 0
    assert up.hits["/p"] >= 2
    listed = (await client.get("/v1/watches", headers=auth(RESTRICTED_KEY))).json()
    assert [w["id"] for w in listed["items"]] == [wid]
    assert (await client.get("/v1/watches", headers=auth(FLEET_KEY))).json() == {"items": []}
    r = await client.delete(f"/v1/watches/{wid}", headers=auth(RESTRICTED_KEY))
    assert (r.status_code, r.json()) == (200, {"id": wid, "deleted": True})
    r = await client.get(f"/v1/watches/{wid}", headers=auth(RESTRICTED_KEY))
    assert r.status_code == 404
    hits = up.hits["/p"]
    await asyncio.sleep(1.5)  # a deleted watch is never checked again
    assert up.hits["/p"] == hits


async def test_another_callers_watch_is_404_exactly_like_a_missing_one(
    env: tuple[httpx.AsyncClient, Upstream],
) -> None:
    client, up = env
    r = await client.post(
        "/v1/watches", json={"url": _url(up, "/x"), "every": 3600}, headers=auth(FLEET_KEY)
    )
    wid = r.json()["id"]
    missing = "f" * 24
    for method in ("GET", "DELETE"):
        theirs = await client.request(method, f"/v1/watches/{wid}", headers=auth(FLEET2_KEY))
        absent = await client.request(method, f"/v1/watches/{missing}", headers=auth(FLEET2_KEY))
        assert theirs.status_code == absent.status_code == 404
        assert theirs.json()["error"] == {
            "code": "not_found",
            "message": f"no watch {wid!r}",
            "hint": "Check the id (GET /v1/watches lists yours); only the caller who created "
            "a watch can see it.",
        }
        assert absent.json()["error"]["message"] == f"no watch {missing!r}"
    assert (await client.get(f"/v1/watches/{wid}", headers=auth(FLEET_KEY))).status_code == 200


async def test_refusals(env: tuple[httpx.AsyncClient, Upstream]) -> None:
    client, up = env
    url = _url(up, "/r")

    async def post(body: Any, key: str = RESTRICTED_KEY) -> tuple[int, dict[str, Any]]:
        r = await client.post("/v1/watches", json=body, headers=auth(key))
        return r.status_code, r.json().get("error", {})

    status, err = await post({"url": url, "every": 0.5})
    assert (status, err["code"]) == (422, "invalid_request")
    assert err["message"] == ("every: 0.5 s is shorter than this caller's minimum interval of 1 s")
    status, err = await post({"url": url, "every": "soon"})
    assert (status, err["message"]) == (
        422,
        'every: expected seconds or a duration such as "30m"',
    )
    status, err = await post({"url": "ftp://example.test/", "every": 60})
    assert (status, err["code"], err["message"]) == (
        422,
        "invalid_url",
        "url: Only http and https URLs can be fetched, not ftp:.",
    )
    status, err = await post({"every": 60})
    assert (status, err["code"]) == (422, "invalid_request")
    status, err = await post(
        {"url": url, "every": 60, "options": {"headers": {"x": "y"}}}, FLEET_KEY
    )
    assert (status, err["message"]) == (422, "options: headers cannot be stored in a watch")
    status, err = await post({"url": url, "every": 60, "options": {"max_age_s": 5}})
    assert (status, err["message"]) == (422, "options: max_age_s cannot be set on a watch")
    status, err = await post({"url": url, "every": 60, "colour": "red"})
    assert status == 422 and err["message"].startswith("unknown field colour")
    # A restricted caller's loopback URL or webhook is refused before any connection.
    status, err = await post({"url": "http://127.0.0.1:8/", "every": 60})
    assert (status, err["code"]) == (403, "blocked_address")
    status, err = await post({"url": url, "every": 60, "webhook": "http://127.0.0.1:8/hook"})
    assert (status, err["code"]) == (403, "blocked_address")
    assert err["message"].startswith("webhook: refused before any fetch: http://127.0.0.1:8/hook")
    assert (await client.get("/v1/watches", headers=auth(RESTRICTED_KEY))).json() == {"items": []}
    # Quota: three watches per caller in these settings.
    for i in range(3):
        assert (await post({"url": f"{url}{i}", "every": 3600}))[0] == 201
    status, err = await post({"url": url, "every": 3600})
    assert (status, err["code"]) == (429, "quota_exceeded")
    assert err["message"] == "this caller already has 3 watches, its class's limit"
    assert up.hits.get("/hook", 0) == 0


async def test_a_webhook_secret_is_returned_once(env: tuple[httpx.AsyncClient, Upstream]) -> None:
    client, up = env
    body = {"url": _url(up, "/w"), "every": 3600, "webhook": _url(up, "/hook")}
    r = await client.post("/v1/watches", json=body, headers=auth(RESTRICTED_KEY))
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["webhook"] == _url(up, "/hook")
    assert created["webhook_secret"].startswith("whsec_")
    shown = (await client.get(f"/v1/watches/{created['id']}", headers=auth(RESTRICTED_KEY))).json()
    assert "webhook_secret" not in shown and shown["webhook"] == _url(up, "/hook")
