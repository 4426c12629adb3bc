"""Job-finished webhooks and the egress guard on webhook delivery, through a running sift.

- A batch job and a crawl with a ``webhook``: the secret comes back once, in the answer that
  created the job; when the job ends one signed ``job.finished`` event arrives, once.
- A restricted caller: a loopback webhook is refused at submit (nothing stored); a name
  ``[egress.resolve]`` maps to the loopback canary, and a public-looking name whose DNS
  answer is re-pointed at the canary after the submit, are refused when sent — at connect
  time, on the resolved address — and the canary counts 0 connections.

Loopback only: the canary listens on 127.0.0.1; "public" addresses are 127.0.1.0/24
(``extra_public_cidrs``), and the resolver knows only the test names.
"""

from __future__ import annotations

import asyncio
import dataclasses
import types
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from fastapi import FastAPI
from standardwebhooks import Webhook

from apphelpers import FLEET_KEY, PUBLIC_HOST, PUBLIC_NAME, RESTRICTED_KEY, auth, running_app
from sift.assembly import build_fetcher
from sift.client import AsyncClient, verify_webhook
from sift.config import ClassesSettings, ClassSettings, EgressSettings
from sift.errors import DnsFailure
from sift.jsonio import loads
from sift.store.outbox import outbox_of
from upstream import CanaryListener, Upstream
from webhookrig import FAST, Receiver, deliverer_of, settings_for, until

CANARY_NAME = "canary.test"  # [egress.resolve]: the loopback canary
MOVING_NAME = "moving.test"  # DNS (the test resolver): public at submit, then the canary
COUNTS = {"pending": 0, "running": 0, "cancelled": 0}


async def _wait_job(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            view: dict[str, Any] = (await client.get(f"/v1/batch/{job_id}")).json()
            if view["status"] not in ("queued", "running"):
                return view
            await asyncio.sleep(0.02)


async def test_a_job_and_a_crawl_send_one_signed_job_finished_event(tmp_path: Path) -> None:
    apps: list[FastAPI] = []
    async with (
        Upstream() as up,
        running_app(settings_for(tmp_path), customize=apps.append) as base,
        httpx.AsyncClient(base_url=base, headers=auth(FLEET_KEY), timeout=30) as client,
    ):
        up.page("/a", "<html><body><p>a</p></body></html>")
        up.page("/b", "<html><body><p>b</p></body></html>")
        receiver = Receiver(up)
        hook = receiver.hook("/job-done")
        crawl_hook = receiver.hook("/crawl-done")
        body = {"targets": [up.url("/a"), up.url("/b")], "webhook": hook}
        r = await client.post("/v1/batch", json=body, headers={"Idempotency-Key": "j1"})
        assert r.status_code == 202, r.text
        job = r.json()
        secret = job.pop("webhook_secret")
        assert secret.startswith("whsec_")
        # Never again: not in a replay, not in the status view.
        replay = await client.post("/v1/batch", json=body, headers={"Idempotency-Key": "j1"})
        assert replay.status_code == 200 and "webhook_secret" not in replay.json()
        (got,) = await receiver.wait("/job-done", 1)
        assert "webhook_secret" not in (await client.get(f"/v1/batch/{job['id']}")).json()
        assert Webhook(secret).verify(got.body, got.headers) == {
            "type": "job.finished",
            "job_id": job["id"],
            "status": "done",
            "counts": {**COUNTS, "done": 2, "failed": 0},
        }
        r = await client.post(
            "/v1/crawl",
            json={"url": up.url("/a"), "max_pages": 1, "webhook": crawl_hook},
            headers={"Idempotency-Key": "c1"},
        )
        assert r.status_code == 202, r.text
        crawl = r.json()
        (got,) = await receiver.wait("/crawl-done", 1)
        assert Webhook(crawl["webhook_secret"]).verify(got.body, got.headers) == {
            "type": "job.finished",
            "job_id": crawl["id"],
            "status": "done",
            "counts": {**COUNTS, "done": 1, "failed": 0},
        }
        # The Python client: submit(webhook=...), the secret on the view it returns.
        client_hook = receiver.hook("/client-done")
        async with AsyncClient(base, FLEET_KEY) as sift:
            submitted = await sift.submit([up.url("/b")], idempotency_key="p1", webhook=client_hook)
        client_secret = submitted.view.webhook_secret
        assert client_secret is not None and client_secret.startswith("whsec_")
        (got,) = await receiver.wait("/client-done", 1)
        verify_webhook(client_secret, got.headers, got.body)
        assert loads(got.body)["job_id"] == submitted.view.id
        # Once: more turns of the deliverer send nothing more.
        deliverer = deliverer_of(apps)
        assert [await deliverer.run_once() for _ in range(3)] == [0, 0, 0]
        counts = [len(receiver.got[p]) for p in ("/job-done", "/crawl-done", "/client-done")]
        assert counts == [1, 1, 1]


class MovingResolver:
    """A DNS stand-in that knows only ``table``'s names; the test changes an answer."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = {k: list(v) for k, v in table.items()}

    async def resolve(self, host: str, port: int) -> list[str]:
        addresses = self.table.get(host.lower().rstrip("."))
        if not addresses:
            raise DnsFailure(f"{host} does not resolve")
        return list(addresses)


@pytest.fixture
def canary() -> Iterator[CanaryListener]:
    with CanaryListener.on(["127.0.0.1"]) as listener:
        yield listener


async def test_a_restricted_callers_webhook_never_reaches_loopback(
    tmp_path: Path, canary: CanaryListener
) -> None:
    port = canary._socks[0].getsockname()[1]
    gate = asyncio.Event()

    async def slow_page(request: web.Request) -> web.StreamResponse:
        await gate.wait()  # the jobs end only once the name has been re-pointed
        return web.Response(text="<p>done</p>", content_type="text/html")

    async with Upstream(host=PUBLIC_HOST) as up:
        up.route("/page", slow_page)
        settings = settings_for(
            tmp_path,
            webhooks=dataclasses.replace(FAST, max_attempts=2),
            classes=ClassesSettings(
                fleet=settings_for(tmp_path).classes.fleet,
                restricted=ClassSettings(extra_ports=(port, up.port)),
            ),
            egress=EgressSettings(
                extra_public_cidrs=("127.0.1.0/24",),
                resolve=types.MappingProxyType(
                    {PUBLIC_NAME: (PUBLIC_HOST,), CANARY_NAME: ("127.0.0.1",)}
                ),
            ),
        )
        dns = MovingResolver({MOVING_NAME: [PUBLIC_HOST]})
        apps: list[FastAPI] = []
        async with (
            running_app(
                settings, customize=apps.append, fetcher=build_fetcher(settings, resolver=dns)
            ) as base,
            httpx.AsyncClient(base_url=base, headers=auth(RESTRICTED_KEY), timeout=30) as client,
        ):
            target = f"http://{PUBLIC_NAME}:{up.port}/page"
            # 1. Loopback however spelled: refused at submit, batch and crawl; nothing stored.
            for i, hook in enumerate(
                (
                    f"http://127.0.0.1:{port}/hook",
                    f"http://[::1]:{port}/",
                    f"http://2130706433:{port}/",
                )
            ):
                for route, body in (
                    ("/v1/batch", {"targets": [target], "webhook": hook}),
                    ("/v1/crawl", {"url": target, "webhook": hook}),
                ):
                    r = await client.post(route, json=body, headers={"Idempotency-Key": f"r{i}"})
                    assert r.status_code == 422, r.text
                    error = r.json()["error"]
                    assert error["code"] == "invalid_request"
                    assert error["message"] == (
                        f"webhook: the URL is refused before any delivery: {hook}: "
                        "blocked_address (its host, address or port is outside this caller's "
                        "egress policy)"
                    )
            assert (await client.get("/v1/batch")).json() == {"items": []}
            # 2. Names: accepted at submit (a restricted caller is never told which names
            # sift maps, as for targets), refused when sent.
            ids = []
            for i, name in enumerate((CANARY_NAME, MOVING_NAME)):
                body = {"targets": [target], "webhook": f"http://{name}:{port}/hook"}
                r = await client.post("/v1/batch", json=body, headers={"Idempotency-Key": f"n{i}"})
                assert r.status_code == 202, r.text
                ids.append(r.json()["id"])
            dns.table[MOVING_NAME] = ["127.0.0.1"]  # the DNS change, after the submit
            gate.set()
            for job_id in ids:
                assert (await _wait_job(client, job_id))["status"] == "done"
            outbox = outbox_of(apps[0].state.store)

            async def all_failed() -> bool:
                logs = [await outbox.log("job", j, "agent", 10) for j in ids]
                return all(len(log) == 1 and log[0]["state"] == "failed" for log in logs)

            await until(all_failed)
            for job_id in ids:
                (item,) = await outbox.log("job", job_id, "agent", 10)
                assert [(a["status"], a["error"]) for a in item["log"]] == [
                    (None, "dns_failure"),
                    (None, "dns_failure"),
                ]
            assert canary.accepted() == 0
