"""The render queue: round robin between callers, a deadline per wait, cancellation.

``FairQueue`` alone (deterministic: the order slots are handed out in), then the real render
pool with real worker processes: the order renders of two callers run in, a render dropped
at its deadline while still queued, a cancelled queued render leaving the queue and a
cancelled running render having its worker killed (not left running to its limit) — or,
for a job that ends by its own deadline (``on_cancel="finish"``), left to finish.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from poolfuncs import announce_then_backtrack, announce_then_wait, echo, nap
from sift.errors import RenderQueueTimeout, RenderUnavailable
from sift.workers import RenderPool
from sift.workers.fairqueue import FairQueue


async def _queued(queue: FairQueue, caller: str, order: list[str]) -> None:
    await queue.acquire(caller, None)
    order.append(caller)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_slots_go_round_robin_between_callers() -> None:
    queue = FairQueue(1)
    await queue.acquire("holder", None)
    order: list[str] = []
    # "a" queues three, then "b" one, then "c" one: FIFO would serve a, a, a, b, c.
    tasks = [
        asyncio.ensure_future(_queued(queue, name, order)) for name in ("a", "a", "a", "b", "c")
    ]
    await _settle()
    assert (queue.queued(), queue.queued("a"), queue.in_use) == (5, 3, 1)
    for holder in ("holder", "a", "b", "c", "a"):  # each release is by the one served last
        queue.release(holder)
        await _settle()
    assert order == ["a", "b", "c", "a", "a"]
    await asyncio.gather(*tasks)
    queue.release("a")
    assert (queue.queued(), queue.in_use) == (0, 0)


async def test_the_caller_served_least_recently_goes_first() -> None:
    queue = FairQueue(2)
    await queue.acquire("a", None)
    await queue.acquire("a", None)  # both slots at once: nothing else is queued
    order: list[str] = []
    tasks = [asyncio.ensure_future(_queued(queue, n, order)) for n in ("a", "a", "b")]
    await _settle()
    queue.release("a")
    await _settle()
    assert order == ["b"]  # b queued last, but a holds both slots: b's turn comes first
    queue.release("a")
    queue.release("b")
    await _settle()
    assert order == ["b", "a", "a"]
    await asyncio.gather(*tasks)
    # b is now the one served longest ago: back with a render, it goes before a's next.
    order.clear()
    more = [asyncio.ensure_future(_queued(queue, n, order)) for n in ("a", "a", "b")]
    await _settle()
    for _ in more:
        queue.release("a")
        await _settle()
    assert order == ["b", "a", "a"]
    await asyncio.gather(*more)


async def test_a_waiter_still_queued_at_its_deadline_is_dropped() -> None:
    queue = FairQueue(1)
    await queue.acquire("holder", None)
    loop = asyncio.get_running_loop()
    with pytest.raises(RenderQueueTimeout) as info:
        await queue.acquire("late", loop.time() + 0.05)
    assert (info.value.code, info.value.status) == ("render_queue_timeout", 503)
    assert info.value.headers == {"Retry-After": "1"}
    assert "dropped from the queue before it started" in info.value.message
    assert "Retry-After" in info.value.hint
    assert queue.queued() == 0
    # The dropped waiter took nothing: the slot goes to the next one queued.
    order: list[str] = []
    nxt = asyncio.ensure_future(_queued(queue, "next", order))
    await _settle()
    queue.release("holder")
    await nxt
    assert (order, queue.in_use) == (["next"], 1)


async def test_a_cancelled_waiter_leaves_the_queue_at_once() -> None:
    queue = FairQueue(1)
    await queue.acquire("holder", None)
    order: list[str] = []
    gone = asyncio.ensure_future(_queued(queue, "gone", order))
    stays = asyncio.ensure_future(_queued(queue, "stays", order))
    await _settle()
    assert queue.queued() == 2
    gone.cancel()
    await _settle()
    assert (queue.queued("gone"), queue.queued()) == (0, 1)
    queue.release("holder")
    await stays
    assert order == ["stays"]


async def test_a_kept_turn_goes_only_to_a_caller_with_nothing_running() -> None:
    """Two turns and one kept: a caller holding both waits for its third even though the
    kept one is free (a lone caller runs exactly as many as before); another caller with
    nothing running starts at once; that caller's second render, and a third caller while
    the kept turn is taken, wait; at most three ever run, and more than two only while a
    caller with nothing else running holds a turn."""
    queue = FairQueue(2, reserved=1)
    await queue.acquire("flood", None)
    await queue.acquire("flood", None)
    order: list[str] = []
    flood3 = asyncio.ensure_future(_queued(queue, "flood", order))
    await _settle()
    assert (queue.in_use, queue.queued("flood")) == (2, 1)  # nothing more for a lone caller
    await queue.acquire("victim", None)  # at once: the kept turn
    assert (queue.in_use, queue.running("victim")) == (3, 1)
    victim2 = asyncio.ensure_future(_queued(queue, "victim", order))
    third = asyncio.ensure_future(_queued(queue, "third", order))
    await _settle()
    assert (queue.queued("victim"), queue.queued("third"), order) == (1, 1, [])
    queue.release("flood")  # 2 in use, no ordinary turn: the kept one, to a caller idle
    await _settle()
    assert (order, queue.in_use) == (["third"], 3)
    queue.release("victim")  # victim has nothing running now: its next goes before flood's
    await _settle()
    assert (order, queue.in_use) == (["third", "victim"], 3)
    queue.release("flood")
    await _settle()
    assert order == ["third", "victim", "flood"]
    await asyncio.gather(flood3, victim2, third)
    assert [queue.running(c) for c in ("flood", "victim", "third")] == [1, 1, 1]
    for caller in ("flood", "victim", "third"):
        queue.release(caller)
    assert queue.in_use == 0


async def test_a_fair_queue_without_kept_turns_makes_the_newcomer_wait() -> None:
    queue = FairQueue(2)
    await queue.acquire("flood", None)
    await queue.acquire("flood", None)
    loop = asyncio.get_running_loop()
    with pytest.raises(RenderQueueTimeout):
        await queue.acquire("victim", loop.time() + 0.05)
    with pytest.raises(ValueError, match="holds no slot"):
        queue.release("victim")


async def test_closing_fails_queued_waiters() -> None:
    queue = FairQueue(1)
    await queue.acquire("holder", None)
    waiter = asyncio.ensure_future(queue.acquire("w", None))
    await _settle()
    queue.close()
    with pytest.raises(RenderUnavailable, match="shut down"):
        await waiter
    with pytest.raises(RenderUnavailable, match="shut down"):
        await queue.acquire("after", None)


# -- the real pool ------------------------------------------------------------------------


@pytest.mark.slow
async def test_pool_runs_callers_in_turn_not_first_come_first_served() -> None:
    pool = RenderPool(1)
    done: list[str] = []

    async def render(caller: str, value: str, seconds: float) -> None:
        done.append(await pool.run(nap, value, seconds, timeout_s=30, caller=caller))

    try:
        await pool.run(echo, "warm", timeout_s=30)
        first = asyncio.ensure_future(render("flood", "f0", 0.3))
        while pool.admitted == 0:  # the first render holds the only worker
            await asyncio.sleep(0)
        flood = [asyncio.ensure_future(render("flood", f"f{i}", 0.05)) for i in (1, 2, 3)]
        await _settle()
        victim = asyncio.ensure_future(render("victim", "v", 0.05))
        await _settle()
        assert (pool.queued("flood"), pool.queued("victim")) == (3, 1)
        await asyncio.gather(first, victim, *flood)
        # FIFO would have been f0 f1 f2 f3 v: the victim goes right after the render
        # running when it came.
        assert done == ["f0", "v", "f1", "f2", "f3"]
    finally:
        pool.close()


@pytest.mark.slow
async def test_pool_drops_a_render_still_queued_at_its_deadline() -> None:
    pool = RenderPool(1)
    try:
        await pool.run(echo, "warm", timeout_s=30)
        busy = asyncio.ensure_future(pool.run(nap, "busy", 2.0, timeout_s=30, caller="a"))
        while pool.admitted == 0:
            await asyncio.sleep(0)
        deadline = asyncio.get_running_loop().time() + 0.2
        with pytest.raises(RenderQueueTimeout) as info:
            await pool.run(echo, "late", timeout_s=30, caller="b", deadline=deadline)
        assert info.value.code == "render_queue_timeout"
        assert pool.queued() == 0
        assert await busy == "busy"
        assert pool.replaced == 0  # a dropped render never touched a worker
    finally:
        pool.close()


@pytest.mark.slow
async def test_cancelling_a_running_render_kills_its_worker(tmp_path: Path) -> None:
    pool = RenderPool(1)
    marker = tmp_path / "running"
    try:
        await pool.run(echo, "warm", timeout_s=30)
        running = asyncio.ensure_future(
            pool.run(announce_then_backtrack, str(marker), 64, timeout_s=600, caller="a")
        )
        queued = asyncio.ensure_future(pool.run(echo, "never", timeout_s=30, caller="a"))
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.02)
        pid = int(marker.read_text())
        assert pool.queued("a") == 1
        queued.cancel()
        await _settle()
        assert pool.queued() == 0  # the queued one left at once
        running.cancel()  # not left to burn its 600 s limit in C code
        with pytest.raises(asyncio.CancelledError):
            await running
        value, new_pid = await pool.run(echo, "next", timeout_s=30, caller="b")
        assert value == "next" and new_pid != pid
        assert not Path(f"/proc/{pid}").exists()
        assert pool.replaced == 1
        assert pool.pids() == [new_pid]
    finally:
        pool.close()


@pytest.mark.slow
async def test_cancelling_a_render_while_its_worker_starts_leaves_the_pool_healthy() -> None:
    """A worker killed during its start-up because nobody waits any more is not a worker
    that cannot start: the pool is not marked broken and the next render works. (Workers
    spawned, not forked warm: their start-up lasts long enough to cancel a render in it.)"""
    pool = RenderPool(1, start_method="spawn")
    try:
        first = asyncio.ensure_future(pool.run(echo, "never", timeout_s=30, caller="a"))
        while pool.admitted == 0:
            await asyncio.sleep(0)
        await asyncio.sleep(0.2)  # the thread holds the worker, which is still importing
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        value, _ = await pool.run(echo, "next", timeout_s=30, caller="b")
        assert (value, pool.broken) == ("next", None)
    finally:
        pool.close()


@pytest.mark.slow
async def test_a_job_left_to_finish_keeps_its_worker_and_its_turn(tmp_path: Path) -> None:
    """``on_cancel="finish"`` (the crawl's jobs, which stop at their own deadline): the
    caller stops waiting, the job runs on, its worker is not killed and its turn is held
    until it ends; then the worker serves the next job."""
    pool = RenderPool(1)
    marker, release = tmp_path / "running", tmp_path / "release"
    try:
        await pool.run(echo, "warm", timeout_s=30)
        running = asyncio.ensure_future(
            pool.run(
                announce_then_wait,
                str(marker),
                str(release),
                timeout_s=60,
                caller="a",
                on_cancel="finish",
            )
        )
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.02)
        pid = int(marker.read_text())
        queued = asyncio.ensure_future(pool.run(echo, "next", timeout_s=30, caller="b"))
        await _settle()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await _settle()
        assert (pool.admitted, pool.queued("b"), queued.done()) == (1, 1, False)
        release.write_text("go")
        assert await queued == ("next", pid)  # the same worker, once the job had ended
        assert (pool.replaced, pool.admitted, pool.pids()) == (0, 0, [pid])
    finally:
        pool.close()


@pytest.mark.slow
async def test_a_job_left_to_finish_that_never_started_never_runs(tmp_path: Path) -> None:
    """Cancelled while still queued, an ``on_cancel="finish"`` job leaves the queue like any
    other: it never runs."""
    pool = RenderPool(1)
    marker, release = tmp_path / "running", tmp_path / "release"
    try:
        await pool.run(echo, "warm", timeout_s=30)
        holder = asyncio.ensure_future(
            pool.run(announce_then_wait, str(marker), str(release), timeout_s=60, caller="a")
        )
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.02)
        never = asyncio.ensure_future(
            pool.run(nap, "never", 30.0, timeout_s=60, caller="b", on_cancel="finish")
        )
        await _settle()
        assert pool.queued("b") == 1
        never.cancel()
        await _settle()
        assert pool.queued() == 0
        release.write_text("go")
        await holder
        assert await pool.run(echo, "next", timeout_s=30, caller="c") == (
            "next",
            int(marker.read_text()),
        )
        assert pool.admitted == 0
    finally:
        pool.close()
