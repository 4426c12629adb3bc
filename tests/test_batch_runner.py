"""The batch runner, deterministic: real store, fetcher and upstreams; fake clock and sleep.

Every test drives ``run_until_idle()`` (or start/stop where shutdown is the point) and
asserts exact orders, waits and outcomes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web

from batchrig import CRAWLER, INDEXER, T0, batch_rig, logging_route, scripted
from sift.batch.runner import reconcile
from sift.dcache import DB
from sift.errors import NotFound, SiftError
from sift.options import FetchOptions, parse_options
from upstream import Upstream


def _pages(log: list[str]) -> list[str]:
    return [p for p in log if not p.endswith("/robots.txt")]


async def test_round_robin_across_callers_fifo_within_one(tmp_path: Path) -> None:
    log: list[str] = []
    async with Upstream() as up, batch_rig(tmp_path, concurrency=1, per_host=1) as rig:
        for name in ("a1-0", "a1-1", "a1-2", "a2-0", "a2-1", "b1-0", "b1-1"):
            logging_route(up, f"/{name}", log, "")
        await rig.submit(INDEXER, "a1", [up.url(f"/a1-{i}") for i in range(3)])
        await rig.submit(INDEXER, "a2", [up.url(f"/a2-{i}") for i in range(2)])
        await rig.submit(CRAWLER, "b1", [up.url(f"/b1-{i}") for i in range(2)])
        await rig.runner.run_until_idle()
    # Callers alternate; one caller's jobs run oldest first, even while another waits.
    assert _pages(log) == ["/a1-0", "/b1-0", "/a1-1", "/b1-1", "/a1-2", "/a2-0", "/a2-1"]


async def test_per_host_limit_holds_and_hosts_run_side_by_side(tmp_path: Path) -> None:
    peak = {"x": 0, "y": 0}
    now = {"x": 0, "y": 0}

    def counting(tag: str) -> web.StreamResponse:
        async def handler(request: web.Request) -> web.StreamResponse:
            now[tag] += 1
            peak[tag] = max(peak[tag], now[tag])
            await asyncio.sleep(0.05)
            now[tag] -= 1
            return web.Response(text="ok", content_type="text/plain")

        return handler  # type: ignore[return-value]

    async with (
        Upstream() as x,
        Upstream() as y,
        batch_rig(tmp_path, concurrency=8, per_host=2) as rig,
    ):
        x.route("/p", counting("x"), prefix=True)  # type: ignore[arg-type]
        y.route("/p", counting("y"), prefix=True)  # type: ignore[arg-type]
        targets = [x.url(f"/p{i}") for i in range(6)] + [y.url(f"/p{i}") for i in range(6)]
        job = await rig.submit(INDEXER, "k", targets)
        await rig.runner.run_until_idle()
        view = await rig.status(INDEXER, job)
    assert peak == {"x": 2, "y": 2}
    assert view["status"] == "done"
    assert view["counts"] == {"pending": 0, "running": 0, "done": 12, "failed": 0, "cancelled": 0}


async def test_retry_after_backs_off_that_host_only(tmp_path: Path) -> None:
    log: list[str] = []
    async with Upstream() as x, Upstream() as y, batch_rig(tmp_path, concurrency=1) as rig:
        busy = (429, {"Retry-After": "7"}, "slow down")
        x.route("/busy", scripted([busy, busy, (200, {}, "finally")], log, "x"))
        logging_route(y, "/y0", log, "y")
        logging_route(y, "/y1", log, "y")
        job = await rig.submit(INDEXER, "k", [x.url("/busy"), y.url("/y0"), y.url("/y1")])
        await rig.runner.run_until_idle()
        page = json.loads(await rig.jobs.results_page(INDEXER, job, 0, 10, T0, 1 << 20))
    # The other host goes ahead while x waits out its Retry-After, twice.
    assert log == ["x/busy", "y/y0", "y/y1", "x/busy", "x/busy"]
    assert rig.clock.slept == [7.0, 7.0]
    first = page["items"][0]
    assert (first["status"], first["result"]["status"], first["result"]["content"]) == (
        "done",
        200,
        "finally",
    )
    assert "retry_after" not in first["result"]


async def test_backoff_without_retry_after_and_the_last_answer_stands(tmp_path: Path) -> None:
    async with Upstream() as x, batch_rig(tmp_path, concurrency=2) as rig:
        x.route("/down", scripted([(503, {}, "maintenance")]))
        x.page("/limited", "no", status=429, content_type="text/plain",
               headers={"Retry-After": "2"})  # fmt: skip
        job = await rig.submit(INDEXER, "k", [x.url("/down")])
        await rig.runner.run_until_idle()
        item = json.loads(await rig.jobs.results_page(INDEXER, job, 0, 1, T0, 1 << 20))
        assert x.hits["/down"] == 3
        assert rig.clock.slept == [1.0, 2.0]  # backoff_s * 2**attempt
        result = item["items"][0]["result"]
        assert (result["status"], result["content"]) == (503, "maintenance")
        assert "retry_after" not in result
        # The envelope says what Retry-After asked for, counted from fetched_at.
        envelope = await rig.service.fetch(INDEXER, _opts(x.url("/limited")))
        assert (envelope["status"], envelope["retry_after"]) == (429, 2)


def _opts(url: str, **options: object) -> FetchOptions:
    return parse_options({"url": url, **options})


async def test_crawl_delay_spaces_the_starts_on_that_host(tmp_path: Path) -> None:
    arrivals: list[tuple[str, float]] = []
    async with Upstream() as x, batch_rig(tmp_path, concurrency=1, per_host=4) as rig:
        x.page("/robots.txt", "User-agent: *\nCrawl-delay: 5\n", content_type="text/plain")

        async def page(request: web.Request) -> web.StreamResponse:
            arrivals.append((request.path, rig.clock()))
            return web.Response(text="ok", content_type="text/plain")

        x.route("/p", page, prefix=True)
        await rig.submit(INDEXER, "k", [x.url(f"/p{i}") for i in range(3)])
        await rig.runner.run_until_idle()
    assert arrivals == [("/p0", T0), ("/p1", T0 + 5), ("/p2", T0 + 10)]
    assert rig.clock.slept == [5.0, 5.0]


async def test_final_status_and_error_objects(tmp_path: Path) -> None:
    async with Upstream() as x, batch_rig(tmp_path) as rig:
        x.page("/ok", "fine", content_type="text/plain")
        refused = "http://127.0.0.1:1/"
        done = await rig.submit(INDEXER, "d", [x.url("/ok")])
        # robots=False: otherwise the unreachable robots.txt answers robots_disallowed first.
        partial = await rig.submit(INDEXER, "p", [x.url("/ok"), refused], robots=False)
        failed = await rig.submit(INDEXER, "f", [refused, refused + "b"], robots=False)
        await rig.runner.run_until_idle()
        views = [await rig.status(INDEXER, j) for j in (done, partial, failed)]
        assert [(v["status"], v["error"], v["targets_done"]) for v in views] == [
            ("done", "", 1),
            ("partial", "", 2),
            ("failed", "every target failed; see the results", 2),
        ]
        page = json.loads(await rig.jobs.results_page(INDEXER, partial, 0, 10, T0, 1 << 20))
        try:
            await rig.service.fetch(INDEXER, _opts(refused, robots=False))
            raise AssertionError("expected connect_failed")
        except SiftError as exc:  # the same error object /v1/fetch answers
            expected = exc.to_dict()["error"]
    assert page["items"][1] == {"idx": 1, "url": refused, "status": "failed", "error": expected}
    assert expected["code"] == "connect_failed"
    assert page["next_offset"] is None


async def test_cancel_mid_run_gives_every_target_one_outcome(tmp_path: Path) -> None:
    release = asyncio.Event()
    arrived: list[str] = []

    async def hang(request: web.Request) -> web.StreamResponse:
        arrived.append(request.path)
        await release.wait()
        return web.Response(text="late", content_type="text/plain")

    async with Upstream() as x, batch_rig(tmp_path, concurrency=2, per_host=2) as rig:
        x.route("/h", hang, prefix=True)
        job = await rig.submit(INDEXER, "k", [x.url(f"/h{i}") for i in range(5)])
        rig.runner.start()
        while len(arrived) < 2:
            await asyncio.sleep(0.01)
        view = await rig.jobs.cancel(INDEXER, job, T0 + 1)
        release.set()
        await rig.runner.stop(1.0)
        after = await rig.status(INDEXER, job)
        page = json.loads(await rig.jobs.results_page(INDEXER, job, 0, 10, T0, 1 << 20))
        # Cancelling again is a no-op that answers the state.
        again = await rig.jobs.cancel(INDEXER, job, T0 + 2)
    assert (again["status"], again["counts"]) == ("cancelled", after["counts"])
    assert view["status"] == "cancelled"
    assert view["counts"] == {"pending": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 5}
    assert (view["targets_done"], view["lease"]) == (5, T0 + 1)
    # Abandoned targets write nothing after the cancel; pending ones never ran.
    assert after["counts"] == view["counts"]
    assert sorted(arrived) == ["/h0", "/h1"]
    assert {i["error"]["code"] for i in page["items"]} == {"cancelled"}
    assert page["items"][0]["error"]["message"] == (
        "the job was cancelled before this target finished"
    )


async def test_shutdown_leaves_running_jobs_for_reconcile(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="late", content_type="text/plain")

    async with Upstream() as x, batch_rig(tmp_path, concurrency=2) as rig:
        x.page("/fast", "quick", content_type="text/plain")
        x.route("/hang", hang)
        job = await rig.submit(INDEXER, "k", [x.url("/fast"), x.url("/hang"), x.url("/fast")])
        rig.runner.start()
        while (await rig.status(INDEXER, job))["counts"]["done"] < 2:
            await asyncio.sleep(0.01)
        await rig.runner.stop(0.05)  # /hang outlives the grace period
        release.set()
        assert (await rig.status(INDEXER, job))["status"] == "running"
        assert await reconcile(rig.jobs.store, T0 + 9) == 1
        view = await rig.status(INDEXER, job)
        page = json.loads(await rig.jobs.results_page(INDEXER, job, 0, 10, T0 + 9, 1 << 20))
    assert (view["status"], view["error"]) == (
        "failed",
        "interrupted: sift restarted; resubmit the job",
    )
    assert view["counts"] == {"pending": 0, "running": 0, "done": 2, "failed": 1, "cancelled": 0}
    assert page["items"][1]["error"] == {
        "code": "interrupted",
        "message": "sift restarted; resubmit the job",
        "hint": "sift restarted while the job ran; resubmit it (the same Idempotency-Key "
        "starts a new job).",
    }


async def test_jobs_finished_during_the_grace_period_get_their_status(tmp_path: Path) -> None:
    async with Upstream() as x, batch_rig(tmp_path) as rig:

        async def slowish(request: web.Request) -> web.StreamResponse:
            await asyncio.sleep(0.1)
            return web.Response(text="ok", content_type="text/plain")

        x.route("/s", slowish)
        job = await rig.submit(INDEXER, "k", [x.url("/s")])
        rig.runner.start()
        while (await rig.status(INDEXER, job))["counts"]["running"] < 1:
            await asyncio.sleep(0.01)
        await rig.runner.stop(10.0)
        assert (await rig.status(INDEXER, job))["status"] == "done"


async def test_sweep_deletes_jobs_whose_lease_ran_out(tmp_path: Path) -> None:
    async with Upstream() as x, batch_rig(tmp_path, ttl_s=100) as rig:
        x.page("/a", "a", content_type="text/plain")
        job = await rig.submit(INDEXER, "k", [x.url("/a")])
        await rig.runner.run_until_idle()
        lease = (await rig.jobs.status(INDEXER, job, T0 + 50))["lease"]
        assert lease == T0 + 50  # a read moves the lease (spec rule 1)
        assert await rig.runner.sweep(T0 + 149) == 0
        assert await rig.runner.sweep(T0 + 150) == 1
        try:
            await rig.jobs.status(INDEXER, job, T0 + 151)
            raise AssertionError("expected NotFound")
        except NotFound as exc:
            assert exc.message == f"no batch job {job!r}"


async def test_byte_budget_evicts_the_oldest_finished_job(tmp_path: Path) -> None:
    async with Upstream() as x, batch_rig(tmp_path, max_bytes=1500) as rig:
        x.page("/one", "x" * 600, content_type="text/plain")
        x.page("/two", "y" * 600, content_type="text/plain")
        first = await rig.submit(INDEXER, "k1", [x.url("/one")])
        await rig.runner.run_until_idle()
        one = await rig.adb.run(DB.batch_nbytes)
        assert 750 < one <= 1500  # one job fits the budget, two do not
        rig.clock.now += 10
        second = await rig.submit(INDEXER, "k2", [x.url("/two")])
        await rig.runner.run_until_idle()
        assert (await rig.status(INDEXER, second))["status"] == "done"
        assert await rig.adb.run(DB.batch_job, first) is None
        kept = await rig.adb.run(DB.batch_job, second)
        assert kept is not None
        assert await rig.adb.run(DB.batch_nbytes) == kept.nbytes == one
