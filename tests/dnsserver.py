"""A tiny DNS server on 127.0.0.1 for tests and benchmarks: the only DNS traffic they make.

It answers ``A`` questions for the names in its table, answers ``AAAA`` for them with no
records (NODATA), answers NXDOMAIN for every other name, and never answers at all for names
in ``silent`` (or ending with one of ``silent_suffixes``): the "DNS that never answers" of
issue 24. ``queries`` counts the questions per name. Plain DNS over UDP, one question per
message (what resolvers send); nothing here ever sends a packet off 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
import threading
from collections.abc import Iterable, Mapping

QTYPE_A = 1
QTYPE_AAAA = 28
RCODE_NXDOMAIN = 3


def parse_question(data: bytes) -> tuple[int, int, str, int, bytes]:
    """``(id, flags, name, qtype, question bytes)`` of a query; raises ValueError."""
    if len(data) < 12:
        raise ValueError("short")
    ident, flags, qdcount = struct.unpack("!HHH", data[:6])
    if qdcount != 1:
        raise ValueError("one question only")
    labels: list[str] = []
    pos = 12
    while True:
        n = data[pos]
        pos += 1
        if n == 0:
            break
        labels.append(data[pos : pos + n].decode("ascii").lower())
        pos += n
    qtype, _qclass = struct.unpack("!HH", data[pos : pos + 4])
    return ident, flags, ".".join(labels), qtype, data[12 : pos + 4]


def answer(data: bytes, table: Mapping[str, Iterable[str]]) -> bytes | None:
    """The response to one query (None for a malformed one)."""
    try:
        ident, flags, name, qtype, question = parse_question(data)
    except (ValueError, IndexError, UnicodeDecodeError):
        return None
    rd = flags & 0x0100
    addresses = table.get(name)
    if addresses is None:
        head = struct.pack("!HHHHHH", ident, 0x8080 | rd | RCODE_NXDOMAIN, 1, 0, 0, 0)
        return head + question
    records = b""
    count = 0
    if qtype == QTYPE_A:
        for a in addresses:
            rdata = ipaddress.IPv4Address(a).packed
            records += struct.pack("!HHHIH", 0xC00C, QTYPE_A, 1, 60, len(rdata)) + rdata
            count += 1
    head = struct.pack("!HHHHHH", ident, 0x8480 | rd, 1, count, 0, 0)
    return head + question + records


class DnsServer:
    """Serves on a UDP socket of its own, on a thread of its own (so a test's or a benchmark's
    busy event loop never delays an answer). Use as a context manager."""

    def __init__(
        self,
        table: Mapping[str, Iterable[str]],
        *,
        silent: Iterable[str] = (),
        silent_suffixes: Iterable[str] = (),
    ) -> None:
        self.table = {k.lower(): tuple(v) for k, v in table.items()}
        self.silent = frozenset(s.lower() for s in silent)
        self.silent_suffixes = tuple(s.lower() for s in silent_suffixes)
        self.queries: dict[str, int] = {}
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dns-server", daemon=True)

    @property
    def address(self) -> str:
        """``"127.0.0.1:PORT"``: the form ``[egress] dns_servers`` takes."""
        return f"127.0.0.1:{self.port}"

    def _silent(self, name: str) -> bool:
        return name in self.silent or name.endswith(self.silent_suffixes or ("\0",))

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                name = parse_question(data)[2]
            except (ValueError, IndexError, UnicodeDecodeError):
                continue
            self.queries[name] = self.queries.get(name, 0) + 1
            if self._silent(name):
                continue
            reply = answer(data, self.table)
            if reply is not None:
                self._sock.sendto(reply, peer)

    def __enter__(self) -> DnsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


async def wait_queries(server: DnsServer, name: str, count: int) -> None:
    """Wait until ``server`` has seen ``count`` questions for ``name``."""
    while server.queries.get(name, 0) < count:
        await asyncio.sleep(0.01)
