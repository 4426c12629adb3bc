"""Watches on one node (SQLite), deterministic: a real store, fetcher, service and loopback
upstreams; a fake clock moved by the test and ``Scheduler.run_due()`` instead of the loop."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from batchrig import T0, FakeClock, scripted
from sift.errors import NotFound, QuotaExceeded
from upstream import Upstream
from watchrig import CRAWLER, INDEXER, watch_rig, watch_settings


async def test_a_watch_fires_once_per_interval_and_never_makes_up_missed_checks(
    tmp_path: Path,
) -> None:
    async with Upstream() as up, watch_rig(watch_settings(tmp_path)) as rig:
        up.page("/p", b"<p>hello</p>")
        view = await rig.create(INDEXER, {"url": up.url("/p"), "every": 10})
        assert view["next_check_at"] == T0  # no jitter in these settings: due at once
        hits = []
        for at in (0, 0, 5, 9.5, 10, 10, 19, 20, 45, 49, 50):
            rig.clock.now = T0 + at
            hits.append(await rig.scheduler.run_due())
        # Due at 0, 10, 20; at 45 the check due at 30 runs late (40 is not made up: the
        # schedule moves to 50 and keeps its phase), then 50.
        assert hits == [1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 1]
        assert up.hits["/p"] == 5
        shown = await rig.watches.get(INDEXER, view["id"], 100)
        assert shown["checks"] == 5 and shown["failures"] == 0
        assert [e["checked_at"] for e in shown["events"]] == [
            T0 + 50,
            T0 + 45,
            T0 + 20,
            T0 + 10,
            T0,
        ]
        assert [e["seq"] for e in shown["events"]] == [5, 4, 3, 2, 1]
        assert {e["outcome"] for e in shown["events"]} == {"ok"}
        assert {e["http_status"] for e in shown["events"]} == {200}
        assert shown["next_check_at"] == T0 + 60


async def test_a_failing_upstream_is_recorded_and_retried_at_the_next_interval_only(
    tmp_path: Path,
) -> None:
    async with Upstream() as up, watch_rig(watch_settings(tmp_path)) as rig:
        up.route("/flaky", scripted([(500, {}, "down 1"), (503, {}, "down 2"), (200, {}, "up")]))
        view = await rig.create(INDEXER, {"url": up.url("/flaky"), "every": 60})
        assert await rig.scheduler.run_due() == 1
        # A failure never brings the check forward: nothing more runs until the next due time.
        for at in (0, 1, 30, 59):
            rig.clock.now = T0 + at
            assert await rig.scheduler.run_due() == 0
        assert up.hits["/flaky"] == 1
        rig.clock.now = T0 + 60
        assert await rig.scheduler.run_due() == 1
        rig.clock.now = T0 + 120
        assert await rig.scheduler.run_due() == 1
        assert up.hits["/flaky"] == 3
        shown = await rig.watches.get(INDEXER, view["id"], 10)
        assert [(e["outcome"], e["http_status"]) for e in shown["events"]] == [
            ("ok", 200),
            ("failed", 503),
            ("failed", 500),
        ]
        assert shown["events"][2]["error"] == {
            "code": "upstream_status",
            "message": "the page answered HTTP 500",
            "hint": "The site answered with an error; the watch checks again at its next interval.",
        }
        assert shown["events"][2]["change"] is None
        assert (shown["checks"], shown["failures"]) == (3, 2)
        assert shown["last_outcome"] == "new"


async def test_an_unreachable_upstream_is_a_failed_check_with_the_fetch_error(
    tmp_path: Path, refused_port: int
) -> None:
    async with watch_rig(watch_settings(tmp_path)) as rig:
        url = f"http://127.0.0.1:{refused_port}/gone"
        view = await rig.create(INDEXER, {"url": url, "every": 5})
        assert await rig.scheduler.run_due() == 1
        shown = await rig.watches.get(INDEXER, view["id"], 10)
        (event,) = shown["events"]
        assert event["outcome"] == "failed" and event["http_status"] is None
        assert event["error"]["code"] == "connect_failed"
        assert shown["last_outcome"] == "failed"


async def test_events_are_bounded_per_watch(tmp_path: Path) -> None:
    async with Upstream() as up, watch_rig(watch_settings(tmp_path, events_kept=3)) as rig:
        up.page("/p", b"<p>x</p>")
        view = await rig.create(INDEXER, {"url": up.url("/p"), "every": 1})
        for at in range(7):
            rig.clock.now = T0 + at
            assert await rig.scheduler.run_due() == 1
        shown = await rig.watches.get(INDEXER, view["id"], 100)
        assert [e["seq"] for e in shown["events"]] == [7, 6, 5]
        assert shown["checks"] == 7


async def test_a_watch_survives_a_restart_on_the_same_data_dir(tmp_path: Path) -> None:
    settings = watch_settings(tmp_path)
    clock = FakeClock()
    async with Upstream() as up:
        up.page("/p", b"<p>kept</p>")
        async with watch_rig(settings, clock) as rig:
            view = await rig.create(INDEXER, {"url": up.url("/p"), "every": 30})
            assert await rig.scheduler.run_due() == 1
        clock.now = T0 + 10
        async with watch_rig(settings, clock) as rig:  # every part rebuilt on the same dir
            (listed,) = await rig.watches.list(INDEXER)
            assert listed["id"] == view["id"] and listed["next_check_at"] == T0 + 30
            assert await rig.scheduler.run_due() == 0
            clock.now = T0 + 30
            assert await rig.scheduler.run_due() == 1
            shown = await rig.watches.get(INDEXER, view["id"], 10)
            assert [e["seq"] for e in shown["events"]] == [2, 1]
        assert up.hits["/p"] == 2


async def test_a_check_in_flight_when_the_node_stopped_does_not_block_the_watch(
    tmp_path: Path,
) -> None:
    """The lease a stopped node held is freed when a node of its own starts again."""
    settings = watch_settings(tmp_path, lease_s=3600)
    clock = FakeClock()
    async with watch_rig(settings, clock) as rig:
        view = await rig.create(INDEXER, {"url": "http://127.0.0.1:9/x", "every": 10})
        (claimed,) = await rig.watches.store.watches.claim_due_watches(clock(), 10, 3600)
        assert claimed.id == view["id"] and claimed.lease_until == T0 + 3600
    clock.now = T0 + 10
    async with watch_rig(settings, clock) as rig:
        assert await rig.watches.store.watches.release_watch_leases() == 1
        (again,) = await rig.watches.store.watches.claim_due_watches(clock(), 10, 60)
        assert again.token == claimed.token + 1 and again.next_due == T0 + 20


async def test_a_stale_claim_writes_nothing(tmp_path: Path) -> None:
    async with watch_rig(watch_settings(tmp_path)) as rig:
        store = rig.watches.store.watches
        view = await rig.create(INDEXER, {"url": "http://127.0.0.1:9/x", "every": 10})
        (first,) = await store.claim_due_watches(T0, 10, 1)
        (second,) = await store.claim_due_watches(T0 + 10, 10, 1)  # the first lease ran out
        from sift.store.watches import WatchEvent

        assert not await store.record_check(WatchEvent(first.id, 0, T0, "ok", 200), first.token, 5)
        assert await store.record_check(WatchEvent(first.id, 0, T0, "ok", 200), second.token, 5)
        await rig.watches.delete(INDEXER, view["id"])
        assert not await store.record_check(WatchEvent(first.id, 0, T0, "ok", 200), second.token, 5)


async def test_quota_and_ownership(tmp_path: Path) -> None:
    async with watch_rig(watch_settings(tmp_path, max_watches=2)) as rig:
        a = await rig.create(INDEXER, {"url": "http://127.0.0.1:9/a", "every": 10})
        await rig.create(INDEXER, {"url": "http://127.0.0.1:9/b", "every": 10})
        with pytest.raises(QuotaExceeded) as over:
            await rig.create(INDEXER, {"url": "http://127.0.0.1:9/c", "every": 10})
        assert over.value.message == "this caller already has 2 watches, its class's limit"
        await rig.create(CRAWLER, {"url": "http://127.0.0.1:9/c", "every": 10})  # its own quota
        with pytest.raises(NotFound) as theirs:
            await rig.watches.get(CRAWLER, a["id"], 5)
        with pytest.raises(NotFound) as missing:
            await rig.watches.get(CRAWLER, "0" * 24, 5)
        assert theirs.value.message == f"no watch {a['id']!r}"
        assert missing.value.message == f"no watch {'0' * 24!r}"
        with pytest.raises(NotFound):
            await rig.watches.delete(CRAWLER, a["id"])
        await rig.watches.delete(INDEXER, a["id"])
        assert [w["url"] for w in await rig.watches.list(INDEXER)] == ["http://127.0.0.1:9/b"]
        await rig.create(INDEXER, {"url": "http://127.0.0.1:9/d", "every": 10})  # room again


async def test_first_checks_are_spread_by_the_jitter(tmp_path: Path) -> None:
    async with watch_rig(watch_settings(tmp_path, jitter_s=100.0)) as rig:
        dues = [
            (await rig.create(INDEXER, {"url": f"http://127.0.0.1:9/{i}", "every": 60}))[
                "next_check_at"
            ]
            for i in range(50)
        ]
        # Within min(jitter_s, every): [T0, T0 + 60], and spread, not bunched.
        assert all(T0 <= d <= T0 + 60 for d in dues)
        assert len({int((d - T0) // 10) for d in dues}) == 6


async def test_a_watch_records_new_same_changed_with_the_diff_and_ignores_a_clock(
    tmp_path: Path,
) -> None:
    """Written against the contract of W23.md (the envelope's ``change``); runs once change
    tracking is on main."""
    version = {"text": "price 10", "clock": 0}

    async def page(request: Any) -> Any:
        from aiohttp import web

        version["clock"] += 1
        body = (
            f"<html><body><article><h1>Prices</h1><p>{version['text']}</p>"
            f"<p class='clock'>now {version['clock']}</p></article></body></html>"
        )
        return web.Response(text=body, content_type="text/html")

    async with Upstream() as up, watch_rig(watch_settings(tmp_path)) as rig:
        up.route("/prices", page)
        view = await rig.create(
            INDEXER, {"url": up.url("/prices"), "every": 10, "ignore": [".clock"]}
        )
        for at, text in ((0, "price 10"), (10, "price 10"), (20, "price 12")):
            version["text"] = text
            rig.clock.now = T0 + at
            assert await rig.scheduler.run_due() == 1
        shown = await rig.watches.get(INDEXER, view["id"], 10)
        changes = [e["change"] for e in shown["events"]]
        assert [c["status"] for c in changes] == ["changed", "same", "new"]
        diff = changes[0]["diff"].splitlines()
        assert "-price 10" in diff and "+price 12" in diff
        assert not any("now " in line for line in diff)  # the ignored clock
        assert (changes[0]["added"], changes[0]["removed"]) == (1, 1)
        assert (shown["changes"], shown["last_outcome"]) == (1, "changed")


async def test_checks_are_bounded_per_node_and_per_host(tmp_path: Path) -> None:
    """watch.concurrency across hosts, batch.per_host per host (once robots.txt was read)."""
    import dataclasses

    from aiohttp import web

    from sift.config import BatchSettings

    now = {"x": 0, "y": 0, "all": 0}
    peak = {"x": 0, "y": 0, "all": 0}

    def counting(tag: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            for k in (tag, "all"):
                now[k] += 1
                peak[k] = max(peak[k], now[k])
            await asyncio.sleep(0.05)
            for k in (tag, "all"):
                now[k] -= 1
            return web.Response(text=f"page {request.path}", content_type="text/plain")

        return handler

    settings = watch_settings(tmp_path, concurrency=3)
    settings = dataclasses.replace(settings, batch=BatchSettings(per_host=2))
    async with Upstream() as x, Upstream() as y, watch_rig(settings) as rig:
        x.route("/p", counting("x"), prefix=True)
        y.route("/p", counting("y"), prefix=True)
        for i in range(8):
            await rig.create(INDEXER, {"url": x.url(f"/p{i}"), "every": 10})
        assert await rig.scheduler.run_due() == 8
        assert (peak["x"], peak["all"]) == (2, 2)
        for i in range(8):
            await rig.create(INDEXER, {"url": y.url(f"/p{i}"), "every": 10})
        rig.clock.now = T0 + 10
        assert await rig.scheduler.run_due() == 16
        assert (peak["x"], peak["y"], peak["all"]) == (2, 2, 3)


async def test_stop_gives_running_checks_the_grace_then_cancels_and_records_nothing(
    tmp_path: Path,
) -> None:
    """A hung upstream: ``stop(grace_s)`` returns (well before the upstream's 30 s stall),
    the check is cancelled and nothing is recorded for it; the watch is due again later."""
    from aiohttp import web

    release = asyncio.Event()
    started = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        started.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(release.wait(), 30)
        return web.Response(text="late", content_type="text/plain")

    async with Upstream() as up, watch_rig(watch_settings(tmp_path)) as rig:
        up.route("/hang", hang)
        view = await rig.create(INDEXER, {"url": up.url("/hang"), "every": 10})
        assert await rig.scheduler.claim_and_start() == 1
        await started.wait()
        assert rig.scheduler.active == 1
        stopping = asyncio.ensure_future(rig.scheduler.stop(30.0))
        await asyncio.sleep(0.05)
        assert not stopping.done()  # the check has its grace
        rig.scheduler.hurry()  # a second Ctrl-C
        await stopping
        assert rig.scheduler.active == 0
        shown = await rig.watches.get(INDEXER, view["id"], 10)
        assert (shown["checks"], shown["events"]) == (0, [])
        assert shown["next_check_at"] == T0 + 10
        release.set()
