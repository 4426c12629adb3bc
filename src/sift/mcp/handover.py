"""Finishing a ``sift mcp`` session's jobs after its client has gone.

A one-shot client starts ``sift mcp``, submits a batch, and exits; on its next run it asks
for the job. The MCP SDKs' stdio clients end a session by closing the server's input,
waiting 2 s, then SIGTERM to the server's whole process group and SIGKILL 2 s later: a
drain inside ``sift mcp`` itself would be killed with it. So on end of input with jobs of
the session still live (on the embedded store), ``sift mcp``:

1. starts a *finisher*, ``sift mcp --finish-jobs LOCK_FD:WAIT_FD`` with its own settings
   flags, in a session of its own (the client's kill does not reach it), writing to
   ``DATA_DIR/mcp-finish.log``. It inherits the data directory's lock
   (``DataDirLock.adopt``: no other process can take the directory in between) and a pipe
   that brings the job ids, then end of file once ``sift mcp`` has exited;
2. says so in one line on standard error, stops its runner at once (the targets it was
   fetching are fetched again by the finisher) and exits.

The finisher waits for that end of file, puts the jobs back in the queue (``requeue``) and
runs them until none is live, for at most ``batch.mcp_finish_s``. A job still unfinished
then ends ``interrupted`` with that reason — never "sift restarted". Then it exits and the
lock goes with it.

A later ``sift mcp`` on the same directory while a finisher runs takes the jobs over
(``own_or_take_over``): it asks the finisher to stop (SIGTERM); the finisher stops its
runner at once and writes ``mcp-handover.json`` (its pid and the live job ids) before it
lets the lock go; the new ``sift mcp`` waits up to ``batch.shutdown_grace_s`` for the lock
and resumes those jobs instead of failing them at start. The client's next session so finds
its job finished, or running and then finished. Any other owner (``sift serve``, another
live ``sift mcp``) is refused as before.

A shared PostgreSQL store needs none of it: unfinished jobs stay there for any node to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from asyncio import FIRST_COMPLETED
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from sift import datadir
from sift.config import Settings
from sift.datadir import DataDirLock, Owner
from sift.errors import ConfigError
from sift.store import BatchStore

FINISHER_COMMAND: Final = "mcp (finishing jobs)"
HANDOVER_FILE: Final = "mcp-handover.json"
FINISH_LOG: Final = "mcp-finish.log"
LIVE: Final = frozenset({"queued", "running"})
# How often a new ``sift mcp`` looks whether the finisher it asked to stop has let go.
TAKEOVER_POLL_S: Final = 0.05
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def say(line: str) -> None:
    """One line on standard error; a client that closed it is no reason to fail."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


# -- the store side -------------------------------------------------------------------------


async def live_jobs(store: BatchStore, ids: Iterable[str]) -> list[str]:
    """The jobs of ``ids`` still queued or running, in the order given."""
    live = []
    for job_id in ids:
        job = await store.batch_job(job_id)
        if job is not None and job.status in LIVE:
            live.append(job_id)
    return live


async def requeue(store: BatchStore, ids: Iterable[str], now: int) -> list[str]:
    """Put handed-over jobs back in the queue: a ``running`` one (its runner stopped) becomes
    ``queued``, so this process's runner admits it; its finished targets stay finished.
    Returns the jobs of ``ids`` still live."""
    live = []
    for job_id in ids:
        job = await store.batch_job(job_id)
        if job is None or job.status not in LIVE:
            continue
        if job.status == "running":
            await store.set_batch_job_status(job_id, "queued", "", now)
        live.append(job_id)
    return live


async def expire(store: BatchStore, ids: Iterable[str], settings: Settings, now: int) -> None:
    """End jobs the finisher could not finish within ``batch.mcp_finish_s``: unfinished
    targets fail as ``interrupted`` with that reason, the job gets its final status."""
    reason = (
        "interrupted: the sift mcp session that submitted this job ended, and the job did "
        f"not finish within batch.mcp_finish_s ({settings.batch.mcp_finish_s:g} s) after"
    )
    hint = (
        "Resubmit the job; for jobs that outlast an MCP session, raise batch.mcp_finish_s or "
        "let the agent use a running sift serve's /mcp."
    )
    for job_id in ids:
        job = await store.batch_job(job_id)
        if job is None or job.status not in LIVE:
            continue
        await store.finish_pending_targets(job_id, "failed", reason, hint, now)
        status = await store.finish_job(job_id, now, settings.batch.max_bytes, job.caller)
        await store.set_batch_job_status(job_id, status or "failed", reason, now)


# -- sift mcp's side: the successor ------------------------------------------------------------


@dataclass
class Successor:
    """How this ``sift mcp`` starts its finisher: ``argv`` are its own settings flags
    (``mcp --data-dir … [--config …] [--set …]``), ``lock`` the data directory's lock."""

    argv: list[str]
    lock: DataDirLock
    _kept: list[int] = field(default_factory=list)  # pipe ends open until this process exits

    def spawn(self, job_ids: Sequence[str]) -> tuple[int, Path]:
        """Start the finisher for ``job_ids``; its pid and its log file."""
        log = self.lock.data_dir / FINISH_LOG
        wait_r, wait_w = os.pipe()  # not inherited: only the finisher gets wait_r
        lock_fd = self.lock.fileno()
        command = [sys.executable, "-m", "sift.cli", *self.argv]
        try:
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    [*command, "--finish-jobs", f"{lock_fd}:{wait_r}"],
                    pass_fds=(lock_fd, wait_r),
                    start_new_session=True,  # out of the client's process group and its kill
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                )
        finally:
            os.close(wait_r)
        # Small (a few dozen ids): it fits the pipe's buffer, the write does not wait.
        os.write(wait_w, json.dumps(list(job_ids)).encode())
        self._kept.append(wait_w)  # closed by the kernel when this process exits
        return proc.pid, log


# -- a new sift mcp's side: taking over ------------------------------------------------------


def own_or_take_over(settings: Settings, advice: str) -> tuple[DataDirLock, list[str] | None]:
    """Lock the data directory for a new ``sift mcp``: the lock and, when a finisher held
    it and handed its jobs over, their ids (to resume, not to fail; None otherwise). A
    finisher is asked to stop and waited for up to ``batch.shutdown_grace_s``; any other
    owner is refused with one line ending in ``advice``."""
    data_dir = datadir.prepare(settings.data_dir)
    got = DataDirLock.try_acquire(data_dir, "mcp")
    finisher: Owner | None = None
    if isinstance(got, Owner):
        if got.command != FINISHER_COMMAND:
            raise datadir.busy(settings.data_dir, got, advice)
        finisher = got
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(got.pid, signal.SIGTERM)
        deadline = time.monotonic() + settings.batch.shutdown_grace_s
        while isinstance(got, Owner) and time.monotonic() < deadline:
            time.sleep(TAKEOVER_POLL_S)
            got = DataDirLock.try_acquire(data_dir, "mcp")
        if isinstance(got, Owner):
            raise datadir.busy(settings.data_dir, got, advice)
    return got, take_handover(data_dir, finisher)


def take_handover(data_dir: Path, finisher: Owner | None) -> list[str] | None:
    """The job ids ``finisher`` wrote when it stopped (the file is removed whatever it
    holds). None without a finisher or from another process: stale, never trusted."""
    path = data_dir / HANDOVER_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    if finisher is None or not isinstance(data, dict) or data.get("pid") != finisher.pid:
        return None
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not all(isinstance(j, str) for j in jobs):
        return None
    return list(jobs)


def write_handover(data_dir: Path, job_ids: Sequence[str]) -> None:
    """Record the jobs this finisher leaves to the next ``sift mcp`` (written whole)."""
    tmp = data_dir / (HANDOVER_FILE + ".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "jobs": list(job_ids)}))
    tmp.replace(data_dir / HANDOVER_FILE)


# -- the finisher -----------------------------------------------------------------------------


class StopRequest:
    """Set by SIGTERM, SIGINT or SIGHUP (a new ``sift mcp`` taking over, or a person); the
    asyncio part awaits it. The handler stays installed throughout (an asyncio signal
    handler would be reset to the default when its loop closes)."""

    def __init__(self) -> None:
        self.requested = False
        self._wake: Callable[[], object] | None = None

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True
        if self._wake is not None:
            self._wake()

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        self._wake = lambda: loop.call_soon_threadsafe(event.set)
        try:
            if not self.requested:
                await event.wait()
        finally:
            self._wake = None


def run_finisher(settings: Settings, spec: str) -> int:
    """``sift mcp --finish-jobs LOCK_FD:WAIT_FD``: see the module docstring."""
    lock_fd, wait_fd = _descriptors(spec, Path(settings.data_dir))
    # First: record this process as the owner, so a new sift mcp knows whom to ask.
    lock = DataDirLock.adopt(lock_fd, settings.data_dir, FINISHER_COMMAND)
    stop = StopRequest()
    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    me = f"sift mcp (pid {os.getpid()}, finishing jobs)"
    try:
        job_ids = _read_until_parent_exits(wait_fd)
        say(f"{me}: {len(job_ids)} job(s) handed over: {', '.join(job_ids)}")
        left = job_ids if stop.requested else asyncio.run(finish(settings, job_ids, stop))
        if stop.requested and left:
            write_handover(lock.data_dir, left)
            say(f"{me}: stopped; {len(left)} job(s) left to the next sift mcp")
        else:
            say(f"{me}: done")
    finally:
        lock.release()
    return 0


def _descriptors(spec: str, data_dir: Path) -> tuple[int, int]:
    """``LOCK_FD:WAIT_FD``, checked: the first must be the data directory's lock file (this
    flag is internal; a wrong descriptor would have its file overwritten)."""
    try:
        lock_fd, wait_fd = (int(part) for part in spec.split(":"))
        held, lock_file = os.fstat(lock_fd), os.stat(data_dir / datadir.LOCK_FILE)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"--finish-jobs {spec}: {exc}") from exc
    if (held.st_dev, held.st_ino) != (lock_file.st_dev, lock_file.st_ino):
        raise ConfigError(f"--finish-jobs {spec}: not {data_dir / datadir.LOCK_FILE}")
    return lock_fd, wait_fd


def _read_until_parent_exits(fd: int) -> list[str]:
    """The job ids ``sift mcp`` wrote; returns at end of file, once it has exited (a signal
    meanwhile only sets the stop request: the read goes on, PEP 475)."""
    chunks = []
    with os.fdopen(fd, "rb") as pipe:
        while chunk := pipe.read(65536):
            chunks.append(chunk)
    ids = json.loads(b"".join(chunks) or b"[]")
    return [str(i) for i in ids] if isinstance(ids, list) else []


async def finish(settings: Settings, job_ids: Sequence[str], stop: StopRequest) -> list[str]:
    """Run the handed-over jobs until none is live, for at most ``batch.mcp_finish_s``
    (then they end ``interrupted``, ``expire``), or until ``stop``: then the runner stops
    at once and the live jobs are returned, for the next ``sift mcp``."""
    from sift.assembly import assemble
    from sift.assembly.runner import make_runner
    from sift.principal import OPERATOR

    async with assemble(settings, store=True) as parts:
        store = parts.store
        assert store is not None
        live = await requeue(store, job_ids, int(time.time()))
        if not live:
            return []
        # A job stored under the operator's reserved name can only be the operator's.
        runner = make_runner(settings, store, parts.service, principals={OPERATOR.name: OPERATOR})
        drive = asyncio.create_task(runner.run_until_idle(), name="finish-jobs")
        halt = asyncio.create_task(stop.wait(), name="finish-stop")
        done, _ = await asyncio.wait(
            {drive, halt}, timeout=settings.batch.mcp_finish_s, return_when=FIRST_COMPLETED
        )
        halt.cancel()
        if drive in done:
            drive.result()
            return []
        await runner.stop(0.0 if stop.requested else settings.batch.shutdown_grace_s)
        drive.cancel()
        await asyncio.gather(drive, halt, return_exceptions=True)
        left = await live_jobs(store, live)
        if stop.requested:
            return left
        await expire(store, left, settings, int(time.time()))
        say(f"sift mcp: {len(left)} job(s) did not finish within batch.mcp_finish_s: interrupted")
        return []
