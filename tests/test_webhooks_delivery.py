"""Signed webhook delivery through a running sift (real app, real receivers on loopback):
the signature verifies with the published algorithm and the client's helper, a 500 is
retried, a redirect is not followed, the delivery log is the caller's alone, and a receiver
that never answers holds up no other caller."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from fastapi import FastAPI
from standardwebhooks import Webhook

from apphelpers import FLEET2_KEY, FLEET_KEY, auth, fetcher_for, running_app
from sift.client import verify_webhook
from sift.config import Caller
from sift.dcache import DB, AsyncDB
from sift.fetch import FetchPolicy
from sift.jsonio import dumps
from sift.principal import OPERATOR, Principal
from sift.store.outbox import outbox_of
from sift.store.sqlite.store import SqliteBatchStore
from sift.webhooks.deliverer import Deliverer
from sift.webhooks.signing import new_secret
from upstream import Upstream
from webhookrig import FAST, Receiver, deliverer_of, settings_for, until

EVENT: dict[str, Any] = {
    "type": "watch.changed",
    "watch_id": "w1",
    "url": "https://example.test/prices",
    "change": {"status": "changed", "added": 1, "removed": 1, "diff": "-a\n+b\n"},
    "fetched_at": 1_700_000_000,
}


async def _watches(client: httpx.AsyncClient, *labels: str) -> dict[str, str]:
    """Real watches of the client's caller, one per label: a delivery log is a watch's and
    its owner's. The rig's scheduler is off (webhookrig), so they send no events of their own."""
    ids: dict[str, str] = {}
    for label in labels:
        body = {"url": f"https://example.test/{label}", "every": 3600}
        r = await client.post("/v1/watches", json=body)
        assert r.status_code == 201, r.text
        ids[label] = r.json()["id"]
    return ids


async def _log(client: httpx.AsyncClient, watch_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/watches/{watch_id}/deliveries")
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def test_a_receiver_verifies_the_signature_and_the_log_is_the_callers_own(
    tmp_path: Path,
) -> None:
    apps: list[FastAPI] = []
    async with (
        Upstream() as up,
        running_app(settings_for(tmp_path), customize=apps.append) as base,
        httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY), timeout=30) as client,
    ):
        receiver = Receiver(up)
        url = receiver.hook("/hook")
        secret = new_secret()
        deliverer = deliverer_of(apps)
        ws = await _watches(client, "w1")
        msg_id = await deliverer.enqueue(
            owner="indexer", source="watch", source_id=ws["w1"], url=url, secret=secret, event=EVENT
        )
        (got,) = await receiver.wait("/hook", 1)
        assert got.headers["webhook-id"] == msg_id
        assert got.headers["content-type"] == "application/json"
        assert got.body == dumps(EVENT)
        assert Webhook(secret).verify(got.body, got.headers) == EVENT  # the published library
        assert verify_webhook(secret, got.headers, got.body) is None  # sift's client
        stamp = int(got.headers["webhook-timestamp"])
        assert abs(stamp - got.at) <= 5

        async def delivered() -> bool:
            return (await _log(client, ws["w1"]))[0]["state"] == "delivered"

        await until(delivered)
        (item,) = await _log(client, ws["w1"])
        (attempt,) = item.pop("log")
        assert item == {
            "id": msg_id,
            "type": "watch.changed",
            "url": url,
            "state": "delivered",
            "attempts": 1,
            "next_attempt_at": None,
            "created_at": item["created_at"],
            "finished_at": item["finished_at"],
        }
        assert (attempt["n"], attempt["status"], attempt["error"]) == (1, 200, None)
        assert attempt["duration_ms"] >= 0
        # Another caller: the same 404 as a watch that does not exist.
        for key, watch_id in ((FLEET2_KEY, ws["w1"]), (FLEET_KEY, "nope")):
            r = await client.get(f"/v1/watches/{watch_id}/deliveries", headers=auth(key))
            assert r.status_code == 404
            assert r.json() == {
                "error": {
                    "code": "not_found",
                    "message": f"watch {watch_id} not found",
                    "hint": r.json()["error"]["hint"],
                }
            }


async def test_a_500_is_retried_once_and_a_redirect_is_never_followed(tmp_path: Path) -> None:
    apps: list[FastAPI] = []
    async with (
        Upstream() as up,
        running_app(settings_for(tmp_path), customize=apps.append) as base,
        httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY), timeout=30) as client,
    ):
        receiver = Receiver(up)
        flaky = receiver.hook("/flaky", (500,))
        moved = receiver.hook("/moved", (302, 302, 302), headers={"Location": "/elsewhere"})
        elsewhere = receiver.hook("/elsewhere")
        deliverer = deliverer_of(apps)
        secret = new_secret()
        ws = await _watches(client, "flaky", "moved")
        ids = [
            await deliverer.enqueue(
                owner="indexer", source="watch", source_id=ws[w], url=u, secret=secret, event=EVENT
            )
            for w, u in (("flaky", flaky), ("moved", moved))
        ]
        first, second = await receiver.wait("/flaky", 2)
        for got in (first, second):  # the same event, the same id, each attempt signed
            assert got.headers["webhook-id"] == ids[0]
            verify_webhook(secret, got.headers, got.body)

        async def final(watch_id: str) -> bool:
            return (await _log(client, watch_id))[0]["state"] in ("delivered", "failed")

        await until(lambda: final(ws["flaky"]))
        await until(lambda: final(ws["moved"]))
        (flaky_item,) = await _log(client, ws["flaky"])
        assert (flaky_item["state"], flaky_item["attempts"]) == ("delivered", 2)
        assert [(a["n"], a["status"], a["error"]) for a in flaky_item["log"]] == [
            (1, 500, "http_500"),
            (2, 200, None),
        ]
        (moved_item,) = await _log(client, ws["moved"])
        assert (moved_item["state"], moved_item["attempts"]) == ("failed", FAST.max_attempts)
        assert [(a["status"], a["error"]) for a in moved_item["log"]] == [(302, "http_302")] * 3
        assert len(receiver.got["/flaky"]) == 2
        assert len(receiver.got["/moved"]) == 3
        assert receiver.got[elsewhere.removeprefix(up.url(""))] == []


async def test_a_receiver_that_never_answers_does_not_delay_another_caller(
    tmp_path: Path,
) -> None:
    """Caller ``crawler``'s receiver never answers; each of its attempts may hang for
    ``timeout_s`` = 40 s. Caller ``indexer``'s event, enqueued after three of crawler's,
    must still arrive well before the first of those times out: the bound asserted is 20 s
    (generous on a loaded machine: it normally takes one poll, 50 ms), which a deliverer
    that sends in order, or lets one owner take every slot (concurrency 2, per owner 1
    here), misses by 20 s at least."""
    settings = settings_for(
        tmp_path,
        webhooks=FAST.__class__(
            poll_s=0.05, timeout_s=40.0, lease_s=80.0, concurrency=2, per_owner=1
        ),
    )
    apps: list[FastAPI] = []
    async with Upstream() as up, running_app(settings, customize=apps.append):
        receiver = Receiver(up)
        hang = receiver.hook("/hang", hang=True)
        quick = receiver.hook("/quick")
        deliverer = deliverer_of(apps)
        for i in range(3):
            await deliverer.enqueue(
                owner="crawler",
                source="watch",
                source_id=f"slow{i}",
                url=hang,
                secret=new_secret(),
                event=EVENT,
            )
        await receiver.wait("/hang", 1)
        started = time.monotonic()
        await deliverer.enqueue(
            owner="indexer",
            source="watch",
            source_id="w",
            url=quick,
            secret=new_secret(),
            event=EVENT,
        )
        await receiver.wait("/quick", 1, timeout_s=20.0)
        assert time.monotonic() - started < 20.0
        # Crawler holds its one slot: its other two events wait, they never took the other.
        assert len(receiver.got["/hang"]) == 1

        async def quick_recorded() -> bool:
            return deliverer.in_flight == 1

        await until(quick_recorded)
        assert len(receiver.got["/hang"]) == 1


async def test_each_attempt_has_a_deadline_and_reads_a_bounded_answer(tmp_path: Path) -> None:
    """A receiver that never answers fails each attempt at ``timeout_s`` (upstream_timeout);
    one that answers 200 with an endless body is delivered: sift reads
    ``max_response_bytes`` of it and hangs up (unbounded, it would time out instead)."""
    settings = settings_for(
        tmp_path,
        webhooks=dataclasses.replace(
            FAST, timeout_s=1.0, lease_s=2.0, max_attempts=2, max_response_bytes=1024
        ),
    )
    apps: list[FastAPI] = []

    async def endless(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse()
        await resp.prepare(request)
        while True:
            await resp.write(b"x" * 65536)

    async with (
        Upstream() as up,
        running_app(settings, customize=apps.append) as base,
        httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY), timeout=30) as client,
    ):
        receiver = Receiver(up)
        hang = receiver.hook("/hang", hang=True)
        up.route("/endless", endless)
        deliverer = deliverer_of(apps)
        ws = await _watches(client, "hang", "endless")
        for label, url in (("hang", hang), ("endless", up.url("/endless"))):
            await deliverer.enqueue(
                owner="indexer",
                source="watch",
                source_id=ws[label],
                url=url,
                secret=new_secret(),
                event=EVENT,
            )

        async def final(watch_id: str) -> bool:
            return (await _log(client, watch_id))[0]["state"] in ("delivered", "failed")

        await until(lambda: final(ws["hang"]))
        await until(lambda: final(ws["endless"]))
        (hung,) = await _log(client, ws["hang"])
        assert hung["state"] == "failed"
        assert [(a["status"], a["error"]) for a in hung["log"]] == [(None, "upstream_timeout")] * 2
        assert all(1000 <= a["duration_ms"] < 5000 for a in hung["log"])
        (streamed,) = await _log(client, ws["endless"])
        assert [(a["status"], a["error"]) for a in streamed["log"]] == [(200, None)]
        assert streamed["state"] == "delivered"


async def test_an_event_goes_out_under_its_owners_class_of_now(tmp_path: Path) -> None:
    """Whom an attempt runs as: the operator as given; a configured caller by its class at
    the time of the attempt (the key ring reloads); anyone else as restricted."""
    settings = settings_for(tmp_path)
    adb = AsyncDB(DB.open(":memory:"))
    store = SqliteBatchStore(adb)
    deliverer = Deliverer(
        settings,
        outbox_of(store),
        fetcher_for(settings),
        lambda p, t: FetchPolicy(allow_private=False),
        principals={OPERATOR.name: OPERATOR},
    )
    assert deliverer.principal("operator") == OPERATOR
    assert deliverer.principal("indexer") == Principal("indexer", "fleet")
    assert deliverer.principal("agent") == Principal("agent", "restricted")
    assert deliverer.principal("removed") == Principal("removed", "restricted")
    callers = (Caller("indexer", "restricted", "0" * 64),)  # demoted by a key reload
    deliverer.follow_callers(lambda: callers)
    assert deliverer.principal("indexer") == Principal("indexer", "restricted")
    assert deliverer.principal("crawler") == Principal("crawler", "restricted")
    await adb.close()
