"""Ctrl-C on ``sift serve`` (issue 21 §4): no tracebacks (the render workers ignore the
terminal's SIGINT), one line saying what the stop waits for and that a second Ctrl-C stops
now, and nothing lost. (``sift batch``: tests/test_batch_cli.py's Ctrl-C test, also on the
whole process group.)

Real subprocesses in a process group of their own, signalled as a terminal signals its
foreground job: SIGINT to the whole group, render workers included. Where a bound is
asserted it is far from the behaviour it rules out: a server given a 60 s grace must be
gone well within 30 s of a second Ctrl-C, and one given a 1 s grace must not wait for an
upstream that answers only when the test lets it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from apphelpers import auth
from servehelpers import SIFT, free_port, write_config
from syncupstream import SyncUpstream, serve_pages

pytestmark = pytest.mark.slow

HELD = frozenset({"/held-1", "/held-2", "/held-3"})


@pytest.fixture
def upstream() -> Iterator[SyncUpstream]:
    pages = {path: ("page", "text/plain") for path in ("/p", *HELD)}
    with serve_pages(pages, hang=HELD) as up:
        yield up


class Group:
    """A command in a process group of its own, its output in a file."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def ctrl_c(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)

    def output(self) -> str:
        return self.log.read_text()

    def wait_for(self, text: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.output():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.output()
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _serve(tmp_path: Path, grace_s: float) -> tuple[Group, str, str]:
    """``sift serve`` with this ``batch.shutdown_grace_s``: (group, base URL, fleet key)."""
    cfg, fleet, _ = write_config(tmp_path)
    port = free_port()
    group = Group(
        [
            *SIFT, "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}",
            "--data-dir", str(tmp_path / "data"), "--set", "render_workers=1",
            "--set", f"batch.shutdown_grace_s={grace_s}",
        ],
        tmp_path / "serve.log",
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{base}/healthz", timeout=5).raise_for_status()
            return group, base, fleet
        except httpx.TransportError:
            if group.proc.poll() is not None or time.monotonic() > deadline:
                group.kill()
                raise RuntimeError(f"sift serve did not start: {group.output()}") from None
            time.sleep(0.1)


def _fetch_in_background(base: str, key: str, url: str) -> dict[str, httpx.Response]:
    answer: dict[str, httpx.Response] = {}

    def run() -> None:
        answer["r"] = httpx.post(
            f"{base}/v1/fetch", headers=auth(key), json={"url": url}, timeout=90
        )

    threading.Thread(target=run, daemon=True).start()
    return answer


def _wait_hit(upstream: SyncUpstream, path: str) -> None:
    deadline = time.monotonic() + 30
    while upstream.hits[path] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _sift_lines(out: str) -> list[str]:
    """What sift itself said (the access log and uvicorn's lines interleave with it)."""
    return [line for line in out.splitlines() if line.startswith("sift: ")]


def test_serve_says_what_it_waits_for_and_a_second_ctrl_c_stops_now(
    tmp_path: Path, upstream: SyncUpstream
) -> None:
    group, base, key = _serve(tmp_path, grace_s=60)
    try:
        job = httpx.post(
            f"{base}/v1/batch",
            headers={**auth(key), "Idempotency-Key": "stop"},
            json={"targets": [f"{upstream.base_url}/p", f"{upstream.base_url}/held-1"]},
        ).json()["id"]
        _wait_hit(upstream, "/held-1")  # the first target is done, the second running
        fetch = _fetch_in_background(base, key, f"{upstream.base_url}/held-2")
        _wait_hit(upstream, "/held-2")

        group.ctrl_c()
        group.wait_for("sift: stopping")
        group.ctrl_c()
        assert group.proc.wait(30) == 0  # not the 60 s grace, not the held upstream
    finally:
        group.kill()
    out = group.output()
    assert "Traceback" not in out, out
    assert _sift_lines(out) == [
        "sift: stopping; waiting up to 60 s for 1 open request and 1 batch target to finish "
        "(Ctrl-C again to stop now)",
        "sift: stopping now; cutting off what still runs",
    ]
    cut = fetch["r"]
    assert (cut.status_code, cut.json()["error"]["code"]) == (503, "service_busy")
    # Nothing lost: the finished target's result is stored; the job is left in flight for
    # the next start to fail, as after a restart; the database is sound.
    with sqlite3.connect(tmp_path / "data" / "sift.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (status,) = db.execute("SELECT status FROM batch_job WHERE id = ?", (job,)).fetchone()
        targets = db.execute(
            "SELECT idx, status, result IS NOT NULL FROM batch_target WHERE job_id = ? "
            "ORDER BY idx",
            (job,),
        ).fetchall()
    assert status == "running"
    assert targets[0] == (0, "done", 1)


def test_serve_cuts_off_what_outlasts_the_grace(tmp_path: Path, upstream: SyncUpstream) -> None:
    """One Ctrl-C: requests get the grace (1 s), then answer 503; the server exits 0."""
    group, base, key = _serve(tmp_path, grace_s=1)
    try:
        fetch = _fetch_in_background(base, key, f"{upstream.base_url}/held-3")
        _wait_hit(upstream, "/held-3")
        group.ctrl_c()
        assert group.proc.wait(30) == 0  # the upstream holds the request until teardown
    finally:
        group.kill()
    out = group.output()
    assert "Traceback" not in out, out
    assert _sift_lines(out) == [
        "sift: stopping; waiting up to 1 s for 1 open request to finish (Ctrl-C again to stop now)",
        "sift: 1 request still open; cut off",
    ]
    assert fetch["r"].status_code == 503
