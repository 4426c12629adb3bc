"""The render pool: worker processes that render with a hard time and memory limit.

Rendering runs caller-chosen work (CSS selectors) over upstream-chosen bytes inside C code
(libxml2, pypdf's parsers), where no Python-level timeout can interrupt it. So every render
runs in a worker *process* the pool owns, and the limits are enforced from outside. The
crawl's CPU work (parsing sitemaps and pages' links, admitting and robots-checking their
URLs: ``crawl.cpujobs``) runs in the same workers, in the same turns: one caller's maps
queue behind that caller's own work, and the event loop's process never holds the GIL for
them (issue 24).

- **Time.** The pool waits at most ``timeout_s`` for the answer, then kills the worker
  (SIGKILL: works inside C code) and starts a new one; the caller gets ``RenderTimeout``.
- **Memory.** Each worker caps its own address space (``RLIMIT_AS``) before it imports the
  renderer. A render that needs more gets ``MemoryError`` in the worker, which answers
  ``RenderFailed`` and exits (its heap may be fragmented); the pool starts a new one.
- **Death.** A worker that dies mid-render (OOM killer, a crash in C code) is replaced and
  the render retried once on the new worker; a second death is ``RenderFailed``.
- **Turns.** Renders wait for a worker in a ``FairQueue``: one queue per caller, the queued
  caller served least recently first, so one caller's backlog of slow renders never stands
  in front of another caller's render. A render still queued at its request's deadline is dropped
  (``RenderQueueTimeout``); one whose caller is cancelled (the client hung up) leaves the
  queue, or, already running, has its worker killed and replaced (a job that ends by its
  own deadline may instead be left to finish: ``on_cancel="finish"``).
- **A kept turn.** ``reserved`` turns beyond the ``workers`` go only to a caller with
  nothing running (``FairQueue``), on workers of their own: a caller whose renders fill
  every worker cannot make another caller's single render wait for one of them to end.
- **Restarts.** A killed worker's replacement is forked warm from a fork server
  (``workers.process``): ready in tens of milliseconds, not the seconds a fresh interpreter
  importing the renderer took. The killed render's turn is given back only once the
  replacement is ready, so the caller whose render was killed pays for the restart and an
  idle worker is always a ready one; ``spare`` workers more than turns are kept started.
- **Priority.** Workers run ``nice`` (``render_worker_nice``; ``WORKER_NICE``, 5, for a pool
  built directly) below the server's process: when the CPU is short, the event loop (every
  caller's requests) comes first.
- **Health.** A worker proves at start-up that it can render (it imports the renderer under
  its memory limit and renders a tiny page). While workers cannot start, ``broken`` names
  why and renders fail fast with ``RenderUnavailable`` (503); ``/healthz`` reports it.

Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot kill one task's worker (no
per-task timeout), and one dead worker breaks the whole pool (``BrokenProcessPool``) for
every queued task. This pool is one pipe per worker and one thread per worker slot that does
the blocking pipe I/O (pickling a body and unpickling a render stay off the event loop).
A worker process itself is ``workers.process``.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from sift.errors import RenderFailed, RenderTimeout, RenderUnavailable, SiftError
from sift.workers.process import (
    WORKER_NICE,
    StartMethod,
    WorkerProcess,
    selftest,
    worker_context,
)

T = TypeVar("T")
# What a cancelled ``run`` does to its job once a worker runs it: ``kill`` the worker (a
# render nobody waits for stops now), or let it ``finish`` (a job that ends by its own
# deadline: killing it would only cost a worker's restart).
OnCancel = Literal["kill", "finish"]
log = logging.getLogger("sift.render")

# How long a new worker may take to import the renderer and answer "ready".
START_TIMEOUT_S = 60.0
# How long a killed worker's replacement is waited for before its turn is given back anyway.
READY_WAIT_S = 10.0
# After a worker failed to start, renders fail fast for this long before the next attempt,
# so a pool that cannot start workers does not spawn one per request.
BROKEN_RETRY_S = 2.0
# The health check's probe takes its turns in the render queue under this name.
HEALTH_CALLER = "(health)"


class _Died(Exception):
    pass


class _Lost(_Died):
    """The worker was dead before it got the job (killed while idle): the job is not why."""


class _Cancelled(Exception):
    """The caller stopped waiting: the job's worker was killed; nobody reads the answer."""


class _Job:
    """One admitted render, shared by the awaiting task and the pool thread running it.

    ``cancel`` (from the event loop) kills the worker the job holds, if any; the thread
    checks ``cancelled`` before it takes a worker. The lock makes "holds a worker" and
    "cancelled" change together, so a cancel never kills a worker already handed back.
    ``abandon`` only keeps a job that has no worker yet from starting.
    """

    __slots__ = ("cancelled", "lock", "worker")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancelled = False
        self.worker: WorkerProcess | None = None

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            if self.worker is not None:
                self.worker.proc.kill()  # the thread sees EOF and replaces it

    def abandon(self) -> None:
        with self.lock:
            if self.worker is None:
                self.cancelled = True

    def hold(self, worker: WorkerProcess | None) -> bool:
        """Record the worker the thread uses now (None: given back); False if cancelled."""
        with self.lock:
            self.worker = worker
            return not self.cancelled


class _Broken(Exception):
    pass


class RenderPool:
    """``workers`` render processes, each limited to ``memory_bytes`` of address space
    (0: no limit), running ``nice`` below this process and started by ``start_method``
    (``workers.process``: forked warm from a fork server by default); ``reserved`` turns
    more for callers with nothing running (``FairQueue``), and ``spare`` more workers kept
    started, so a render that follows a kill finds a ready worker. ``await run(fn, *args,
    timeout_s=…)`` calls ``fn(*args)`` in a worker (``fn`` must be a picklable module-level
    function) and returns its result, or raises:
    the ``SiftError`` it raised, ``RenderTimeout``, ``RenderFailed`` or ``RenderUnavailable``.

    Start with ``start()`` (or lazily on the first ``run``); ``close()`` stops every worker.
    """

    def __init__(
        self,
        workers: int,
        *,
        memory_bytes: int = 0,
        nice: int = WORKER_NICE,
        start_method: StartMethod = "forkserver",
        spare: int = 0,
        reserved: int = 0,
    ) -> None:
        if workers < 1:
            raise ValueError("a render pool needs at least one worker")
        self.workers = workers
        self.memory_bytes = memory_bytes
        self.nice = nice
        self.spare = spare
        self.reserved = reserved
        self.turns = workers + reserved  # renders that may run at once
        self._ctx = worker_context(start_method)
        # Idle workers; None is the shutdown sentinel for threads waiting for one.
        self._idle: queue.SimpleQueue[WorkerProcess | None] = queue.SimpleQueue()
        self._all: set[WorkerProcess] = set()
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None
        self._started = 0
        self._closed = False
        self._busy = 0  # renders handed to the threads and not yet answered
        self._probe: asyncio.Future[str | None] | None = None  # the health check's render
        # Imported here: worker processes import this module too, before their memory limit,
        # and never queue anything.
        from sift.workers.fairqueue import FairQueue

        self._queue = FairQueue(workers, reserved)  # renders waiting for a worker, per caller
        self.broken: str | None = None  # why workers cannot start, while they cannot
        self._broken_at = 0.0
        self.replaced = 0  # workers killed or lost and started again (for tests and logs)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker processes, from a thread: the process's first start boots the
        fork server (``workers.process``: ~1 s), which must not hold up the event loop."""
        with self._lock:
            if self._threads is not None or self._closed:
                return
            self._threads = ThreadPoolExecutor(self.turns, thread_name_prefix="sift-render")
        self._spawn_in_background(self.turns + self.spare)

    def close(self) -> None:
        """Stop every worker; renders still running are killed. Idempotent."""
        self._queue.close()  # queued renders fail fast ("shut down")
        with self._lock:
            self._closed = True
            workers, self._all = list(self._all), set()
            threads, self._threads = self._threads, None
        for _ in range(self.turns):
            self._idle.put(None)  # wakes every thread waiting for a worker
        # 1. Kill the processes only: a thread still waiting on a worker's pipe sees EOF and
        #    closes that pipe itself (closing it from here would race with its poll).
        for w in workers:
            if w.proc.is_alive():
                w.proc.kill()
        # 2. Wait for the threads; queued renders meet the sentinel and fail fast.
        if threads is not None:
            threads.shutdown(wait=True)
        # 3. No thread runs now: reap every worker and close the pipes left open.
        for w in workers:
            w.kill()

    def pids(self) -> list[int]:
        """The live workers' process ids."""
        with self._lock:
            return [w.pid for w in self._all if w.pid is not None and w.proc.is_alive()]

    def _spawn(self, *, wait_ready: bool = False) -> None:
        """Start one worker and make it idle (not once the pool is closed); with
        ``wait_ready``, only once it has said it is ready (at most ``READY_WAIT_S``). Raises
        what starting a process raises (``OSError``: no fork server, no process left)."""
        with self._lock:
            if self._closed:
                return
            self._started += 1
            number = self._started
        worker = WorkerProcess(self._ctx, self.memory_bytes, number, self.nice)
        if not self._keep(worker, idle=not wait_ready):
            worker.kill()  # the pool closed while it started
            return
        if wait_ready:  # it is in ``_all`` now: ``close`` kills it and the wait ends
            worker.conn.poll(READY_WAIT_S)  # "ready", or the end of a worker that died
            with self._lock:
                if not self._closed:
                    self._idle.put(worker)

    def _keep(self, worker: WorkerProcess, *, idle: bool) -> bool:
        """Count ``worker`` among the pool's (and make it idle); False once closed."""
        with self._lock:
            if self._closed:
                return False
            self._all.add(worker)
            if idle:
                self._idle.put(worker)
            return True

    def _spawn_in_background(self, count: int) -> None:
        """Start ``count`` workers from a thread, retrying every ``BROKEN_RETRY_S`` while
        processes cannot be started (``broken`` says why meanwhile)."""

        def spawn_all() -> None:
            for _ in range(count):
                while not self._closed:
                    try:
                        self._spawn()
                        break
                    except Exception as exc:  # noqa: BLE001 - whatever it is, say it and retry
                        log.error("render workers cannot start: %s", exc)
                        self.broken = f"{type(exc).__name__}: {exc}"[:300]
                        self._broken_at = time.monotonic()
                        time.sleep(BROKEN_RETRY_S)

        threading.Thread(target=spawn_all, name="sift-render-start", daemon=True).start()

    def _replace(self, worker: WorkerProcess) -> None:
        """Kill ``worker`` and put a new one in its place (unless the pool is closing)."""
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            if self._closed:
                return
            self.replaced += 1
        try:
            # A fork from the fork server, then its start-up render: milliseconds, more under
            # load. The thread waits for it with the killed render's turn still held, so the
            # caller whose render was killed pays for the restart, and an idle worker is
            # always a ready one (the kept turn never waits for a start).
            self._spawn(wait_ready=True)
        except Exception:  # noqa: BLE001 - retried (and named) from a thread of its own
            self._spawn_in_background(1)

    # -- running --------------------------------------------------------------------------

    async def run(
        self,
        fn: Callable[..., T],
        *args: Any,
        timeout_s: float,
        caller: str = "",
        deadline: float | None = None,
        on_cancel: OnCancel = "kill",
    ) -> T:
        """``fn(*args)`` in a worker, killed after ``timeout_s`` of wall-clock time.

        It waits for ``caller``'s turn at a worker (``FairQueue``); still
        queued at ``deadline`` (an event-loop time; ``None``: no deadline) it is dropped
        with ``RenderQueueTimeout``. Cancelled while queued, it leaves the queue; cancelled
        while running, its worker is killed and replaced — or, with ``on_cancel="finish"``,
        the job runs to its end (it keeps its turn until then) and its answer is dropped.
        """
        if self._threads is None:
            self.start()
        threads = self._threads
        if threads is None:
            raise RenderUnavailable("the render pool is shut down")
        self._busy += 1
        try:
            await self._queue.acquire(caller, deadline)
        except BaseException:
            self._busy -= 1
            raise
        job = _Job()
        future = asyncio.get_running_loop().run_in_executor(
            threads, self._call, job, fn, args, timeout_s
        )
        finishing = False
        try:
            result: T = await (future if on_cancel == "kill" else asyncio.shield(future))
            return result
        except asyncio.CancelledError:
            if on_cancel == "kill":
                job.cancel()  # a render nobody waits for stops now, not at its time limit
            elif not future.done():
                job.abandon()  # not started yet: never starts; running: runs to its end
                future.add_done_callback(lambda f: self._ended_unwatched(f, caller))
                finishing = True
            raise
        finally:
            if not finishing:
                self._ended(caller)

    def _ended(self, caller: str) -> None:
        self._queue.release(caller)
        self._busy -= 1

    def _ended_unwatched(self, future: asyncio.Future[Any], caller: str) -> None:
        """A job left to finish after its caller stopped waiting has ended."""
        if not future.cancelled():
            future.exception()  # nobody reads its answer (or its error): retrieved here
        self._ended(caller)

    def queued(self, caller: str | None = None) -> int:
        """Renders waiting for a worker (every caller's, or one caller's)."""
        return self._queue.queued(caller)

    @property
    def admitted(self) -> int:
        """Renders that have their turn: running, or about to take a worker."""
        return self._queue.in_use

    async def check(self, wait_s: float = 2.0) -> str | None:
        """Why rendering cannot work now, or None. Proves it with a tiny render when a
        worker is free (a busy pool is not a broken one), waiting at most ``wait_s`` for
        it: a worker still starting answers later, and until then the last known state
        stands."""
        if self.broken is not None and time.monotonic() - self._broken_at < BROKEN_RETRY_S:
            return self.broken
        if self._busy >= self.turns:
            return self.broken  # every worker is rendering: busy, and not known broken
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._probe_once())
        try:
            return await asyncio.wait_for(asyncio.shield(self._probe), wait_s)
        except TimeoutError:
            return self.broken

    async def _probe_once(self) -> str | None:
        try:
            await self.run(selftest, timeout_s=START_TIMEOUT_S, caller=HEALTH_CALLER)
        except RenderUnavailable as exc:
            return self.broken or exc.message
        except SiftError:
            return None  # a slow or failed render: that worker was replaced, not broken
        return None

    def _call(
        self, job: _Job, fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float
    ) -> Any:
        """Blocking: run one job on an idle worker (in a pool thread)."""
        deaths = 0
        while True:
            if self.broken is not None and time.monotonic() - self._broken_at < BROKEN_RETRY_S:
                raise RenderUnavailable(f"render workers cannot start: {self.broken}")
            try:
                worker = self._idle.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                raise RenderUnavailable(
                    f"no render worker came free or started within {START_TIMEOUT_S:.0f} s"
                ) from None
            worker = self._prefer_ready(worker)
            if worker is None:
                self._idle.put(None)  # for the next waiting thread
                raise RenderUnavailable("the render pool is shut down")
            if not job.hold(worker):
                self._idle.put(worker)
                raise _Cancelled
            try:
                result = self._call_on(worker, fn, args, timeout_s)
            except _Died as exc:
                if not job.hold(None):
                    self._replace(worker)  # killed because nobody waits: not a death
                    raise _Cancelled from None
                log.warning("a render worker died (%s); replaced", exc)
                self._replace(worker)
                deaths += not isinstance(exc, _Lost)
                if deaths > 1:
                    raise RenderFailed(
                        f"the render worker died twice rendering this page ({exc})"
                    ) from None
                continue  # once more, on another worker (a death while idle does not count)
            except _Broken as exc:
                if not job.hold(None):
                    self._replace(worker)  # killed while starting, because nobody waits
                    raise _Cancelled from None
                if self.broken is None:
                    log.error("render workers cannot start: %s", exc)
                self.broken, self._broken_at = str(exc), time.monotonic()
                self._replace(worker)
                raise RenderUnavailable(f"render workers cannot start: {exc}") from None
            except RenderTimeout:
                job.hold(None)
                log.warning("a render hit its %g s limit; its worker was killed", timeout_s)
                self._replace(worker)
                raise
            except RenderFailed:
                job.hold(None)
                self._replace(worker)  # out of memory: the worker has exited
                raise
            except BaseException:
                self._give_back(job, worker)
                raise
            self._give_back(job, worker)
            return result

    def _prefer_ready(self, worker: WorkerProcess | None) -> WorkerProcess | None:
        """``worker``, or, while it is still starting (the pool's first workers), an idle
        worker that is ready (it goes back in line)."""
        for _ in range(self._idle.qsize()):
            if worker is None or worker.ready or worker.conn.poll(0):
                return worker
            try:
                other = self._idle.get_nowait()
            except queue.Empty:
                return worker
            self._idle.put(worker)
            worker = other
        return worker

    def _give_back(self, job: _Job, worker: WorkerProcess) -> None:
        """Return a worker that answered; one a cancel may have just killed is replaced."""
        if job.hold(None):
            self._idle.put(worker)
        else:
            self._replace(worker)

    def _call_on(
        self, worker: WorkerProcess, fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float
    ) -> Any:
        conn = worker.conn
        if not worker.ready:
            if not conn.poll(START_TIMEOUT_S):
                raise _Broken(f"a worker did not start within {START_TIMEOUT_S:.0f} s")
            try:
                kind, detail = conn.recv()
            except (EOFError, OSError):
                worker.proc.join(1)
                raise _Broken(f"a worker exited at start (code {worker.proc.exitcode})") from None
            if kind != "ready":
                raise _Broken(str(detail))
            worker.ready = True
            self.broken = None
        try:
            conn.send((fn, args))
        except (EOFError, OSError) as exc:
            raise _Lost(f"lost before the job: {exc}") from None
        try:
            answered = conn.poll(timeout_s)
            if answered:
                kind, value = conn.recv()
        except (EOFError, OSError):
            worker.proc.join(1)
            raise _Died(f"exit code {worker.proc.exitcode}") from None
        if not answered:
            raise RenderTimeout(
                f"rendering this page took longer than {timeout_s:g} s and was stopped"
            )
        if kind == "ok":
            return value
        if kind == "err":
            raise value
        if kind == "nomem":
            raise RenderFailed(
                f"rendering this page needed more than the render workers' memory limit "
                f"({self.memory_bytes >> 20} MiB)"
            )
        raise SiftError(f"the renderer failed: {value}")
