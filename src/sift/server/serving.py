"""Serving the app with uvicorn, and stopping it the way an operator at a terminal expects.

uvicorn alone, on Ctrl-C or SIGTERM, waits in silence (for open requests without bound — an
MCP client's event stream never ends — then for the app's shutdown, where running batch
targets get ``batch.shutdown_grace_s``), skips the app's shutdown on a second Ctrl-C (the
database would not be closed) and raises the signal again at the end. ``SiftServer``:

1. At the first SIGINT or SIGTERM it says in one line what it waits for, for how long, and
   that a second Ctrl-C stops now. The batch runner stops starting targets at once; running
   requests and running batch targets share one grace, ``batch.shutdown_grace_s``.
2. When the grace is over — or at a second Ctrl-C — what still runs is cut off: a request
   answers ``503 service_busy`` (or its started stream ends; ``CutOff``), a batch target is
   left to the next start, exactly as after a restart.
3. The app's shutdown always runs, a second Ctrl-C included (runner, render pool, browser,
   database: queued writes land), so nothing already done is lost; and the process exits
   0, since stopping is what was asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable, Generator
from types import FrameType
from typing import Any, Final

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from sift.api.errors import error_response
from sift.errors import ServiceBusy

# How long cut-off requests may take to send their 503 before the app shuts down anyway.
CUT_OFF_WAIT_S: Final = 2.0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class CutOff:
    """The outermost ASGI layer: once ``stopping``, a request whose task the stop cancels
    answers ``503 service_busy`` — or, when its answer has begun, ends it — instead of
    leaving uvicorn to log the cancellation as a crash with a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stopping = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except asyncio.CancelledError:
            if not self.stopping or scope["type"] != "http":
                raise
            await _cut_off(scope, receive, send)


async def _cut_off(scope: Scope, receive: Receive, send: Send) -> None:
    refusal = ServiceBusy(
        "sift is stopping: this request was cut off before it finished",
        hint="Retry in a moment (or against another sift node).",
    )
    try:
        await error_response(refusal)(scope, receive, send)
    except RuntimeError:  # the answer had started: end it where it stands
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def stopping_line(requests: int, targets: int, grace_s: float) -> str:
    """The one line said at the first Ctrl-C (or SIGTERM)."""
    waits = [
        _count(n, what) for n, what in ((requests, "open request"), (targets, "batch target")) if n
    ]
    if not waits:
        return "sift: stopping"
    return (
        f"sift: stopping; waiting up to {grace_s:g} s for {' and '.join(waits)} to finish "
        "(Ctrl-C again to stop now)"
    )


class SiftServer(uvicorn.Server):
    """uvicorn's server with sift's stop (see the module docstring). ``app`` is the sift
    app (its batch runner is stopped with the grace), ``cut_off`` the layer in front of it."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        app: Any,
        cut_off: CutOff,
        grace_s: float,
        say: Callable[[str], None] = _say,
    ) -> None:
        super().__init__(config)
        self._app = app
        self._cut_off = cut_off
        self._grace_s = grace_s
        self._say = say
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline = 0.0
        self._now = asyncio.Event()  # a second Ctrl-C
        self._runner_stop: asyncio.Future[None] | None = None
        self._scheduler_stop: asyncio.Future[None] | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """uvicorn's, without raising the signal again once stopped: the process exits 0."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A signal handler: set flags, and leave the rest to the event loop.
        if not self.should_exit:
            self.should_exit = True
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._begin)
        elif sig == signal.SIGINT and not self.force_exit:
            self.force_exit = True
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._hurry)

    def _runner(self) -> Any:
        """The app's batch runner, once its lifespan has started one."""
        return getattr(getattr(self._app.state, "batch", None), "runner", None)

    def _scheduler(self) -> Any:
        """The app's watch scheduler, once its lifespan has started one."""
        return getattr(getattr(self._app.state, "watches", None), "scheduler", None)

    def _begin(self) -> None:
        assert self._loop is not None
        self._cut_off.stopping = True
        self._deadline = self._loop.time() + self._grace_s
        runner = self._runner()
        targets = 0
        if runner is not None:
            targets = runner.active
            # Stop starting targets now; the app's shutdown joins this stop.
            self._runner_stop = asyncio.ensure_future(runner.stop(self._grace_s))
        if (scheduler := self._scheduler()) is not None:
            # Watch checks share the grace; the app's shutdown joins this stop too.
            self._scheduler_stop = asyncio.ensure_future(scheduler.stop(self._grace_s))
        self._say(stopping_line(len(self.server_state.tasks), targets, self._grace_s))

    def _hurry(self) -> None:
        self._now.set()
        runner = self._runner()
        if runner is not None:
            runner.hurry()
        if (scheduler := self._scheduler()) is not None:
            scheduler.hurry()
        self._say("sift: stopping now; cutting off what still runs")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        if not self._deadline:  # stopped without a signal (e.g. should_exit set by hand)
            self._cut_off.stopping = True
            self._deadline = loop.time() + self._grace_s
        # 1. No new connections; idle ones close now, busy ones after their answer.
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        # 2. Running requests get the rest of the grace (a second Ctrl-C ends it).
        left = await self._wait_for_requests(loop)
        # 3. Cut off what still runs: each answers 503 (CutOff).
        if left:
            if not self._now.is_set():
                self._say(f"sift: {_count(len(left), 'request')} still open; cut off")
            for task in left:
                task.cancel()
            await asyncio.wait(left, timeout=CUT_OFF_WAIT_S)
        # 4. The app's shutdown, always: the runner's stop (joined), the parts, the database.
        await self.lifespan.shutdown()

    async def _wait_for_requests(self, loop: asyncio.AbstractEventLoop) -> set[asyncio.Task[Any]]:
        """Wait until no request runs, the grace is over or a second Ctrl-C; those left."""
        now = asyncio.ensure_future(self._now.wait())
        try:
            while (
                (tasks := set(self.server_state.tasks))
                and not now.done()
                and (wait_s := self._deadline - loop.time()) > 0
            ):
                await asyncio.wait(
                    {*tasks, now}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            now.cancel()
        return {t for t in self.server_state.tasks if not t.done()}


def serve(app: Any, sock: socket.socket, *, grace_s: float, **config: Any) -> None:
    """Serve the sift ``app`` on the bound ``sock`` (``config``: uvicorn's settings) until
    SIGINT or SIGTERM, then stop as the module docstring says."""
    cut_off = CutOff(app)
    server = SiftServer(
        uvicorn.Config(cut_off, **config), app=app, cut_off=cut_off, grace_s=grace_s
    )
    server.run(sockets=[sock])
