"""A browser page's whole memory and its CPU time are bounded (issue 24, finding 4).

Real Chromium, pages on a loopback upstream. ``page_heap_bytes`` caps only V8's heap: a
page filling ArrayBuffers (outside the heap) is stopped by the watchdog once its renderer
passes ``browser.page_memory_bytes`` (256 MiB here), with ``browser_memory_exceeded``; the
page stops by itself at 512 MiB, so the machine is never at risk even if the watch failed —
and the control run, with a limit above that, shows the page really gets there. A page
spinning its CPU is stopped at ``browser.page_cpu_s`` with ``browser_cpu_exceeded`` instead
of burning a core until its deadline. The policy itself (sums, which limit, the kill) and
the renicing are checked without a browser.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from apphelpers import PUBLIC_HOST, PUBLIC_NAME
from browserhelpers import require_browser
from sift.browser import Browser
from sift.browser.watchdog import PageBudget, PageWatch, Stop, renice
from sift.config import BrowserSettings
from sift.errors import BrowserCpuExceeded, BrowserMemoryExceeded
from sift.fetch import Fetcher, StaticResolver, restricted_policy
from upstream import Upstream

MiB = 1 << 20
# Fills 32 MiB ArrayBuffers every 20 ms up to 512 MiB, then says so.
HUNGRY = """<!doctype html><p>hungry</p><script>
const keep = []; let total = 0;
function more() {
  if (total >= 512 * 1024 * 1024) {
    document.body.insertAdjacentHTML('beforeend', '<p id=done>' + (total >> 20) + ' MiB</p>');
    return;
  }
  const a = new Uint8Array(32 * 1024 * 1024); a.fill(7); keep.push(a); total += a.length;
  setTimeout(more, 20);
}
more();
</script>"""
SPIN = "<!doctype html><p>spin</p><script>for (;;) {}</script>"
TEXT = "<!doctype html><p>light page</p>"


def test_the_watch_sums_the_pages_processes_and_kills_past_either_budget() -> None:
    used: dict[int, tuple[int, float] | None] = {1: (200 * MiB, 0.5), 2: (100 * MiB, 0.25)}
    killed: list[int] = []
    budget = PageBudget(memory_bytes=256 * MiB, cpu_s=1.0, nice=10)
    watch = PageWatch(frozenset({1, 2}), budget, read=used.__getitem__, kill=killed.append)
    assert watch.check() == Stop("memory", 300 * MiB, 0.75)
    assert sorted(killed) == [1, 2]
    killed.clear()
    used[1] = (100 * MiB, 0.5)
    assert watch.check() is None  # 200 MiB and 0.75 s: within both
    used[2] = (100 * MiB, 0.75)
    assert watch.check() == Stop("cpu", 200 * MiB, 1.25)
    used[1] = used[2] = None  # gone
    killed.clear()
    assert watch.check() is None and killed == []


def test_renice_lowers_every_thread_of_a_process() -> None:
    code = (
        "import threading, time\n"
        "for _ in range(3): threading.Thread(target=time.sleep, args=(30,)).start()\n"
        "time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        task_dir = Path(f"/proc/{child.pid}/task")
        while len(list(task_dir.iterdir())) < 4:
            os.sched_yield()
        done: set[int] = set()
        renice([child.pid], 10, done)
        tids = {int(t.name) for t in task_dir.iterdir()}
        assert tids <= done
        assert {os.getpriority(os.PRIO_PROCESS, tid) for tid in tids} == {10}
    finally:
        child.kill()
        child.wait()


def dead(pid: int) -> bool:
    """Gone, or a zombie its parent has not reaped yet (SIGKILL took effect either way)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def _all_dead(pids: Iterable[int], within_s: float) -> bool:
    """Whether every pid is ``dead``, polling until ``within_s`` has passed."""
    deadline = time.monotonic() + within_s
    while not all(dead(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent="sift-test",
        resolver=StaticResolver({}),
        extra_public_cidrs=["127.0.1.0/24"],
        static_hosts={PUBLIC_NAME: [PUBLIC_HOST]},
    ) as f:
        yield f


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream(host=PUBLIC_HOST) as up:
        up.page("/hungry", HUNGRY)
        up.page("/spin", SPIN)
        up.page("/text", TEXT)
        yield up


async def _load(browser: Browser, up: Upstream, path: str, **kw: Any) -> Any:
    return await browser.load(
        f"http://{PUBLIC_NAME}:{up.port}{path}",
        restricted_policy(extra_ports=frozenset({up.port}), timeout_s=30),
        caller="agent",
        caller_pages=1,
        caller_class="restricted",
        deadline_s=25,
        **kw,
    )


@pytest.mark.slow
async def test_a_page_filling_array_buffers_is_stopped_at_its_memory_limit(
    fetcher: Fetcher, upstream: Upstream
) -> None:
    require_browser()
    browser = Browser(BrowserSettings(page_memory_bytes=256 * MiB), fetcher)
    try:
        with pytest.raises(BrowserMemoryExceeded) as info:
            await _load(browser, upstream, "/hungry", wait_for="#done")
        err = info.value
        assert (err.code, err.status) == ("browser_memory_exceeded", 502)
        assert err.message.endswith(
            "MiB of memory, more than the 256 MiB a browser page may "
            "(browser.page_memory_bytes); it was stopped."
        )
        watch = browser.last_watch
        assert watch is not None and len(watch.pids) == 1
        # Killed, not left running: SIGKILL was sent before the error was raised, and the
        # kernel tears a process of 256 MiB down in well under the 10 s allowed here.
        assert await _all_dead(watch.pids, within_s=10)
        # The next page loads (a new renderer, watched in turn).
        page = await _load(browser, upstream, "/text")
        assert b"light page" in page.body
        assert browser.last_watch is not watch
    finally:
        await browser.close()
    # The control: with room for it, the same page gets to 512 MiB and returns.
    roomy = Browser(BrowserSettings(page_memory_bytes=1024 * MiB), fetcher)
    try:
        page = await _load(roomy, upstream, "/hungry", wait_for="#done")
        assert b'<p id="done">512 MiB</p>' in page.body
    finally:
        await roomy.close()


@pytest.mark.slow
async def test_a_spinning_page_is_stopped_at_its_cpu_budget(
    fetcher: Fetcher, upstream: Upstream
) -> None:
    """The page never reaches DOMContentLoaded: without the watch it would hold its core
    until the 25 s deadline and fail with ``browser_timeout`` instead."""
    require_browser()
    browser = Browser(BrowserSettings(page_cpu_s=1.0), fetcher)
    try:
        with pytest.raises(BrowserCpuExceeded) as info:
            await _load(browser, upstream, "/spin")
        err = info.value
        assert (err.code, err.status) == ("browser_cpu_exceeded", 502)
        assert err.message.endswith(
            "s of CPU time, more than the 1 s a browser page may (browser.page_cpu_s); "
            "it was stopped."
        )
        page = await _load(browser, upstream, "/text")
        assert b"light page" in page.body
    finally:
        await browser.close()
