"""The render pool: hard time and memory limits, replacement and retry, health."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from poolfuncs import allocate, backtrack, die, die_once, echo, refuse, remember
from sift.assembly import build_render_pool
from sift.config import Settings
from sift.errors import (
    RenderFailed,
    RenderTimeout,
    RenderUnavailable,
    UnsupportedContentType,
)
from sift.workers import RenderPool
from sift.workers.process import WORKER_NICE

pytestmark = pytest.mark.slow  # every test starts worker processes


async def test_runs_jobs_in_a_worker_and_passes_sift_errors_through() -> None:
    pool = RenderPool(1, memory_bytes=1 << 30)
    try:
        value, pid = await pool.run(echo, "hi", timeout_s=30)
        assert (value, pool.pids()) == ("hi", [pid])
        assert pid != os.getpid()
        with pytest.raises(UnsupportedContentType) as info:
            await pool.run(refuse, "no", timeout_s=30)
        assert (info.value.message, info.value.hint) == ("no", "a hint from the worker")
        # An error is an answer, not a failure: the same worker serves the next job.
        assert await pool.run(echo, "again", timeout_s=30) == ("again", pid)
        assert pool.replaced == 0
        assert await pool.check() is None
    finally:
        pool.close()
    assert pool.pids() == []


async def test_workers_run_below_the_servers_priority() -> None:
    """Under contention for the CPU the event loop's process comes first: workers are
    ``nice`` 5 below it by default (``render_worker_nice``), as set."""
    assert Settings().render_worker_nice == WORKER_NICE == 5
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    for nice, pool in ((5, RenderPool(1)), (9, build_render_pool(nice_settings(9), 1))):
        try:
            _, pid = await pool.run(echo, "hi", timeout_s=30)
            assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, mine + nice)
        finally:
            pool.close()


def nice_settings(nice: int) -> Settings:
    return dataclasses.replace(Settings(), render_worker_nice=nice, render_reserved_workers=0)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def test_workers_fork_from_a_one_thread_fork_server_and_start_clean() -> None:
    """Workers are forked warm from the fork server (workers/process.py), which runs one
    thread — a fork never copies a lock another thread holds — and never runs a job: a
    worker replacing a killed one starts from the fork server's state, with nothing a
    previous job (another caller's) left in memory."""
    pool = RenderPool(1)
    try:
        assert await pool.run(remember, "a caller's secret", timeout_s=30) is None
        (pid,) = pool.pids()
        server = parent_of(pid)
        assert server != os.getpid()
        assert len(list(Path(f"/proc/{server}/task").iterdir())) == 1
        with pytest.raises(RenderTimeout):
            await pool.run(backtrack, 64, timeout_s=0.5)
        assert await pool.run(remember, "the next caller's", timeout_s=30) is None
        (new,) = pool.pids()
        assert new != pid and parent_of(new) == server
    finally:
        pool.close()


async def test_a_render_stuck_in_c_code_is_killed_at_its_time_limit() -> None:
    pool = RenderPool(1)
    try:
        _, pid = await pool.run(echo, "warm", timeout_s=30)
        with pytest.raises(RenderTimeout) as info:
            await pool.run(backtrack, 64, timeout_s=0.5)
        assert info.value.code == "render_timeout"
        assert info.value.status == 504
        assert "0.5 s" in info.value.message
        # The stuck worker is gone (killed, not left running) and a new one answers.
        assert pool.replaced == 1
        assert not Path(f"/proc/{pid}").exists()
        _, new_pid = await pool.run(echo, "next", timeout_s=30)
        assert new_pid != pid
        assert pool.pids() == [new_pid]
    finally:
        pool.close()


async def test_a_worker_that_dies_is_replaced_and_the_job_retried_once(tmp_path: Path) -> None:
    pool = RenderPool(1)
    try:
        _, first = await pool.run(echo, "warm", timeout_s=30)
        pid = await pool.run(die_once, str(tmp_path / "marker"), timeout_s=30)
        assert pid != first
        assert pool.replaced == 1
        # Dying on the retry too is a clean error, and the pool still works after it.
        with pytest.raises(RenderFailed) as info:
            await pool.run(die, timeout_s=30)
        assert info.value.code == "render_failed"
        assert "died twice" in info.value.message
        assert pool.replaced == 3
        assert (await pool.run(echo, "ok", timeout_s=30))[0] == "ok"
    finally:
        pool.close()


async def test_a_render_over_the_memory_limit_fails_cleanly() -> None:
    pool = RenderPool(1, memory_bytes=512 << 20)
    try:
        assert await pool.run(allocate, 64 << 20, timeout_s=30) == 64 << 20
        with pytest.raises(RenderFailed) as info:
            await pool.run(allocate, 1 << 30, timeout_s=30)
        assert info.value.code == "render_failed"
        assert "512 MiB" in info.value.message
        assert pool.replaced == 1
        assert await pool.run(allocate, 64 << 20, timeout_s=30) == 64 << 20
    finally:
        pool.close()


async def test_workers_that_cannot_start_make_the_pool_unhealthy() -> None:
    # 16 MiB of address space: less than a worker has mapped once the renderer is loaded.
    pool = RenderPool(1, memory_bytes=16 << 20)
    try:
        with pytest.raises(RenderUnavailable) as info:
            await pool.run(echo, "x", timeout_s=30)
        assert info.value.status == 503
        assert "cannot start" in info.value.message
        reason = await pool.check()
        assert reason == pool.broken
        assert reason is not None and reason.startswith(("MemoryError", "ImportError")), reason
        # While broken, renders fail fast instead of starting a worker per request.
        with pytest.raises(RenderUnavailable):
            await pool.run(echo, "x", timeout_s=30)
    finally:
        pool.close()


async def test_close_stops_running_and_queued_renders() -> None:
    pool = RenderPool(1)
    await pool.run(echo, "warm", timeout_s=30)
    running = asyncio.ensure_future(pool.run(backtrack, 64, timeout_s=600))
    queued = asyncio.ensure_future(pool.run(backtrack, 64, timeout_s=600))
    await asyncio.sleep(0.5)
    pool.close()  # kills the busy worker; nothing waits for the 600 s limits
    for job in (running, queued):
        with pytest.raises(RenderUnavailable, match="shut down"):
            await job
    assert pool.pids() == []
