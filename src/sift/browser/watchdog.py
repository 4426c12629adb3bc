"""Each page's whole memory and CPU time, watched from outside Chromium.

``page_heap_bytes`` caps V8's heap, but a page's ArrayBuffers, WebAssembly memories, DOM and
decoded data live outside it: one page allocated 4 GiB of ArrayBuffers under a 256 MiB heap
limit. And a page that spins (or starts workers that spin) burns a core for its whole
deadline. So sift watches each page's renderer process from ``/proc`` — its resident memory
(RSS) and its CPU time, all threads — every ``interval_s`` (0.1 s), and kills it (SIGKILL)
the moment either passes the page's budget: ``browser.page_memory_bytes`` and
``browser.page_cpu_s``. The loader then answers ``browser_memory_exceeded`` or
``browser_cpu_exceeded``. Every thread of the renderer also runs at ``browser.page_nice``
(10 by default): under contention pages get the CPU sift's own event loop and render
workers leave, and share it evenly between them.

Which process is the page's: every page has its own browser context, and Chromium never
shares a renderer process between contexts; headless-shell keeps every frame of a page in
that one process (it has no site-per-process isolation), and a new context's first page
starts it. So the loader creates pages one at a time and takes the renderer processes that
appeared meanwhile under Chromium's browser process (found once per launch by a marker
switch on its command line) as that page's. Where ``/proc`` cannot show them (no
``/proc/<pid>/task/*/children``), pages run unwatched and sift logs it once.

Why not a cgroup: it would need a writable cgroup tree delegated to sift, which containers
rarely give; this watch works wherever ``/proc`` does, and its reaction time (one interval)
is well within a second. What it cannot see: memory Chromium keeps in its *browser* process
on a page's behalf — Blob data, capped by Chromium itself and freed with the page's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

log = logging.getLogger("sift.browser")

WATCH_INTERVAL_S = 0.1
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
Reason = Literal["memory", "cpu"]


@dataclass(frozen=True)
class PageBudget:
    """What one page's renderer may use (``[browser]``)."""

    memory_bytes: int
    cpu_s: float
    nice: int


@dataclass(frozen=True)
class Stop:
    """Why a page was stopped, and what it used then."""

    reason: Reason
    rss_bytes: int
    cpu_s: float


def find_browser_pid(marker: str, proc: Path = Path("/proc")) -> int | None:
    """The process whose command line carries ``marker`` (Chromium's browser process)."""
    needle = marker.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                return int(entry.name)
        except OSError:
            continue
    return None


def _children(pid: int, proc: Path) -> list[int]:
    found: list[int] = []
    try:
        for task in (proc / str(pid) / "task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return found


def renderer_pids(root: int, proc: Path = Path("/proc")) -> set[int]:
    """Chromium renderer processes under ``root`` (its browser process), any depth."""
    renderers: set[int] = set()
    stack = _children(root, proc)
    while stack:
        pid = stack.pop()
        try:
            cmdline = (proc / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if b"--type=renderer" in cmdline:
            renderers.add(pid)
        stack += _children(pid, proc)
    return renderers


def usage(pid: int, proc: Path = Path("/proc")) -> tuple[int, float] | None:
    """(resident bytes, CPU seconds of all its threads) of ``pid``; None once it is gone."""
    try:
        rss_pages = int((proc / str(pid) / "statm").read_text().split()[1])
        stat = (proc / str(pid) / "stat").read_text()
    except (OSError, IndexError, ValueError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of stat)
    return rss_pages * _PAGE_SIZE, ticks / _CLOCK_TICKS


def renice(pids: Iterable[int], nice: int, done: set[int], proc: Path = Path("/proc")) -> None:
    """Set every thread of ``pids`` not in ``done`` to ``nice`` (Linux nice is per thread)."""
    for pid in pids:
        try:
            tids = [int(t.name) for t in (proc / str(pid) / "task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            if tid in done:
                continue
            done.add(tid)
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, nice)


@dataclass
class PageWatch:
    """Watches one page's renderer processes; ``run`` returns the ``Stop`` once it killed
    them. ``kill`` and ``read`` are parameters so the policy can be tested on its own."""

    pids: frozenset[int]
    budget: PageBudget
    interval_s: float = WATCH_INTERVAL_S
    read: Callable[[int], tuple[int, float] | None] = usage
    kill: Callable[[int], None] = field(default=lambda pid: os.kill(pid, signal.SIGKILL))
    _reniced: set[int] = field(default_factory=set)

    def check(self) -> Stop | None:
        """One look: the stop to make now, if the page is over a budget (then killed)."""
        rss, cpu = 0, 0.0
        for pid in self.pids:
            used = self.read(pid)
            if used is not None:
                rss, cpu = rss + used[0], cpu + used[1]
        stop: Stop | None = None
        if rss > self.budget.memory_bytes:
            stop = Stop("memory", rss, cpu)
        elif cpu > self.budget.cpu_s:
            stop = Stop("cpu", rss, cpu)
        if stop is not None:
            for pid in self.pids:
                with contextlib.suppress(ProcessLookupError):
                    self.kill(pid)
        return stop

    async def run(self) -> Stop:
        """Check every ``interval_s`` (renicing new threads) until a budget is passed."""
        while True:
            renice(self.pids, self.budget.nice, self._reniced)
            stop = self.check()
            if stop is not None:
                return stop
            await asyncio.sleep(self.interval_s)
