"""Which connection the listener closes when every slot is taken: the one furthest behind.

At ``listener.max_connections`` a new client is let in by closing a connection that is
wasting its slot; only when none is does the newcomer get ``503 too_many_connections``.
Each candidate has a *key*: the time by which it would have made its progress on schedule.
It is behind by ``now - key``, and the smallest key goes:

- **reading a head** — the key is when the wait for it began (a head should arrive at
  once); ``waiting`` holds these connections, oldest wait first (dicts keep insertion
  order), so the oldest is found in O(1). A kept-alive connection (it was answered
  already) idle for less than ``keep_alive_grace_s`` is no candidate: its client is between
  two requests, and closing it then races the next one (the client sees its request fail,
  or reconnects into the very flood that made sift full);
- **reading a body** — the key is when the body began plus what it has sent so far at the
  minimum rate (``listener.body_min_bytes_per_s``): a client sending faster is *ahead*
  (its key lies in the future) and is never closed for a newcomer, a trickle falls behind
  from its first second. The key moves with every read, so these sit in a lazy min-heap:
  an entry's key is a lower bound of the connection's (keys only grow), refreshed when it
  reaches the top;
- **writing a response its client does not read** — the key is when sift's send buffer
  filled; ``blocked`` holds these, oldest first.

A connection the server itself keeps waiting (its request queued behind another, its body
unread by a busy handler, its ``100 Continue`` not sent yet, its bytes still unread in the
kernel because the event loop is busy) is no candidate: it is not behind, sift is. Under a
flood of new connections that last case is what keeps a victim's fresh connection, whose
whole request already waits in the kernel, from looking like an idle one. A request being
handled is never a candidate either. Only the ``HEADS_LOOKED_AT`` oldest waits are examined
per eviction, so the cost stays bounded when many are unread.
"""

from __future__ import annotations

import heapq
import itertools
from itertools import islice
from typing import Generic, Literal, Protocol, TypeVar

Phase = Literal["head", "body", "write"]
HEADS_LOOKED_AT = 8  # the oldest waits examined per eviction (each may cost a syscall)


class Slot(Protocol):
    """What ``Slots`` reads of a connection (``api.listener.GuardedHttpTools``)."""

    head_since: float  # when the wait for the current head began (loop time)
    served: bool  # answered a request already (an idle wait is then keep-alive)
    body_open: bool  # a request body is being received (across reads)
    body_gen: int  # which body: one more per request whose body spans reads
    body_at: float  # the body's key: when what it sent would be on schedule

    def waiting_for_head(self) -> bool: ...

    def servers_turn(self) -> bool: ...


C = TypeVar("C", bound=Slot)


class Slots(Generic[C]):
    """The candidates for eviction of one listener, by phase; see the module docstring."""

    def __init__(self, keep_alive_grace_s: float = 0.0) -> None:
        self.keep_alive_grace_s = keep_alive_grace_s
        self.waiting: dict[C, None] = {}
        self.blocked: dict[C, float] = {}  # connection -> when its send buffer filled
        self._bodies: list[tuple[float, int, C, int]] = []  # (key, seq, conn, body_gen)
        self._seq = itertools.count()
        self.refused = 0  # newcomers refused since the last warning (api/listener.py)
        self.refusal_logged_at = float("-inf")

    def push_body(self, conn: C, live: int) -> None:
        """``conn`` began a body that spans reads; ``live`` is the open connection count
        (stale entries are swept when they outnumber it, so the heap stays bounded)."""
        heap = self._bodies
        heapq.heappush(heap, (conn.body_at, next(self._seq), conn, conn.body_gen))
        if len(heap) > 2 * live + 64:
            heap[:] = [e for e in heap if e[2].body_open and e[2].body_gen == e[3]]
            heapq.heapify(heap)

    def slowest(self, now: float, newcomer: C) -> tuple[C, Phase] | None:
        """The connection furthest behind schedule (never ``newcomer``) and its phase, or
        ``None`` if every connection is on schedule or served."""
        best: tuple[float, C, Phase] | None = None
        kept_since = now - self.keep_alive_grace_s  # kept-alive waits from before this only
        head = next(
            (
                c
                for c in islice(self.waiting, HEADS_LOOKED_AT)
                if c is not newcomer
                and not (c.served and c.head_since > kept_since)
                and c.waiting_for_head()
                and not c.servers_turn()
            ),
            None,
        )
        if head is not None:
            best = (head.head_since, head, "head")
        body = self._slowest_body()
        if body is not None and body.body_at <= now and (best is None or body.body_at < best[0]):
            best = (body.body_at, body, "body")
        writer = next(iter(self.blocked.items()), None)
        if writer is not None and (best is None or writer[1] < best[0]):
            best = (writer[1], writer[0], "write")
        return None if best is None else (best[1], best[2])

    def _slowest_body(self) -> C | None:
        """The body with the smallest key that is the client's turn (entries refreshed on
        the way); the heap keeps it, the caller closes it (its entry then goes stale)."""
        heap = self._bodies
        aside: list[tuple[float, int, C, int]] = []
        found: C | None = None
        while heap:
            key, seq, conn, gen = heap[0]
            if not conn.body_open or conn.body_gen != gen:  # that body is over
                heapq.heappop(heap)
            elif conn.body_at > key:  # it made progress since the entry was made
                heapq.heapreplace(heap, (conn.body_at, seq, conn, gen))
            elif conn.servers_turn():
                aside.append(heapq.heappop(heap))
            else:
                found = conn
                break
        for entry in aside:
            heapq.heappush(heap, entry)
        return found
