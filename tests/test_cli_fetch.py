"""`sift fetch` in-process and against a real `sift serve`; the Python client end to end."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servehelpers import SIFT, Served, sift_serve
from sift.client import AsyncClient, Client
from sift.errors import Blocked, BlockedAddress, InvalidUrl
from syncupstream import serve_pages

PAGE = (
    "<html><head><title>CLI page</title></head><body><article><h1>Title</h1>"
    "<p>A paragraph long enough to be the main content of this small test page.</p>"
    "</article></body></html>"
)
LONG = "\n".join(f"line {i}" for i in range(2000))


@pytest.fixture
def upstream() -> Iterator[str]:
    """Threaded, so sync tests and subprocesses can both reach it; one per test, so each
    test's URLs are new to the shared server's cache."""
    pages = {
        "/page": (PAGE, "text/html; charset=utf-8"),
        "/long": (LONG, "text/plain; charset=utf-8"),
    }
    with serve_pages(pages) as up:
        yield up.base_url


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `sift serve` for the tests that talk to a server (each has its own upstream)."""
    with sift_serve(tmp_path_factory.mktemp("serve")) as s:
        yield s


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SIFT, *args], capture_output=True, text=True, timeout=60)


def test_fetch_in_process(tmp_path: Path, upstream: str) -> None:
    data = str(tmp_path / "d")
    proc = run("fetch", f"{upstream}/page", "--data-dir", data, "--no-robots")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        "# Title\n\nA paragraph long enough to be the main content of this small test page.\n"
    )
    proc = run(
        "fetch",
        f"{upstream}/long",
        "--data-dir",
        data,
        "--no-robots",
        "--json",
        "--max-bytes",
        "100",
        "--format",
        "text",
    )
    env = json.loads(proc.stdout)
    assert (env["bytes"], env["truncated"], env["next_offset"]) == (94, True, 94)
    assert env["content"] == "\n".join(f"line {i}" for i in range(13)) + "\n"
    proc = run("fetch", "ftp://nope/", "--data-dir", data)
    assert proc.returncode == 1
    assert proc.stderr.startswith("sift: ") and "\nhint: " in proc.stderr


def test_stats_counts_hits_and_misses(tmp_path: Path, upstream: str) -> None:
    data = str(tmp_path / "d")
    proc = run("stats", "--data-dir", data)
    assert proc.returncode == 2
    assert "no database yet" in proc.stderr
    for _ in range(3):
        assert run("fetch", f"{upstream}/page", "--data-dir", data, "--no-robots").returncode == 0
    proc = run("stats", "--data-dir", data, "--json")
    assert proc.returncode == 0, proc.stderr
    st = json.loads(proc.stdout)
    assert (st["hits"], st["misses"], st["revalidated"], st["hit_rate"]) == (2, 1, 0, 0.6667)
    assert (st["pages"], st["bodies"], st["renders"], st["batch_jobs"]) == (1, 1, 1, 0)
    assert len(PAGE) <= st["cache_bytes"] < 4096  # the body, stored raw, plus one render
    assert st["cache_max_bytes"] == 1 << 30
    text = run("stats", "--data-dir", data).stdout
    assert "requests  2 hits, 1 misses, 0 revalidated; hit rate 66.7%" in text


def test_cli_and_client_against_a_real_server(served: Served, upstream: str) -> None:
    proc = run(
        "fetch",
        f"{upstream}/page",
        "--server",
        served.base_url,
        "--key",
        served.fleet_key,
        "--no-robots",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    env = json.loads(proc.stdout)
    assert (env["title"], env["cache"], env["status"]) == ("CLI page", "miss", 200)
    # The restricted caller is refused loopback; the error is rebuilt as the same class.
    proc = run(
        "fetch", f"{upstream}/page", "--server", served.base_url, "--key", served.restricted_key
    )
    assert proc.returncode == 1
    assert "hint: This caller may only reach public addresses" in proc.stderr
    with Client(served.base_url, served.restricted_key) as client:
        with pytest.raises(BlockedAddress) as info:
            client.fetch(f"{upstream}/page")
        assert type(info.value) is Blocked
        with pytest.raises(InvalidUrl):
            client.fetch("gopher://x/")
    with Client(served.base_url, served.fleet_key) as client:
        pieces = list(client.read(f"{upstream}/long", max_bytes=500, robots=False))
        assert "".join(p.content for p in pieces) == LONG
        assert len({p.digest for p in pieces}) == 1
        assert pieces[-1].next_offset is None
        # 18,889 bytes in slices of at most 500 that end at a line: 38 of them.
        assert len(pieces) == 38
        assert all(p.bytes <= 500 and p.content.endswith("\n") for p in pieces[:-1])


async def test_async_client(served: Served, upstream: str) -> None:
    async with AsyncClient(served.base_url, served.fleet_key) as client:
        env = await client.fetch(f"{upstream}/page", format="text", robots=False)
        assert env.content == (
            "Title\n\nA paragraph long enough to be the main content of this small test page."
        )
        joined = [
            p.content async for p in client.read(f"{upstream}/long", max_bytes=4000, robots=False)
        ]
        assert "".join(joined) == LONG
