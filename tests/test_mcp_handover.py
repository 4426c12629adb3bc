"""A one-shot MCP client over stdio (issue 21, item 10): it starts `sift mcp`, submits a job,
and exits; on a later run it finds the job finished — never "sift restarted".

Driven by the MCP SDK's own stdio client, which ends a session the way clients do: it closes
the server's input, waits 2 s, then SIGTERMs (and SIGKILLs) the server's process group. The
upstream holds ``/slow`` until the test releases it, so the job is certainly unfinished when
the session ends; every wait is on an event (a request reaching the upstream, the data
directory's lock being let go) or on polling the job through MCP.
"""

from __future__ import annotations

import asyncio
import fcntl
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from mcphelpers import call
from sift.dcache import DB, AsyncDB
from sift.store.sqlite.store import SqliteBatchStore
from test_mcp_stdio import PAGE, mcp_stdio
from upstream import Upstream

pytestmark = pytest.mark.timeout(120)


@dataclass
class Site:
    up: Upstream
    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Queue[int] = field(default_factory=asyncio.Queue)  # /slow requests so far

    def url(self, path: str) -> str:
        return self.up.url(path)


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with Upstream() as up:
        s = Site(up)
        up.page("/fast", PAGE.format(n=1))

        async def slow(request: web.Request) -> web.StreamResponse:
            s.arrived.put_nowait(up.hits["/slow"])
            await s.release.wait()
            return web.Response(text=PAGE.format(n=2), content_type="text/html")

        up.route("/slow", slow)
        try:
            yield s
        finally:
            s.release.set()


async def status(session: Any, job_id: str) -> dict[str, Any]:
    view = (await call(session, "batch_status", {"id": job_id})).structured_content
    assert view is not None
    return view


async def poll(session: Any, job_id: str, until: str) -> dict[str, Any]:
    for _ in range(600):
        view = await status(session, job_id)
        if view["status"] == until or (
            until == "done" and view["status"] not in ("queued", "running")
        ):
            return view
        await asyncio.sleep(0.05)  # the job runs in another process
    raise AssertionError(f"job {job_id} never reached {until}: {view}")


async def wait_unlocked(data_dir: Path) -> None:
    """Until no process holds the data directory (the finisher has exited)."""

    def block() -> None:
        with open(data_dir / "sift.lock", "rb") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # returns once the holder lets go
            fcntl.flock(fh, fcntl.LOCK_UN)

    await asyncio.to_thread(block)


def handover_line(tmp_path: Path) -> str:
    (line,) = (tmp_path / "stderr.log").read_text().splitlines()
    return re.sub(r"pid \d+", "pid N", line)


async def test_a_one_shot_client_finds_its_job_finished(tmp_path: Path, site: Site) -> None:
    data = tmp_path / "data"
    async with mcp_stdio(tmp_path, "--operator") as session:
        sub = await call(session, "batch_submit", {"urls": [site.url("/fast"), site.url("/slow")]})
        job = sub.structured_content
        assert job is not None
        assert await site.arrived.get() == 1  # /slow is being fetched …
        await poll_done_targets(session, job["id"], 1)  # … and /fast is done
    # The session is over: its process has exited, the job is not finished.
    assert handover_line(tmp_path) == (
        "sift mcp: input closed with 1 unfinished job(s); sift (pid N) finishes them in the "
        f"background for at most 900 s (batch.mcp_finish_s); log: {data}/mcp-finish.log"
    )
    assert await site.arrived.get() == 2  # the finisher fetches /slow again
    site.release.set()
    await wait_unlocked(data)
    log = (data / "mcp-finish.log").read_text()
    assert f"1 job(s) handed over: {job['id']}\n" in log and log.endswith(": done\n")
    async with mcp_stdio(tmp_path, "--operator") as later:
        view = await status(later, job["id"])
        assert (view["status"], view["error"], view["targets_done"]) == ("done", "", 2)
        results = (await call(later, "batch_results", {"id": job["id"]})).structured_content
        assert results is not None
        assert [(i["status"], i["title"]) for i in results["items"]] == [
            ("done", "Batch 1"),
            ("done", "Batch 2"),
        ]
    assert (site.up.hits["/fast"], site.up.hits["/slow"]) == (1, 2)
    assert (tmp_path / "stderr.log").read_text() == ""  # nothing live: nothing handed over


async def poll_done_targets(session: Any, job_id: str, done: int) -> None:
    for _ in range(600):
        if (await status(session, job_id))["targets_done"] >= done:
            return
        await asyncio.sleep(0.05)  # the job runs in sift mcp's runner
    raise AssertionError(f"job {job_id}: fewer than {done} targets done")


async def test_the_next_session_takes_the_jobs_over(tmp_path: Path, site: Site) -> None:
    """A client back while the finisher still runs: its `sift mcp` asks the finisher to
    stop, takes the data directory and the job, and finishes it."""
    data = tmp_path / "data"
    async with mcp_stdio(
        tmp_path, "--class", "fleet", "--set", "classes.fleet.allow_private=true"
    ) as session:
        crawl = (await call(session, "crawl", {"url": site.url("/slow")})).structured_content
        assert crawl is not None
        assert await site.arrived.get() == 1
    assert handover_line(tmp_path).startswith("sift mcp: input closed with 1 unfinished job(s)")
    assert await site.arrived.get() == 2  # the finisher has it
    async with mcp_stdio(
        tmp_path, "--class", "fleet", "--set", "classes.fleet.allow_private=true"
    ) as later:
        assert await site.arrived.get() == 3  # … and now this session
        assert (tmp_path / "stderr.log").read_text() == "sift mcp: resuming 1 unfinished job(s)\n"
        assert (await status(later, crawl["id"]))["status"] in ("queued", "running")
        site.release.set()
        view = await poll(later, crawl["id"], "done")
        assert (view["status"], view["error"]) == ("done", "")
    log = (data / "mcp-finish.log").read_text()
    assert log.endswith(": stopped; 1 job(s) left to the next sift mcp\n")
    assert not (data / "mcp-handover.json").exists()


async def test_the_finisher_is_bounded_by_mcp_finish_s(tmp_path: Path, site: Site) -> None:
    """Past ``batch.mcp_finish_s`` the job ends ``interrupted`` with that reason (the bound
    is what is tested: 1 s, while /slow is held until the end of the test)."""
    data = tmp_path / "data"
    flags = ("--operator", "--set", "batch.mcp_finish_s=1", "--set", "batch.shutdown_grace_s=0")
    async with mcp_stdio(tmp_path, *flags) as session:
        sub = await call(session, "batch_submit", {"urls": [site.url("/slow")]})
        job = sub.structured_content
        assert job is not None
        assert await site.arrived.get() == 1
    assert "for at most 1 s (batch.mcp_finish_s)" in handover_line(tmp_path)
    await wait_unlocked(data)
    reason = (
        "interrupted: the sift mcp session that submitted this job ended, and the job did not "
        "finish within batch.mcp_finish_s (1 s) after"
    )
    store = SqliteBatchStore(AsyncDB(DB.open(data / "sift.db")))
    try:
        stored = await store.batch_job(job["id"])
        targets = await store.batch_targets(job["id"])
    finally:
        await store.adb.close()
    assert stored is not None and targets is not None
    assert (stored.status, stored.error) == ("failed", reason)
    assert [(t.status, t.error) for t in targets] == [("failed", reason)]
    assert "sift restarted" not in (data / "mcp-finish.log").read_text()
