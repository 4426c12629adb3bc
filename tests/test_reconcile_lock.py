"""``sift batch reconcile`` owns the data directory like every other command (issue 21 §9).

Run next to a ``sift serve`` that owns the directory, it used to fail that server's running
job and exit 0. Now it refuses with one line naming the server (exit 2) and the job
finishes; with the server gone it reconciles what that server left in flight.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apphelpers import auth
from servehelpers import SIFT, sift_serve
from syncupstream import SyncUpstream, serve_pages


@pytest.fixture
def upstream() -> Iterator[SyncUpstream]:
    pages = {path: ("page", "text/plain") for path in ("/p", "/hold", "/hold-2")}
    with serve_pages(pages, hang=frozenset({"/hold", "/hold-2"})) as up:
        yield up


def _submit(client: httpx.Client, key: str, idem: str, urls: list[str]) -> str:
    answer = client.post(
        "/v1/batch", headers={**auth(key), "Idempotency-Key": idem}, json={"targets": urls}
    )
    assert answer.status_code == 202, answer.text
    job_id: str = answer.json()["id"]
    return job_id


def _wait(
    client: httpx.Client, key: str, job_id: str, until: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The job's status view once ``until`` holds (polled; fails after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        view: dict[str, Any] = client.get(f"/v1/batch/{job_id}", headers=auth(key)).json()
        if until(view):
            return view
        assert time.monotonic() < deadline, view
        time.sleep(0.05)


def _reconcile(served_config: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SIFT, "batch", "reconcile", "--config", str(served_config), "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.slow
def test_reconcile_refuses_next_to_a_server_and_its_job_finishes(
    tmp_path: Path, upstream: SyncUpstream
) -> None:
    urls = [f"{upstream.base_url}/p", f"{upstream.base_url}/hold"]
    with sift_serve(tmp_path) as served, httpx.Client(base_url=served.base_url) as client:
        key = served.fleet_key
        job = _submit(client, key, "live", urls)
        _wait(client, key, job, lambda v: v["targets_done"] == 1 and v["status"] == "running")
        assert upstream.hits["/hold"] == 1  # the second target is being fetched right now
        refused = _reconcile(served.config, served.data_dir)
        assert refused.returncode == 2, refused
        listen = served.base_url.removeprefix("http://")
        assert refused.stderr == (
            f"sift: data_dir: {served.data_dir}: in use by sift serve (pid {served.proc.pid}, "
            f"listening on {listen}); reconcile fails every live job, this server's too: stop "
            "it first (the embedded store reconciles at every start anyway)\n"
        )
        upstream.release.set()
        view = _wait(client, key, job, lambda v: v["status"] not in ("queued", "running"))
        assert (view["status"], view["error"], view["counts"]["done"]) == ("done", "", 2)

        # With the server gone (killed mid-job), reconcile owns the directory and fails
        # what it left in flight (a path of its own: /hold is in the cache now).
        upstream.release.clear()
        second = _submit(client, key, "left", [f"{upstream.base_url}/hold-2"])
        _wait(client, key, second, lambda v: v["status"] == "running")
        served.kill_hard()
    done = _reconcile(served.config, served.data_dir)
    assert (done.returncode, done.stderr) == (0, "sift: marked 1 live batch jobs failed\n")
    with sqlite3.connect(served.data_dir / "sift.db") as db:
        rows = dict(db.execute("SELECT id, status FROM batch_job").fetchall())
    assert rows == {job: "done", second: "failed"}
