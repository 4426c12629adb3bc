"""Two deliverers — two sift nodes — on one real PostgreSQL: every event is sent exactly
once (claims with SKIP LOCKED and a token), and a job's webhook fires once."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

from aiohttp import web

from apphelpers import fetcher_for
from sift.config import StoreSettings
from sift.fetch import FetchPolicy
from sift.principal import Principal
from sift.store.outbox import outbox_of
from sift.store.postgres.store import PgBatchStore
from sift.webhooks.deliverer import Deliverer
from sift.webhooks.outbox import enqueue
from sift.webhooks.signing import new_secret, verify
from upstream import Upstream
from webhookrig import FAST, replace_webhooks, settings_for, until

EVENTS = 40


def _policy(principal: Principal, timeout_s: float) -> FetchPolicy:
    # The fleet test class: loopback receivers are allowed.
    return FetchPolicy(allow_private=True, timeout_s=timeout_s, caller=principal.name)


async def test_two_nodes_send_each_event_exactly_once(tmp_path: Path, pg_url: str) -> None:
    settings = replace_webhooks(
        settings_for(tmp_path, store=StoreSettings(url=pg_url)), concurrency=4, per_owner=4
    )
    assert settings.webhooks.poll_s == FAST.poll_s
    seen: collections.Counter[str] = collections.Counter()
    secret = new_secret()
    done = asyncio.Event()

    async def receive(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        verify(secret, request.headers, body)
        seen[request.headers["webhook-id"]] += 1
        await asyncio.sleep(0.01)  # hold the attempt a little: the nodes overlap
        if sum(seen.values()) >= EVENTS:
            done.set()
        return web.Response(text="ok")

    stores = [await PgBatchStore.open(settings.store, migrate=False) for _ in range(2)]
    fetchers = [fetcher_for(settings) for _ in range(2)]
    nodes = [
        Deliverer(settings, outbox_of(s), f, _policy) for s, f in zip(stores, fetchers, strict=True)
    ]
    try:
        async with Upstream() as up:
            up.route("/hook", receive)
            ids = [
                await enqueue(
                    stores[i % 2],
                    owner="indexer",
                    source="watch",
                    source_id="w",
                    url=up.url("/hook"),
                    secret=secret,
                    event={"type": "watch.changed", "n": i},
                )
                for i in range(EVENTS)
            ]
            for f in fetchers:
                await f.start()
            for node in nodes:
                node.start()
            await asyncio.wait_for(done.wait(), 60)
            box = outbox_of(stores[0])

            async def all_recorded() -> bool:
                log = await box.log("watch", "w", "indexer", EVENTS)
                return all(e["state"] == "delivered" for e in log)

            await until(all_recorded)
            for node in nodes:
                await node.stop()
            # A few more turns on both nodes: nothing is due, nothing is sent again.
            assert [await n.run_once() for n in nodes for _ in range(2)] == [0, 0, 0, 0]
            assert seen == collections.Counter(ids)
            log = await outbox_of(stores[0]).log("watch", "w", "indexer", EVENTS)
            assert {e["id"] for e in log} == set(ids)
            assert {(e["state"], e["attempts"], len(e["log"])) for e in log} == {
                ("delivered", 1, 1)
            }
    finally:
        for node in nodes:
            await node.stop()
        for f in fetchers:
            await f.close()
        for s in stores:
            await s.close()
