"""One worker process of the pool: its life on the child's side, and its handle in the parent.

A worker caps its own address space (``RLIMIT_AS``) before it imports the renderer, proves
it can render a tiny page, then answers jobs (``(fn, args)`` pickled over its pipe) until
the pipe closes. A job that raises ``SiftError`` answers with it; one out of memory answers
so and the worker exits (its heap may be fragmented); any other exception is a bug in sift,
answered as such, and the worker stays.

Workers are started with ``spawn``: forking a process that already runs threads is unsafe.
"""

from __future__ import annotations

import errno
import os
import signal
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from sift.errors import SiftError


def limit_memory(max_bytes: int | None) -> None:
    """Cap this process's address space (soft limit; None lifts it again, so a worker out
    of memory can still report why before it exits)."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if max_bytes is None:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    elif max_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, hard))


def selftest() -> None:
    """Import the renderer and render one tiny page: what every real render needs. The
    extraction model is loaded and compiled here too (~0.3 s, once per worker), so a
    worker's first real page does not pay for it (a missing model only logs a warning)."""
    from sift.render import RenderOptions, render
    from sift.render.learned import load_model

    load_model()

    render(
        b"<html><body><p>ok</p></body></html>",
        content_type="text/html",
        url="http://localhost/",
        options=RenderOptions(selector="p"),
    )


def _ignore_interrupts() -> None:
    """Ctrl-C is for the parent, which stops the pool (a terminal sends SIGINT to the whole
    process group, workers included): ignore it here, then let signals in again. The worker
    started with SIGINT blocked (``WorkerProcess``), so one sent while it was starting up is
    dropped now instead of killing it with a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def worker_main(conn: Connection, memory_bytes: int) -> None:
    """A worker's life: limit memory, prove it can render, then answer jobs until EOF."""
    _ignore_interrupts()
    try:
        limit_memory(memory_bytes)
        selftest()
    except BaseException as exc:  # noqa: BLE001 - any failure here means "cannot render"
        limit_memory(None)
        # Under the address-space limit an import may fail in a syscall (ENOMEM) rather than
        # in the allocator: the cause is the same, and it is named the same.
        out_of_memory = isinstance(exc, OSError) and exc.errno == errno.ENOMEM
        name = "MemoryError" if out_of_memory else type(exc).__name__
        conn.send(("broken", f"{name}: {exc}"[:300]))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return  # the pool closed the pipe: exit quietly
        if job is None:
            return
        fn, args = job
        try:
            conn.send(("ok", fn(*args)))
        except MemoryError:
            limit_memory(None)
            conn.send(("nomem", None))
            return  # a fresh worker replaces this one
        except SiftError as exc:
            conn.send(("err", exc))
        except Exception as exc:  # noqa: BLE001 - a bug in sift; keep the worker
            conn.send(("bug", f"{type(exc).__name__}: {exc}"[:300]))


class WorkerProcess:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, ctx: Any, memory_bytes: int, number: int) -> None:
        parent, child = ctx.Pipe(duplex=True)
        self.proc: BaseProcess = ctx.Process(
            target=worker_main,
            args=(child, memory_bytes),
            name=f"sift-render-{number}",
            daemon=True,
        )
        # The child inherits this thread's signal mask: SIGINT stays blocked in it until
        # ``worker_main`` ignores it (a Ctrl-C during its start-up must not kill it either).
        # The resource tracker is started first: starting it unblocks SIGINT in this thread.
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.proc.start()
        finally:
            if signal.SIGINT not in blocked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        child.close()
        self.conn: Connection = parent
        self.ready = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL, reap and close the pipe; idempotent. Only the thread using the worker
        (or ``close`` once no thread runs) calls it: the pipe is closed here."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()
