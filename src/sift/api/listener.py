"""sift's HTTP listener: uvicorn's httptools protocol with the bounds uvicorn lacks.

uvicorn (0.54) bounds neither how long a client may take to send a request head nor how
large the head may grow: its keep-alive timer runs only between requests and is cancelled
by the first byte of the next one, and httptools has no head size limit at all (it even
joins a growing header value by bytes concatenation, so one 150 MiB header costs quadratic
time on the event loop). ``limit_concurrency`` answers 503 only once a head is complete,
so half-open connections count against it and would lock everyone out. h11 caps the head
(``h11_max_incomplete_event_size``) but has no head deadline either and is several times
slower. So ``GuardedHttpTools`` adds, per connection:

- a **head deadline**: the request line and headers must arrive within ``head_timeout_s``
  of the connection opening or of the previous response; then ``408 request_timeout`` (or
  a silent close if nothing at all was sent). One timer per connection, re-armed lazily,
  so a request costs a float store, not a timer;
- a **head size cap**: more than ``max_head_bytes`` without the end of the head gives
  ``431 header_too_large``; the parser never holds more than the cap plus one socket read;
- a **connection limit**: past ``max_connections`` the oldest connection that is idle or
  still sending its head (the cheapest to lose, and the shape of a slowloris attack) is
  closed to make room; only if every connection is serving a request is the new one
  refused with ``503 too_many_connections``.

Refusals are the usual JSON error envelope, written straight to the socket, then the
connection is half-closed and what the client still sends is drained (for ``LINGER_S``, at
most ``LINGER_BYTES``) so the answer is not lost to a TCP reset.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from sift.config import ListenerSettings
from sift.errors import HeaderTooLarge, RequestTimeout, SiftError, TooManyConnections
from sift.jsonio import dumps

log = logging.getLogger("sift.listener")

LINGER_S: Final = 1.0  # how long a refused connection's remaining input is drained
LINGER_BYTES: Final = 64 << 10  # ... and how much of it, before closing regardless
FD_RESERVE: Final = 256  # descriptors kept for the database, render pipes, upstream pools


@dataclass(frozen=True)
class ListenerLimits:
    max_connections: int
    head_timeout_s: float
    max_head_bytes: int

    @classmethod
    def from_settings(cls, s: ListenerSettings, *, max_connections: int) -> ListenerLimits:
        return cls(max_connections, s.head_timeout_s, s.max_head_bytes)


def raw_error(err: SiftError) -> bytes:
    """``err`` as a complete HTTP/1.1 response that closes the connection."""
    body = dumps(err.to_dict())
    head = [
        STATUS_LINE[err.status],
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"connection: close\r\n",
    ]
    head += [f"{k}: {v}\r\n".encode("latin-1") for k, v in err.headers.items()]
    return b"".join([*head, b"\r\n", body])


# The overridden methods run once or more per request: plain function calls, not super().
_feed = HttpToolsProtocol.data_received
_headers_complete = HttpToolsProtocol.on_headers_complete
_message_complete = HttpToolsProtocol.on_message_complete
_response_complete = HttpToolsProtocol.on_response_complete


class GuardedHttpTools(HttpToolsProtocol):
    """``HttpToolsProtocol`` with a head deadline, a head size cap and a connection limit.

    Use ``guarded_protocol(limits)`` to get a class bound to limits (uvicorn instantiates
    the protocol class itself).
    """

    limits: ClassVar[ListenerLimits]
    max_head_bytes: ClassVar[int]  # limits.max_head_bytes, one lookup less per read
    # Connections waiting for a head, oldest wait first (dicts keep insertion order), so
    # finding the one to close at the limit is O(1) however many connections are open.
    waiting: ClassVar[dict[GuardedHttpTools, None]]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._in_head = True  # the next bytes belong to a request head
        self._head_bytes = 0  # head bytes received so far (plus at most one read)
        self._head_since = 0.0  # when the wait for the current head began (loop time)
        self._head_timer: asyncio.TimerHandle | None = None
        self._served = False  # answered a request already (so an idle wait is keep-alive)
        self._refused = False
        self._drained = 0

    # -- connection lifecycle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._head_since = self.loop.time()
        self.waiting[self] = None
        self._head_timer = self.loop.call_later(self.limits.head_timeout_s, self._head_deadline)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _make_room(self) -> None:
        """Close the oldest connection waiting for a head, or refuse this one."""
        victim = next((c for c in self.waiting if c is not self and c._waiting_for_head()), None)
        if victim is None:
            log.warning("connection refused: all %d slots serve requests", len(self.connections))
            self._refuse(self._too_many())
        elif victim._served and not victim._head_bytes:  # idle keep-alive: nothing to answer
            victim.waiting.pop(victim, None)
            victim.connections.discard(victim)
            victim.transport.close()
        else:
            victim._refuse(self._too_many())

    def _too_many(self) -> SiftError:
        err = TooManyConnections(
            f"sift holds its limit of {self.limits.max_connections} connections"
        )
        err.headers["Retry-After"] = "1"
        return err

    # -- head bounds

    def _waiting_for_head(self) -> bool:
        """Reading a head with no request of this connection in progress."""
        return (
            self._in_head
            and not self._refused
            and (self.cycle is None or self.cycle.response_complete)
            and not self.transport.is_closing()
        )

    def _head_deadline(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._refused:
            return
        timeout = self.limits.head_timeout_s
        if self._waiting_for_head():
            left = self._head_since + timeout - self.loop.time()
            if left <= 0:
                if self._head_bytes:
                    self._refuse(
                        RequestTimeout(f"the request head did not arrive within {timeout:g} s")
                    )
                else:
                    self.connections.discard(self)
                    self.transport.close()
                return
            timeout = left
        # A request is in progress (its response re-starts the clock), or time is left.
        self._head_timer = self.loop.call_later(timeout, self._head_deadline)

    def data_received(self, data: bytes) -> None:
        if self._refused:  # draining what a refused client still sends, up to a bound
            self._drained += len(data)
            if self._drained > LINGER_BYTES:
                self.transport.close()
            return
        if not self._in_head:
            _feed(self, data)
            return
        self._head_bytes += len(data)
        _feed(self, data)
        if (
            self._head_bytes > self.max_head_bytes
            and self._in_head
            and not self.transport.is_closing()
        ):
            self._refuse(
                HeaderTooLarge(
                    f"the request head exceeds {self.limits.max_head_bytes} bytes without ending"
                )
            )

    def on_headers_complete(self) -> None:
        self.waiting.pop(self, None)
        self._in_head = False
        self._head_bytes = 0
        _headers_complete(self)

    def on_message_complete(self) -> None:
        self._in_head = True
        _message_complete(self)

    def on_response_complete(self) -> None:
        _response_complete(self)
        self._served = True
        self._head_since = self.loop.time()
        # To the end of the line (a pipelined request may have left an entry further up:
        # it only ages that entry, which is skipped while its request is in progress).
        self.waiting[self] = None

    # -- refusing

    def _refuse(self, err: SiftError) -> None:
        """Answer ``err`` and close, draining input for ``LINGER_S`` so the client reads it."""
        self._refused = True
        self.waiting.pop(self, None)
        self.connections.discard(self)
        transport = self.transport
        transport.write(raw_error(err))
        if transport.can_write_eof():
            transport.write_eof()
            transport.resume_reading()
            self.loop.call_later(LINGER_S, transport.close)
        else:
            transport.close()


def guarded_protocol(limits: ListenerLimits) -> type[GuardedHttpTools]:
    """A ``GuardedHttpTools`` subclass bound to ``limits``, for ``uvicorn.run(http=...)``."""
    return type(
        "SiftHttpProtocol",
        (GuardedHttpTools,),
        {"limits": limits, "max_head_bytes": limits.max_head_bytes, "waiting": {}},
    )


def raise_open_files_limit() -> int:
    """Raise this process's soft open-files limit to its hard limit; return the soft limit.

    Every connection is a descriptor: the common default of 1,024 would run out before the
    connection limit does, and then ``accept`` fails for everyone.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("could not raise the open-files limit from %d to %d", soft, target)
    return soft


def effective_max_connections(configured: int, open_files: int) -> int:
    """``configured``, lowered to what ``open_files`` descriptors leave after the reserve."""
    room = max(1, open_files - FD_RESERVE)
    if configured > room:
        log.warning(
            "listener.max_connections lowered from %d to %d: the open-files limit is %d",
            configured,
            room,
            open_files,
        )
        return room
    return configured
