"""A watch, its change and its webhook, end to end (issue 23 items 3 and 4 together): a real
app on loopback runs the watch on the real clock; the page changes; the watch's receiver
gets one ``watch.changed`` event signed with the secret the create answer returned, with the
exact diff; the watch's delivery log shows it, and is empty (not 404) before there is any;
deleting the watch deletes its change history."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from fastapi import FastAPI

from apphelpers import FLEET2_KEY, FLEET_KEY, PUBLIC_NAME, auth, running_app
from sift.client import verify_webhook
from sift.config import WatchSettings
from upstream import Upstream
from watchrig import watch_settings
from webhookrig import FAST, Receiver


async def _checks(client: httpx.AsyncClient, wid: str, n: int) -> dict[str, Any]:
    """Poll the watch until it has ``n`` checks (the scheduler runs them on the real clock)."""
    deadline = time.monotonic() + 30
    while True:
        view: dict[str, Any] = (await client.get(f"/v1/watches/{wid}")).json()
        if view["checks"] >= n:
            return view
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.05)


async def test_a_change_reaches_the_watchs_webhook_signed(tmp_path: Path) -> None:
    async with Upstream(host="127.0.1.1") as up, Upstream() as hooks:
        settings = watch_settings(tmp_path, upstream_port=up.port)
        settings = dataclasses.replace(
            settings, watch=WatchSettings(tick_s=0.05, jitter_s=0.0), webhooks=FAST
        )
        price = {"text": "<p>Price: 10 EUR</p>"}

        async def page(request: web.Request) -> web.Response:
            return web.Response(text=price["text"], content_type="text/html")

        up.route("/price", page)
        receiver = Receiver(hooks)
        hook = receiver.hook("/hook")
        apps: list[FastAPI] = []
        async with (
            running_app(settings, customize=apps.append) as base,
            httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY), timeout=30) as client,
        ):
            url = f"http://{PUBLIC_NAME}:{up.port}/price"
            body = {"url": url, "every": 1, "options": {"format": "text"}, "webhook": hook}
            r = await client.post("/v1/watches", json=body)
            assert r.status_code == 201, r.text
            wid, secret = r.json()["id"], r.json()["webhook_secret"]
            # The owner's log before any event: empty; another caller's view: the same 404
            # as a watch that does not exist.
            r = await client.get(f"/v1/watches/{wid}/deliveries")
            assert (r.status_code, r.json()) == (200, {"items": []})
            other = await client.get(f"/v1/watches/{wid}/deliveries", headers=auth(FLEET2_KEY))
            assert other.status_code == 404

            await _checks(client, wid, 1)  # "new": a first snapshot, no event
            price["text"] = "<p>Price: 12 EUR</p>"
            (got,) = await receiver.wait("/hook", 1)
            assert verify_webhook(secret, got.headers, got.body) is None
            event = json.loads(got.body)
            assert (event["type"], event["watch_id"], event["url"]) == ("watch.changed", wid, url)
            change = event["change"]
            assert (change["status"], change["added"], change["removed"]) == ("changed", 1, 1)
            assert change["diff"].splitlines()[-2:] == ["-Price: 10 EUR", "+Price: 12 EUR"]
            assert receiver.got["/hook"] == [got]  # a "same" check after it sends nothing
            await _checks(client, wid, (await _checks(client, wid, 1))["checks"] + 1)
            assert len(receiver.got["/hook"]) == 1

            deadline = time.monotonic() + 30
            while True:
                (item,) = (await client.get(f"/v1/watches/{wid}/deliveries")).json()["items"]
                if item["state"] == "delivered":
                    break
                assert time.monotonic() < deadline, item
                await asyncio.sleep(0.05)
            assert (item["id"], item["type"], item["attempts"]) == (
                got.headers["webhook-id"],
                "watch.changed",
                1,
            )

            # Deleting the watch deletes its history (never evicted while the watch lives).
            history = apps[0].state.watches.service.changes.history
            kept = await history.snapshots("indexer", f"watch:{wid}", url)
            assert [s.latest for s in kept] == [False, True]
            assert (await client.delete(f"/v1/watches/{wid}")).status_code == 200
            assert await history.snapshots("indexer", f"watch:{wid}", url) == []
