"""Watches on a real `sift serve` process: the Python client and `sift watch` through it, and
a watch that survives the server's restart (the same data directory, a new process).

The upstream is a threaded HTTP server on 127.0.0.1 (the sync client blocks its thread);
every URL is an IP literal (the server process uses the system resolver)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servehelpers import SIFT, Served, sift_serve, write_config
from sift.client import Client
from sift.errors import BadRequest, NotFound
from syncupstream import SyncUpstream, serve_pages

pytestmark = pytest.mark.timeout(120)

# A fleet minimum of 1 s and a scheduler that looks every 50 ms, with no first-check spread.
EXTRA = "min_interval_s = 1\n[watch]\ntick_s = 0.05\njitter_s = 0\n"


@pytest.fixture(scope="module")
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages({"/w": ("<p>watched page</p>", "text/html; charset=utf-8")}) as up:
        yield up


def _until(client: Client, wid: str, checks: int) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        shown = client.get_watch(wid, events=50)
        if shown["checks"] >= checks:
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.05)


def _sift_watch(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SIFT, "watch", *args, "--server", served.base_url, "--key", served.fleet_key],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_client_and_cli_and_a_restart(upstream: SyncUpstream, tmp_path: Path) -> None:
    config = write_config(tmp_path, EXTRA)
    data = tmp_path / "data"
    url = f"{upstream.base_url}/w"
    with sift_serve(tmp_path, config=config, data_dir=data) as served:
        with Client(served.base_url, served.fleet_key) as client:
            made = client.create_watch(url, "1s", options={"format": "text"})
            wid = made["id"]
            assert [w["id"] for w in client.list_watches()] == [wid]
            shown = _until(client, wid, 2)
            assert [e["outcome"] for e in shown["events"]][-2:] == ["ok", "ok"]
            with pytest.raises(BadRequest):
                client.create_watch(url, 0.2)
            with pytest.raises(NotFound):
                client.get_watch("f" * 24)
        # The CLI through the same server.
        added = _sift_watch(served, "add", url, "--every", "2h", "--json")
        assert added.returncode == 0, added.stderr
        other = json.loads(added.stdout)
        assert (other["url"], other["every_s"]) == (url, 7200.0)
        listed = _sift_watch(served, "list")
        assert listed.returncode == 0, listed.stderr
        assert [line.split()[0] for line in listed.stdout.splitlines()] == [wid, other["id"]]
        removed = _sift_watch(served, "rm", other["id"])
        assert (removed.returncode, removed.stdout) == (0, f"deleted {other['id']}\n")
        gone = _sift_watch(served, "show", other["id"])
        assert gone.returncode == 1 and f"no watch '{other['id']}'" in gone.stderr
        before = shown["checks"]
    # A new process on the same data directory: the watch is there and fires again.
    with (
        sift_serve(tmp_path, config=config, data_dir=data) as served,
        Client(served.base_url, served.fleet_key) as client,
    ):
        assert [w["id"] for w in client.list_watches()] == [wid]
        after = _until(client, wid, before + 2)
        seqs = [e["seq"] for e in after["events"]]
        assert seqs == sorted(seqs, reverse=True) and seqs[-1] == 1
        shown_cli = _sift_watch(served, "show", wid, "--events", "3")
        assert shown_cli.returncode == 0, shown_cli.stderr
        lines = shown_cli.stdout.splitlines()
        assert lines[0].startswith(f"{wid}  every 1s") and lines[0].endswith(url)
        assert len(lines) == 4 and all(" ok HTTP 200" in line for line in lines[1:])


def test_sift_watch_without_a_server_stores_the_watch_for_the_next_one(
    upstream: SyncUpstream, tmp_path: Path
) -> None:
    config = write_config(tmp_path, EXTRA)
    cfg = config[0]
    data = tmp_path / "data"
    local = [*SIFT, "watch"]
    where = ["--config", str(cfg), "--data-dir", str(data)]
    url = f"{upstream.base_url}/w"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*local, *args, *where], capture_output=True, text=True, timeout=60)

    added = run("add", url, "--every", "1s", "--json")
    assert added.returncode == 0, added.stderr
    wid = json.loads(added.stdout)["id"]
    listed = run("list")
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [wid]
    assert "last -  checks 0" in listed.stdout  # nothing checks it without a server
    bad = run("add", url, "--every", "0.1")
    assert bad.returncode == 1
    assert "every: 0.1 s is shorter than this caller's minimum interval of 1 s" in bad.stderr
    # The next `sift serve` on that data directory checks it; `sift watch` then goes
    # through that server, as the operator (the watch's owner).
    with sift_serve(tmp_path, config=config, data_dir=data):
        deadline = time.monotonic() + 60
        while True:
            shown = run("show", wid, "--json")
            assert shown.returncode == 0, shown.stderr
            assert "going through it" in shown.stderr
            view = json.loads(shown.stdout)
            if view["checks"] >= 1:
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        assert view["events"][-1]["outcome"] == "ok"
