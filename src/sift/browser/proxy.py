"""The guard proxy: every connection the browser opens passes sift's egress guard here.

Chromium is launched with ``--proxy-server`` pointing at a ``GuardProxy`` (one per page,
carrying that caller's ``FetchPolicy`` and the page's budgets) and a deny-all one for the
browser's own traffic. For each request the proxy does exactly what the fetcher does, with
the fetcher's own code: ``Fetcher.check_url`` (URL rules, ports per class, local names,
literal addresses), then ``Fetcher.vetted_addresses`` (resolve once, every answer vetted),
then it connects to a vetted IP *literal*. Chromium never resolves a name itself.

Two request forms reach it:

- ``CONNECT host:port`` (https, wss, and ws tunnelled by Chromium): an opaque tunnel after the
  check; TLS stays end to end, verified by the browser.
- absolute-form ``GET http://host/path`` (plain http): forwarded with ``Connection: close``
  both ways, so a kept-alive browser connection can never switch to another host without a
  new check.

A refusal is answered ``403`` (``502`` for other failures) with ``X-Sift-Error: <code>``,
and remembered, so the page loader can tell a refused navigation from a page's own 403.
Budgets: ``max_requests`` (requests plus tunnels) and ``max_bytes`` (both directions); when
one is spent the proxy refuses and closes everything and ``over_budget`` says which.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from sift.errors import Blocked, ConnectFailed, InvalidUrl, SiftError
from sift.fetch import BLOCKED_MESSAGE, Fetcher, FetchPolicy, Target, validate_url

# Hop-by-hop and proxy headers never forwarded (RFC 9110 §7.6.1), plus Host (rebuilt).
_DROP = ("proxy-", "connection:", "keep-alive:", "te:", "upgrade:", "host:", "trailer:")
_DROP_RESPONSE = ("connection:", "keep-alive:", "proxy-")
MAX_HEAD_BYTES = 64 << 10
PIPE_CHUNK = 64 << 10


@dataclass(frozen=True)
class ProxyLimits:
    """What one page may spend through its proxy."""

    max_requests: int
    max_bytes: int
    connect_timeout_s: float


@dataclass
class ProxyStats:
    """What happened on one proxy (for the loader's decisions, metrics and tests)."""

    requests: int = 0
    refused: int = 0
    bytes: int = 0
    in_flight: int = 0
    last_activity: float = field(default_factory=time.monotonic)
    # The target of every refused request ("http://host:port/path" or "host:port") → error.
    refusals: dict[str, SiftError] = field(default_factory=dict)


class OverBudget(Exception):
    """The page spent its request or byte budget."""


class GuardProxy:
    """An HTTP forward proxy applying one ``FetchPolicy`` to every connection.

    ``policy=None`` makes the deny-all proxy (the browser's own traffic). ``guard=False``
    turns the guard off — test-only, for the canary test's control run, so that test can
    fail; nothing in sift's settings can reach it.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        policy: FetchPolicy | None,
        limits: ProxyLimits,
        *,
        guard: bool = True,
    ) -> None:
        self._fetcher = fetcher
        self._policy = policy
        self._limits = limits
        self._guard = guard
        self.stats = ProxyStats()
        self.over_budget: str | None = None
        self.spent = asyncio.Event()  # set when a budget is spent: the page is to be killed
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._own: str | None = None

    async def start(self, host: str = "127.0.0.1") -> str:
        """Listen on ``host`` (a free port); returns the proxy URL for Chromium."""
        self._server = await asyncio.start_server(self._serve, host, 0, limit=MAX_HEAD_BYTES)
        port = self._server.sockets[0].getsockname()[1]
        # No caller may point sift at its own proxy (a fleet caller may reach loopback).
        self._own = f"{host}:{port}"
        self._fetcher.guard.add_own(self._own)
        return f"http://{host}:{port}"

    async def start_on(self, sock: socket.socket) -> None:
        """Serve an already bound and listening socket (one made inside the browser's
        network namespace: unreachable from the host, so nothing to register)."""
        self._server = await asyncio.start_server(self._serve, sock=sock, limit=MAX_HEAD_BYTES)

    async def close(self) -> None:
        """Stop listening and cut every open connection. Idempotent."""
        if self._own is not None:
            self._fetcher.guard.remove_own(self._own)
            self._own = None
        if self._server is not None:
            self._server.close()
            self._server = None
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def quiet_for(self, now: float) -> float:
        """Seconds the page's network has been idle (0 while a plain request is open)."""
        if self.stats.in_flight:
            return 0.0
        return now - self.stats.last_activity

    # -- one client connection -----------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # the browser or the upstream went away, or sent garbage: drop it
        except OverBudget:
            pass
        except asyncio.CancelledError:
            # Cut by close(): end quietly (asyncio's server would log a cancelled handler).
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self._touch(len(head))
        line, *headers = head[:-4].decode("latin-1").split("\r\n")
        method, target, _version = line.split(" ", 2)
        key = target if method != "CONNECT" else target.lower()
        try:
            self._count_request()
            checked, (up_reader, up_writer) = await self._dial(method, target)
        except SiftError as exc:
            self.stats.refused += 1
            if self._policy is not None:  # the long-lived deny-all proxy remembers nothing
                self.stats.refusals[key] = exc
            status = "403 Forbidden" if isinstance(exc, Blocked) else "502 Bad Gateway"
            writer.write(
                f"HTTP/1.1 {status}\r\nX-Sift-Error: {exc.code}\r\nConnection: close\r\n"
                "Content-Type: text/plain\r\nContent-Length: 7\r\n\r\nrefused".encode()
            )
            await writer.drain()
            return
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
                return
            self.stats.in_flight += 1
            try:
                await self._forward(method, checked, headers, reader, writer, up_reader, up_writer)
            finally:
                self.stats.in_flight -= 1
                self._touch(0)
        finally:
            up_writer.close()

    def _count_request(self) -> None:
        self.stats.requests += 1
        if self.stats.requests > self._limits.max_requests:
            self._spend("requests")
            raise Blocked("the page's subrequest budget is spent")

    async def _dial(
        self, method: str, target: str
    ) -> tuple[Target, tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """Check the target, resolve once, vet, and connect to a vetted literal."""
        if self._policy is None:
            raise Blocked(BLOCKED_MESSAGE)  # the deny-all proxy: the browser's own traffic
        if method == "CONNECT":
            url = f"https://{target}/"
        elif target.startswith("http://"):
            url = target
        else:
            raise Blocked(BLOCKED_MESSAGE)  # origin-form or other schemes: not a proxy request
        try:
            if self._guard:
                checked = self._fetcher.check_url(url, self._policy)
            else:  # test-only control run: URL syntax only, then wherever the page says
                checked = validate_url(url)
        except InvalidUrl as exc:
            raise Blocked(BLOCKED_MESSAGE) from exc
        if self._guard:
            addresses = await self._fetcher.vetted_addresses(checked, self._policy)
        else:
            addresses = [checked.ip or checked.host]
        last: OSError | None = None
        for ip in addresses:
            try:
                async with asyncio.timeout(self._limits.connect_timeout_s):
                    conn = await asyncio.open_connection(ip, checked.port, limit=MAX_HEAD_BYTES)
                return checked, conn
            except (OSError, TimeoutError) as exc:
                last = exc if isinstance(exc, OSError) else OSError("connect timed out")
        raise ConnectFailed("Could not connect to the upstream.") from last

    async def _forward(
        self,
        method: str,
        target: Target,
        headers: list[str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """One plain-http request: rewrite to origin form, force ``Connection: close``."""
        keep = [h for h in headers if not h.lower().startswith(_DROP)]
        lines = [f"{method} {target.target} HTTP/1.1", f"Host: {target.netloc}", *keep]
        up_writer.write(("\r\n".join(lines) + "\r\nConnection: close\r\n\r\n").encode("latin-1"))
        # The request body (if any) flows while the response comes back.
        body = asyncio.ensure_future(self._pipe(reader, up_writer, eof=False))
        try:
            head = await up_reader.readuntil(b"\r\n\r\n")
            self._touch(len(head))
            status, *fields = head[:-4].decode("latin-1").split("\r\n")
            kept = [f for f in fields if not f.lower().startswith(_DROP_RESPONSE)]
            writer.write(
                ("\r\n".join([status, *kept]) + "\r\nConnection: close\r\n\r\n").encode("latin-1")
            )
            await self._pipe(up_reader, writer)
        finally:
            body.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await body

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, eof: bool = True
    ) -> None:
        while data := await src.read(PIPE_CHUNK):
            self._touch(len(data))
            dst.write(data)
            await dst.drain()
        if eof and dst.can_write_eof():
            with contextlib.suppress(OSError):
                dst.write_eof()

    def _touch(self, nbytes: int) -> None:
        self.stats.last_activity = time.monotonic()
        self.stats.bytes += nbytes
        if self.stats.bytes > self._limits.max_bytes:
            self._spend("bytes")
            raise OverBudget

    def _spend(self, what: str) -> None:
        self.over_budget = self.over_budget or what
        self.spent.set()
