"""sift's HTTP listener: uvicorn's httptools protocol with the bounds uvicorn lacks.

uvicorn (0.55) bounds neither how long a client may take to send a request nor how large
the head may grow: its keep-alive timer runs only between requests and is cancelled by the
first byte of the next one, a request body may trickle in (or stop) for ever, and a
response its client never reads waits for ever on a full send buffer. httptools has no
head size limit at all (it even joins a growing header value by bytes concatenation, so
one 150 MiB header costs quadratic time on the event loop). ``limit_concurrency`` answers
503 only once a head is complete, so slow connections count against it and would lock
everyone out. So ``GuardedHttpTools`` adds, per connection:

- a **head deadline**: the request line and headers must arrive within ``head_timeout_s``
  of the connection opening or of the previous response; then ``408 request_timeout`` (or
  a silent close if nothing at all was sent);
- a **head size cap**: more than ``max_head_bytes`` without the end of the head gives
  ``431 header_too_large``; the parser never holds more than the cap plus one socket read;
- **body deadlines**: a body that spans reads must keep arriving — no silence longer than
  ``body_idle_timeout_s``, and never more than ``body_timeout_s`` behind the schedule of
  ``body_min_bytes_per_s`` (so a body of N bytes has ``body_timeout_s + N / rate`` in all);
  then ``408 request_timeout``. Time the server makes the client wait (reading paused,
  ``100 Continue`` not sent yet) does not count. A request answered before its body has
  arrived (a 401, a 413) is not read further: the connection is closed after the answer;
- a **write timeout**: a response whose client does not read it (the send buffer stays
  full) for ``write_timeout_s`` is dropped with a TCP reset, which frees the buffers and
  the handler waiting on them;
- a **connection limit**: past ``max_connections`` the connection furthest behind its
  schedule (an idle or half-sent head, a trickling body, an unread response: see
  ``api.slots``) is closed to make room; only if every connection is on schedule or being
  served is the new one refused with ``503 too_many_connections``.

One timer per connection, re-armed lazily, serves the head and body deadlines, so a
request whose body comes with its head costs a float store, not a timer. Refusals are the
usual JSON error envelope, written straight to the socket, then the connection is
half-closed and what the client still sends is drained (for ``LINGER_S``, at most
``LINGER_BYTES``) so the answer is not lost to a TCP reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import resource
import socket
import struct
import sys
import termios
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.server import ServerState

from sift.api.slots import Slots
from sift.config import ListenerSettings
from sift.errors import HeaderTooLarge, RequestTimeout, SiftError, TooManyConnections
from sift.jsonio import dumps

log = logging.getLogger("sift.listener")

LINGER_S: Final = 1.0  # how long a refused connection's remaining input is drained
LINGER_BYTES: Final = 64 << 10  # ... and how much of it, before closing regardless
REFUSAL_LOG_EVERY_S: Final = 1.0  # "connections refused" is logged at most this often
FD_RESERVE: Final = 256  # descriptors kept for the database, render pipes, upstream pools
_DEFAULT: Final = ListenerSettings()
_RESET: Final = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset
_INT: Final = bytes(4)  # the buffer an ioctl answering an int fills

BODY_HINT: Final = (
    "Send the request body right after its head, without pauses; sift closes a body that "
    "goes silent for listener.body_idle_timeout_s or falls behind "
    "listener.body_min_bytes_per_s."
)
EVICTED_HINT: Final = (
    "sift was full and this connection was the furthest behind; send each request whole "
    "and at once, then retry after the Retry-After delay."
)


@dataclass(frozen=True)
class ListenerLimits:
    max_connections: int
    head_timeout_s: float
    max_head_bytes: int
    body_idle_timeout_s: float = _DEFAULT.body_idle_timeout_s
    body_timeout_s: float = _DEFAULT.body_timeout_s
    body_min_bytes_per_s: int = _DEFAULT.body_min_bytes_per_s
    write_timeout_s: float = _DEFAULT.write_timeout_s
    keep_alive_grace_s: float = _DEFAULT.keep_alive_grace_s

    @classmethod
    def from_settings(cls, s: ListenerSettings, *, max_connections: int) -> ListenerLimits:
        return cls(
            max_connections,
            s.head_timeout_s,
            s.max_head_bytes,
            s.body_idle_timeout_s,
            s.body_timeout_s,
            s.body_min_bytes_per_s,
            s.write_timeout_s,
            s.keep_alive_grace_s,
        )


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
    """``HttpToolsProtocol`` with head and body deadlines, a head size cap, a write timeout
    and a connection limit.

    Use ``guarded_protocol(limits)`` to get a class bound to limits (uvicorn instantiates
    the protocol class itself).
    """

    limits: ClassVar[ListenerLimits]
    max_head_bytes: ClassVar[int]  # limits.max_head_bytes, one lookup less per read
    slots: ClassVar[Slots[GuardedHttpTools]]  # the eviction candidates (api/slots.py)

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
        self.head_since = 0.0  # when the wait for the current head began (loop time)
        self._timer: asyncio.TimerHandle | None = None  # the head and body deadlines
        self.served = False  # answered a request already (so an idle wait is keep-alive)
        self._refused = False  # answered by the listener itself (or dropped): draining
        self._drained = 0
        self.body_open = False  # a request body spanning reads is being received
        self.body_gen = 0
        self.body_at = 0.0  # when what the body sent so far would be on schedule
        self._body_read_at = 0.0  # the body's last read
        self._write_timer: asyncio.TimerHandle | None = None

    # -- connection lifecycle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self.head_since = self.loop.time()
        self.slots.waiting[self] = None
        self._timer = self.loop.call_later(self.limits.head_timeout_s, self._tick)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self.slots.waiting.pop(self, None)
        self.slots.blocked.pop(self, None)
        self.body_open = False
        for timer in (self._timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._write_timer = None
        super().connection_lost(exc)

    def _make_room(self) -> None:
        """Close the connection furthest behind its schedule, or refuse this one."""
        found = self.slots.slowest(self.loop.time(), self)
        if found is None:
            self._log_refusal()
            self._refuse(self._too_many(TooManyConnections.default_hint))
            return
        victim, phase = found
        if phase == "write":
            victim._drop("its client did not read the response and sift was full")
        elif phase == "head" and victim.served and not victim._head_bytes:
            victim.slots.waiting.pop(victim, None)  # idle keep-alive: nothing to answer
            victim.connections.discard(victim)
            victim.transport.close()
        else:
            victim._refuse(self._too_many(EVICTED_HINT))

    def _log_refusal(self) -> None:
        """One warning a second at most, with the count: a flood of refusals is a flood of
        log lines otherwise (hundreds a second), written by the event loop."""
        slots, now = self.slots, self.loop.time()
        slots.refused += 1
        if now - slots.refusal_logged_at >= REFUSAL_LOG_EVERY_S:
            log.warning(
                "%d connection(s) refused since the last warning: all %d slots are busy",
                slots.refused,
                self.limits.max_connections,
            )
            slots.refused, slots.refusal_logged_at = 0, now

    def _too_many(self, hint: str) -> SiftError:
        err = TooManyConnections(
            f"sift holds its limit of {self.limits.max_connections} connections", hint=hint
        )
        err.headers["Retry-After"] = "1"
        return err

    # -- deadlines

    def waiting_for_head(self) -> bool:
        """Reading a head with no request of this connection in progress."""
        cycle: RequestResponseCycle | None = self.cycle
        return (
            self._in_head
            and not self._refused
            and (cycle is None or cycle.response_complete)
            and not self.transport.is_closing()
        )

    def servers_turn(self) -> bool:
        """The client is waiting for sift: reading is paused (a handler has not taken the
        body read so far, or the request is queued behind another), ``100 Continue`` is not
        sent yet, or what the client sent is still unread in the kernel (a busy event loop
        has not got to it: under load a fresh connection's whole request can wait there)."""
        cycle: RequestResponseCycle | None = self.cycle
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            return True
        return self._unread_bytes() > 0

    def _unread_bytes(self) -> int:
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return 0
        try:
            answer = fcntl.ioctl(sock.fileno(), termios.FIONREAD, _INT)
        except (OSError, ValueError):  # closed meanwhile
            return 0
        return int.from_bytes(answer, sys.byteorder)

    def _arm(self, delay: float) -> None:
        """Have the deadline timer fire within ``delay`` seconds."""
        when = self.loop.time() + delay
        timer = self._timer
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timer = self.loop.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._refused or self.transport.is_closing():
            return
        now = self.loop.time()
        delay: float | None
        if self.body_open:
            delay = self._body_check(now)
        elif self.waiting_for_head():
            delay = self._head_check(now)
        else:  # a request is being served: its response re-starts the head clock
            delay = self.limits.head_timeout_s
        if delay is not None:
            self._timer = self.loop.call_later(delay, self._tick)

    def _head_check(self, now: float) -> float | None:
        """Seconds left for the head, or ``None`` once it is refused (or closed)."""
        timeout = self.limits.head_timeout_s
        left = self.head_since + timeout - now
        if left > 0:
            return left
        if self._head_bytes:
            self._refuse(RequestTimeout(f"the request head did not arrive within {timeout:g} s"))
        else:  # nothing sent, nothing to answer
            self.slots.waiting.pop(self, None)
            self.connections.discard(self)
            self.transport.close()
        return None

    def _body_check(self, now: float) -> float | None:
        """Seconds to the body's next deadline, or ``None`` once it is refused."""
        limits = self.limits
        if self.servers_turn():  # sift keeps the client waiting: its clock stops
            self.body_at = max(self.body_at, now)
            self._body_read_at = now
            return min(limits.body_idle_timeout_s, limits.body_timeout_s)
        idle_left = self._body_read_at + limits.body_idle_timeout_s - now
        behind_left = self.body_at + limits.body_timeout_s - now
        if idle_left > 0 and behind_left > 0:
            return min(idle_left, behind_left)
        if idle_left <= 0:
            message = (
                f"the request body stalled: nothing arrived for {limits.body_idle_timeout_s:g} s"
            )
        else:
            message = (
                f"the request body arrives slower than {limits.body_min_bytes_per_s} bytes/s "
                f"(more than {limits.body_timeout_s:g} s behind)"
            )
        self._refuse(RequestTimeout(message, hint=BODY_HINT))
        return None

    # -- bytes in

    def data_received(self, data: bytes) -> None:
        if self._refused:  # draining what a refused client still sends, up to a bound
            self._drained += len(data)
            if self._drained > LINGER_BYTES:
                self.transport.close()
            return
        if not self._in_head:  # the rest of a body (a pipelined head follows through _feed)
            if self.body_open:
                self.body_at += len(data) / self.limits.body_min_bytes_per_s
                self._body_read_at = self.loop.time()
            _feed(self, data)
            return
        self._head_bytes += len(data)
        _feed(self, data)
        if self.transport.is_closing() or self._refused:
            return
        if self._mid_body():  # a head complete, its body not: the body's clock starts
            if not self.body_open:
                self._body_begin()
        elif self._head_bytes > self.max_head_bytes:
            self._refuse(
                HeaderTooLarge(
                    f"the request head exceeds {self.limits.max_head_bytes} bytes without ending"
                )
            )

    def _mid_body(self) -> bool:
        """Between a head's end and its message's (a method: ``_feed`` moves it)."""
        return not self._in_head

    def _body_begin(self) -> None:
        now = self.loop.time()
        self.body_open = True
        self.body_gen += 1
        self._body_read_at = now
        # What came with the head is credited: the handler has not run yet, so it is all
        # still in the cycle's buffer.
        self.body_at = now + len(self.cycle.body) / self.limits.body_min_bytes_per_s
        self.slots.push_body(self, len(self.connections))
        self._arm(min(self.limits.body_idle_timeout_s, self.limits.body_timeout_s))

    def on_headers_complete(self) -> None:
        self.slots.waiting.pop(self, None)
        self._in_head = False
        self._head_bytes = 0
        _headers_complete(self)

    def on_message_complete(self) -> None:
        self._in_head = True
        self.body_open = False
        _message_complete(self)

    def on_response_complete(self) -> None:
        _response_complete(self)
        self.served = True
        if self._refused or self.transport.is_closing():
            return
        if not self._in_head:  # answered before its body arrived: the rest is not read
            self._linger()
            return
        self.head_since = self.loop.time()
        # To the end of the line (a pipelined request may have left an entry further up:
        # it only ages that entry, which is skipped while its request is in progress).
        self.slots.waiting[self] = None

    # -- bytes out

    def pause_writing(self) -> None:
        """The send buffer is full: the client has ``write_timeout_s`` to read some of it."""
        self.flow.pause_writing()
        if self._write_timer is None and not self.transport.is_closing():
            self.slots.blocked[self] = self.loop.time()
            self._write_timer = self.loop.call_later(
                self.limits.write_timeout_s, self._write_expired
            )

    def resume_writing(self) -> None:
        self.flow.resume_writing()
        self.slots.blocked.pop(self, None)
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_expired(self) -> None:
        self._write_timer = None
        self._drop(f"its client read nothing for {self.limits.write_timeout_s:g} s")

    # -- refusing

    def _end_request(self) -> None:
        """The request in progress, if any, is over: its handler sees a disconnect and what
        it still sends goes nowhere."""
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()

    def _refuse(self, err: SiftError) -> None:
        """Answer ``err`` and close, draining input for ``LINGER_S`` so the client reads it."""
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            self._drop(f"{err.code} in the middle of a response")  # no room for an answer
            return
        self._end_request()
        self.transport.write(raw_error(err))
        self._linger()

    def _linger(self) -> None:
        """Half-close after what was written; drain input for ``LINGER_S``, then close."""
        self._refused = True
        self.body_open = False
        self.slots.waiting.pop(self, None)
        self.connections.discard(self)
        transport = self.transport
        if transport.can_write_eof():
            transport.write_eof()
            transport.resume_reading()
            self.loop.call_later(LINGER_S, transport.close)
        else:
            transport.close()

    def _drop(self, why: str) -> None:
        """Close at once with a TCP reset: buffered output is discarded, not flushed."""
        log.info("connection from %s dropped: %s", self.client, why)
        self._refused = True
        self.body_open = False
        self._end_request()
        self.slots.waiting.pop(self, None)
        self.slots.blocked.pop(self, None)
        self.connections.discard(self)
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        self.transport.abort()


def guarded_protocol(limits: ListenerLimits) -> type[GuardedHttpTools]:
    """A ``GuardedHttpTools`` subclass bound to ``limits``, for ``uvicorn.run(http=...)``."""
    return type(
        "SiftHttpProtocol",
        (GuardedHttpTools,),
        {
            "limits": limits,
            "max_head_bytes": limits.max_head_bytes,
            "slots": Slots(limits.keep_alive_grace_s),
        },
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
