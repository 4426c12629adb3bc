"""One worker process of the pool: its life on the child's side, and its handle in the parent.

A worker lowers its scheduling priority (``WORKER_NICE``), caps its own address space
(``RLIMIT_AS``), proves it can render a tiny page, then answers jobs (``(fn, args)`` pickled
over its pipe) until the pipe closes. A job that raises ``SiftError`` answers with it; one
out of memory answers so and the worker exits (its heap may be fragmented); any other
exception is a bug in sift, answered as such, and the worker stays.

**How workers start: forked from a fork server.** A worker killed at a render's time limit
is replaced at once, and under a flood of such renders that is often (issue 24). Spawning a
fresh interpreter that imports the renderer took ~1.2 s of CPU (3 s and more on a loaded
machine), paid while the next caller waited for a worker. So workers are forked from
``multiprocessing``'s fork server, which imports the renderer, loads the extraction model and
renders a tiny page once (``PRELOAD``: ``workers.warm``), then only forks: a worker is ready
in milliseconds. Why it is safe:

- the fork server is a fresh interpreter started with ``spawn`` semantics (fork + exec), not
  a fork of the server: it runs one thread (nothing it imports starts one), so forking it
  never copies a lock held by another thread;
- it never runs a job: every worker starts from the same state (the renderer warmed on a
  constant page), never from what another worker or another caller's job left behind, and
  a worker is never reused across a kill;
- it is started with SIGINT blocked (like a spawned worker was), so a Ctrl-C meant for the
  server never kills it or a worker starting from it.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
from multiprocessing import forkserver, resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Literal

from sift.errors import SiftError

# How much lower than the server's process a worker runs (``os.nice``) by default (the
# setting ``render_worker_nice`` has the same default; a test pins them together): under contention
# for the CPU the event loop, which answers every caller, comes before the renders and the
# crawl work of any one of them; browser pages (``browser.page_nice``, 10) come after.
WORKER_NICE = 5
# What the fork server imports before it forks a worker (see the module docstring): the
# renderer warmed, the crawl's CPU jobs, and ``sift.cli``: ``multiprocessing`` runs the
# server's main script again in every worker (as ``__mp_main__``), and for the ``sift``
# console script that imports ``sift.cli`` (~60 ms a worker; once here instead). Named, not
# imported: this room stands below them.
PRELOAD = ("sift.workers.warm", "sift.crawl.cpujobs", "sift.cli")


# How workers start: forked from the fork server (the default), or each a fresh interpreter
# that imports the renderer itself (``spawn``: slower, kept for comparison and for tests that
# need a worker's start-up to last).
StartMethod = Literal["forkserver", "spawn"]


def worker_context(method: StartMethod = "forkserver") -> Any:
    """The ``multiprocessing`` context workers are started from."""
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def limit_memory(max_bytes: int | None) -> None:
    """Cap this process's address space (soft limit; None lifts it again, so a worker out
    of memory can still report why before it exits)."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if max_bytes is None:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    elif max_bytes > 0:
        # A worker forked warm has the renderer mapped already: a limit below that leaves
        # it no room to render anything (a spawned worker failed to import, the same cause).
        mapped = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGESIZE")
        if mapped >= max_bytes:
            raise MemoryError(
                f"a render worker has {mapped >> 20} MiB mapped with the renderer loaded, "
                f"more than its limit ({max_bytes >> 20} MiB, render_memory_bytes)"
            )
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


def worker_main(conn: Connection, memory_bytes: int, nice: int) -> None:
    """A worker's life: lower its priority by ``nice``, limit memory, prove it can render,
    then answer jobs until EOF. A pool that has gone (its end of the pipe closed: the
    server exited, or closed the pool while this worker started) ends it quietly."""
    _ignore_interrupts()
    os.nice(nice)
    started = _start(memory_bytes)
    if not _tell(conn, started) or started[0] != "ready":
        return
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return  # the pool closed the pipe: exit quietly
        if job is None:
            return
        answer = _answer(*job)
        if not _tell(conn, answer) or answer[0] == "nomem":
            return  # gone, or out of memory: a fresh worker replaces this one


def _start(memory_bytes: int) -> tuple[str, Any]:
    """``("ready", pid)``, or ``("broken", why)`` when this worker cannot render."""
    try:
        limit_memory(memory_bytes)
        selftest()
    except BaseException as exc:  # noqa: BLE001 - any failure here means "cannot render"
        limit_memory(None)
        # Under the address-space limit an import may fail in a syscall (ENOMEM) rather than
        # in the allocator: the cause is the same, and it is named the same.
        out_of_memory = isinstance(exc, OSError) and exc.errno == errno.ENOMEM
        name = "MemoryError" if out_of_memory else type(exc).__name__
        return ("broken", f"{name}: {exc}"[:300])
    return ("ready", os.getpid())


def _answer(fn: Any, args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except MemoryError:
        limit_memory(None)
        return ("nomem", None)
    except SiftError as exc:
        return ("err", exc)
    except Exception as exc:  # noqa: BLE001 - a bug in sift; keep the worker
        return ("bug", f"{type(exc).__name__}: {exc}"[:300])


def _tell(conn: Connection, message: tuple[str, Any]) -> bool:
    """Send ``message`` to the pool; False when this worker is to exit (the pool has gone,
    or the answer needed more memory than the limit to pickle)."""
    try:
        conn.send(message)
    except (EOFError, OSError):
        return False
    except MemoryError:
        limit_memory(None)
        _tell(conn, ("nomem", None))
        return False
    except Exception as exc:  # noqa: BLE001 - the answer does not pickle: a bug in sift
        return _tell(conn, ("bug", f"{type(exc).__name__}: {exc}"[:300]))
    return True


class WorkerProcess:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, ctx: Any, memory_bytes: int, number: int, nice: int) -> None:
        parent, child = ctx.Pipe(duplex=True)
        self.proc: BaseProcess = ctx.Process(
            target=worker_main,
            args=(child, memory_bytes, nice),
            name=f"sift-render-{number}",
            daemon=True,
        )
        # The fork server, started here the first time, inherits this thread's signal mask
        # and its workers inherit the fork server's: SIGINT stays blocked in a worker until
        # ``worker_main`` ignores it (a Ctrl-C during its start-up must not kill it either).
        # The resource tracker is started first: starting it unblocks SIGINT in this thread.
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            if ctx.get_start_method() == "forkserver":
                forkserver.ensure_running()  # the first time: imports PRELOAD (~1 s, once)
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
