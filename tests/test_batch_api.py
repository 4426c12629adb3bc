"""/v1/batch over real HTTP against local upstreams: lifecycle, idempotency, isolation,
quotas, validation, cancel, sweep and byte eviction."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from fastapi import FastAPI

from apphelpers import (
    FLEET2_KEY,
    FLEET_KEY,
    PUBLIC_HOST,
    PUBLIC_NAME,
    RESTRICTED_KEY,
    auth,
    make_settings,
    running_app,
)
from sift.config import BatchSettings, Settings
from sift.dcache import DB
from upstream import Upstream


@dataclass
class Env:
    client: httpx.AsyncClient
    up: Upstream
    app: FastAPI
    release: asyncio.Event

    def url(self, path: str) -> str:
        return f"http://{PUBLIC_NAME}:{self.up.port}{path}"

    async def submit(self, key: str, idem: str, body: Any) -> httpx.Response:
        return await self.client.post(
            "/v1/batch", json=body, headers={**auth(key), "Idempotency-Key": idem}
        )

    async def wait(self, key: str, job_id: str) -> dict[str, Any]:
        """Poll the real server until the job is no longer live."""
        deadline = time.monotonic() + 20
        while True:
            view: dict[str, Any] = (
                await self.client.get(f"/v1/batch/{job_id}", headers=auth(key))
            ).json()
            if view["status"] not in ("queued", "running"):
                return view
            assert time.monotonic() < deadline, view
            await asyncio.sleep(0.02)

    def hung(self) -> int:
        """Requests that reached the hanging route."""
        return sum(n for path, n in self.up.hits.items() if path.startswith("/hang"))

    async def stat(self, name: str) -> int:
        stats = await self.app.state.adb.run(DB.stats)
        return int(stats[name])


def _settings(tmp_path: Path, port: int, **batch: Any) -> Settings:
    settings = make_settings(tmp_path, upstream_port=port)
    return dataclasses.replace(settings, batch=BatchSettings(**{"shutdown_grace_s": 0.2, **batch}))


@pytest.fixture
def batch_settings() -> dict[str, Any]:
    return {}


@pytest.fixture
async def env(tmp_path: Path, batch_settings: dict[str, Any]) -> AsyncIterator[Env]:
    release = asyncio.Event()
    apps: list[FastAPI] = []
    async with Upstream(host=PUBLIC_HOST) as up:
        for i in range(5):
            up.page(
                f"/a{i}",
                f"<html><head><title>A{i}</title></head><body><article><h1>Page {i}</h1>"
                f"<p>Paragraph {i} of the article, long enough to be content.</p>"
                "</article></body></html>",
            )
        up.page("/missing", "gone", status=404, content_type="text/plain")

        async def hang(request: web.Request) -> web.StreamResponse:
            await release.wait()
            return web.Response(text="late", content_type="text/plain")

        up.route("/hang", hang, prefix=True)
        settings = _settings(tmp_path, up.port, **batch_settings)
        async with (
            running_app(settings, customize=apps.append) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            try:
                yield Env(client, up, apps[0], release)
            finally:
                release.set()


async def test_lifecycle_submit_status_results_ndjson(env: Env) -> None:
    targets: list[Any] = [env.url(f"/a{i}") for i in range(3)]
    targets += [{"url": env.url("/a3"), "options": {"format": "text"}}, env.url("/missing")]
    r = await env.submit(FLEET_KEY, "life", {"targets": targets, "options": {"links": True}})
    assert r.status_code == 202
    job = r.json()
    assert r.headers["location"] == f"/v1/batch/{job['id']}"
    assert (job["status"], job["targets_total"], job["targets_done"], job["error"]) == (
        "queued",
        5,
        0,
        "",
    )
    assert job["expires_at"] == job["lease"] + 86400
    view = await env.wait(FLEET_KEY, job["id"])
    assert view["status"] == "done"  # a 404 page is content, as with /v1/fetch
    assert view["counts"] == {"pending": 0, "running": 0, "done": 5, "failed": 0, "cancelled": 0}
    assert (view["targets_done"], view["created_at"]) == (5, job["created_at"])
    assert view["expires_at"] == view["lease"] + 86400

    first = (
        await env.client.get(f"/v1/batch/{job['id']}/results?limit=2", headers=auth(FLEET_KEY))
    ).json()
    assert [i["idx"] for i in first["items"]] == [0, 1]
    assert first["next_offset"] == 2
    rest = (
        await env.client.get(
            f"/v1/batch/{job['id']}/results", params={"offset": 2}, headers=auth(FLEET_KEY)
        )
    ).json()
    assert [i["idx"] for i in rest["items"]] == [2, 3, 4]
    assert rest["next_offset"] is None
    items = first["items"] + rest["items"]
    # Each result is the envelope /v1/fetch answers for the same URL and options.
    for item, target in zip(items, targets, strict=True):
        url, opts = (target, {}) if isinstance(target, str) else (target["url"], target["options"])
        assert (item["url"], item["status"]) == (url, "done")
        direct = await env.client.post(
            "/v1/fetch", json={"url": url, "links": True, **opts}, headers=auth(FLEET_KEY)
        )
        expected = direct.json()
        assert expected["cache"] == "hit"
        assert {**item["result"], "cache": "hit"} == expected
    assert items[3]["result"]["format"] == "text"
    assert items[4]["result"]["status"] == 404

    r = await env.client.get(f"/v1/batch/{job['id']}/results.ndjson", headers=auth(FLEET_KEY))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-ndjson"
    assert [json.loads(line) for line in r.text.splitlines()] == items


async def test_idempotency_replay_and_status_filter(env: Env) -> None:
    body = {"targets": [env.url("/hang/1")]}
    first = await env.submit(FLEET_KEY, "same", body)
    assert first.status_code == 202
    job_id = first.json()["id"]
    replay = await env.submit(FLEET_KEY, "same", {"targets": [env.url("/a0")]})
    assert (replay.status_code, replay.json()["id"]) == (200, job_id)
    assert "location" not in replay.headers
    assert await env.stat("batch_jobs") == 1
    # Another caller's identical key is another job.
    other = await env.submit(FLEET2_KEY, "same", body)
    assert other.status_code == 202 and other.json()["id"] != job_id
    # A cancelled job is never replayed: the same key starts a new job.
    await env.client.delete(f"/v1/batch/{job_id}", headers=auth(FLEET_KEY))
    env.release.set()
    fresh = await env.submit(FLEET_KEY, "same", {"targets": [env.url("/a0")]})
    assert fresh.status_code == 202
    fresh_id = fresh.json()["id"]
    assert fresh_id != job_id
    assert (await env.wait(FLEET_KEY, fresh_id))["status"] == "done"
    # A finished (done) job is replayed...
    again = await env.submit(FLEET_KEY, "same", {"targets": [env.url("/a0")]})
    assert (again.status_code, again.json()["id"]) == (200, fresh_id)
    # ...a failed one is not.
    bad = {"targets": ["http://127.0.0.1:1/"], "options": {"robots": False}}
    failed = (await env.submit(FLEET_KEY, "fails", bad)).json()["id"]
    assert (await env.wait(FLEET_KEY, failed))["status"] == "failed"
    retry = await env.submit(FLEET_KEY, "fails", bad)
    assert retry.status_code == 202 and retry.json()["id"] != failed


async def test_another_callers_job_is_404_on_every_route(env: Env) -> None:
    job_id = (await env.submit(FLEET_KEY, "mine", {"targets": [env.url("/hang/1")]})).json()["id"]
    missing = "0" * 24
    for method, suffix in (
        ("GET", ""),
        ("GET", "/results"),
        ("GET", "/results.ndjson"),
        ("DELETE", ""),
    ):
        theirs = await env.client.request(
            method, f"/v1/batch/{job_id}{suffix}", headers=auth(FLEET2_KEY)
        )
        absent = await env.client.request(
            method, f"/v1/batch/{missing}{suffix}", headers=auth(FLEET_KEY)
        )
        assert theirs.status_code == absent.status_code == 404
        assert theirs.json() == {
            "error": {**absent.json()["error"], "message": f"no batch job {job_id!r}"}
        }
        assert absent.json()["error"]["message"] == f"no batch job {missing!r}"
    # The owner's job was neither read nor cancelled by the other caller.
    view = (await env.client.get(f"/v1/batch/{job_id}", headers=auth(FLEET_KEY))).json()
    assert view["status"] in ("queued", "running")


@pytest.mark.parametrize("batch_settings", [{"live_jobs_total": 3, "max_request_bytes": 65536}])
async def test_quotas(env: Env) -> None:
    hang = {"targets": [env.url("/hang/q")]}
    assert (await env.submit(RESTRICTED_KEY, "q1", hang)).status_code == 202
    assert (await env.submit(RESTRICTED_KEY, "q2", hang)).status_code == 202
    over = await env.submit(RESTRICTED_KEY, "q3", hang)
    assert over.status_code == 429
    assert over.headers["retry-after"] == "30"
    assert over.json()["error"]["code"] == "quota_exceeded"
    assert over.json()["error"]["message"] == (
        "caller agent already has 2 live batch jobs (the limit is 2)"
    )
    # A replay of a live job is not a new job: it passes at the quota.
    assert (await env.submit(RESTRICTED_KEY, "q1", hang)).status_code == 200
    # Across callers: the third live job fills the server, the fourth is refused.
    assert (await env.submit(FLEET_KEY, "f1", hang)).status_code == 202
    busy = await env.submit(FLEET_KEY, "f2", hang)
    assert (busy.status_code, busy.headers["retry-after"]) == (503, "10")
    assert busy.json()["error"]["code"] == "service_busy"
    # More targets than the class allows (restricted: 500).
    many = await env.submit(RESTRICTED_KEY, "m", {"targets": [env.url("/a0")] * 501})
    assert many.status_code == 413
    assert many.json()["error"]["message"] == (
        "501 targets exceed this caller's limit of 500 per job"
    )
    # A body over batch.max_request_bytes.
    huge = await env.submit(FLEET_KEY, "h", {"targets": [env.url("/a0") + "?" + "x" * 70000]})
    assert (huge.status_code, huge.json()["error"]["code"]) == (413, "request_too_large")
    assert await env.stat("batch_jobs") == 3


async def test_invalid_targets_list_their_indices_and_store_nothing(env: Env) -> None:
    body = {
        "targets": [
            env.url("/a0"),
            "gopher://x.test/",
            {"url": env.url("/a1"), "options": {"nope": 1}},
            5,
            {"url": env.url("/a2"), "options": {"robots": False}},
        ]
    }
    r = await env.submit(RESTRICTED_KEY, "bad", body)
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "invalid_request"
    assert err["message"].startswith("4 of 5 targets are invalid: [1] ")
    for idx in ("[2] invalid options: unknown option nope", "[3] expected a URL string",
                "[4] robots: restricted callers always obey robots.txt"):  # fmt: skip
        assert idx in err["message"]
    many = await env.submit(FLEET_KEY, "bad2", {"targets": ["ftp://x/"] * 60})
    message = many.json()["error"]["message"]
    assert message.startswith("60 of 60 targets are invalid: [0] ")
    assert "[49] " in message and "[50] " not in message
    assert message.endswith("; and 10 more")
    assert await env.stat("batch_jobs") == 0


async def test_restricted_caller_cannot_reach_loopback_through_a_batch(env: Env) -> None:
    """A loopback literal is refused at submit (422 naming it), never stored or fetched;
    the fetch of it is refused just the same (403)."""
    loopback = f"http://127.0.0.1:{env.up.port}/a0"
    r = await env.submit(RESTRICTED_KEY, "r", {"targets": [env.url("/a1"), loopback]})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == (
        f"1 of 2 targets are refused before any fetch: [1] {loopback}: blocked_address (its "
        "host, address or port is outside this caller's egress policy)"
    )
    listed = await env.client.get("/v1/batch", headers=auth(RESTRICTED_KEY))
    assert listed.json()["items"] == []
    direct = await env.client.post(
        "/v1/fetch", json={"url": loopback}, headers=auth(RESTRICTED_KEY)
    )
    assert direct.status_code == 403
    assert env.up.hits["/a0"] == 0


async def test_cancel_mid_run(env: Env) -> None:
    targets = [env.url(f"/hang/{i}") for i in range(40)]
    job_id = (await env.submit(FLEET_KEY, "c", {"targets": targets})).json()["id"]
    while env.hung() < 4:  # per_host = 4 targets are waiting upstream
        await asyncio.sleep(0.01)
    r = await env.client.delete(f"/v1/batch/{job_id}", headers=auth(FLEET_KEY))
    assert r.status_code == 200
    view = r.json()
    assert (view["status"], view["targets_done"]) == ("cancelled", 40)
    assert view["counts"] == {"pending": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 40}
    assert view["error"] == "cancelled: the job was cancelled before this target finished"
    env.release.set()
    await asyncio.sleep(0.1)  # give abandoned targets every chance to (wrongly) write
    later = (await env.client.get(f"/v1/batch/{job_id}", headers=auth(FLEET_KEY))).json()
    assert later["counts"] == view["counts"]
    assert env.hung() == 4  # pending targets never ran


@pytest.mark.parametrize("batch_settings", [{"max_bytes": 1100}])
async def test_sweep_and_byte_eviction_end_to_end(env: Env) -> None:
    ids = []
    for i in range(3):
        r = await env.submit(FLEET_KEY, f"e{i}", {"targets": [env.url(f"/a{i}")]})
        ids.append(r.json()["id"])
        assert (await env.wait(FLEET_KEY, ids[-1]))["status"] == "done"
    # Each job holds ~510 bytes of results: two fit in 1100 bytes, so the oldest went.
    codes = [
        (await env.client.get(f"/v1/batch/{i}", headers=auth(FLEET_KEY))).status_code for i in ids
    ]
    assert codes == [404, 200, 200]
    assert 1000 < await env.app.state.adb.run(DB.batch_nbytes) <= 1100
    # The sweep deletes jobs whose lease ran out (time passed in, nothing waits).
    runner = env.app.state.batch.runner
    assert await runner.sweep(int(time.time()) + 86400 + 60) == 2
    for i in ids[1:]:
        r = await env.client.get(f"/v1/batch/{i}/results", headers=auth(FLEET_KEY))
        assert r.status_code == 404


@pytest.mark.parametrize("batch_settings", [{"max_bytes": 1100}])
async def test_byte_eviction_takes_the_submitting_callers_jobs_first(env: Env) -> None:
    # The other caller's finished job, not read yet, holds the oldest lease.
    other = (await env.submit(FLEET2_KEY, "b", {"targets": [env.url("/a0")]})).json()["id"]
    assert (await env.wait(FLEET2_KEY, other))["status"] == "done"
    mine = []
    for i in (1, 2):
        r = await env.submit(FLEET_KEY, f"m{i}", {"targets": [env.url(f"/a{i}")]})
        mine.append(r.json()["id"])
        assert (await env.wait(FLEET_KEY, mine[-1]))["status"] == "done"
    # ~510 bytes each: the third job's results pushed the store over 1100 bytes, and the
    # submitter's own older job went, not the other caller's (before: oldest lease first).
    assert await env.stat("batch_evictions") == 1
    gone = await env.client.get(f"/v1/batch/{mine[0]}", headers=auth(FLEET_KEY))
    assert gone.status_code == 404
    kept = await env.client.get(f"/v1/batch/{other}/results", headers=auth(FLEET2_KEY))
    assert kept.status_code == 200
    assert [item["status"] for item in kept.json()["items"]] == ["done"]
