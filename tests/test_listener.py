"""sift's own listener against a real `sift serve`: head deadline, head size cap, connection limit.

(Request bodies, unread responses and eviction by schedule: tests/test_listener_bodies.py.)

Every attack here froze or locked out the stock uvicorn/httptools listener: half-open
connections were held forever (and counted against any connection limit), and one huge
header was joined by quadratic bytes concatenation on the event loop. Raw sockets on
127.0.0.1 play the attacker; `/healthz` plays everyone else.
"""

from __future__ import annotations

import os
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rawsock import assert_refusal, connect, read_all
from servehelpers import Served, sift_serve, write_config
from sift.api.listener import FD_RESERVE, effective_max_connections
from sift.config import load_settings
from sift.errors import ConfigError

PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def _healthz(served: Served) -> None:
    r = httpx.get(f"{served.base_url}/healthz", timeout=30)
    assert (r.status_code, r.json()["ok"]) == (200, True)


@pytest.fixture
def open_files() -> Iterator[None]:
    """Room for 1,100 client sockets here and as many in the server (which inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 4096
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            message = f"needs an open-files limit of {need} (ulimit -Hn is {hard})"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
@pytest.mark.timeout(180)  # 1,100 sockets, one server start: generous on a loaded machine
def test_1100_half_open_connections_do_not_lock_out_healthz(
    tmp_path: Path, open_files: None
) -> None:
    # A long head deadline, so only the connection limit is at work here.
    config = write_config(tmp_path, "[listener]\nhead_timeout_s = 120\nmax_connections = 1000\n")
    with sift_serve(tmp_path, config=config) as served:
        socks = []
        try:
            for _ in range(1100):
                sock = connect(served)
                sock.sendall(PARTIAL_HEAD)
                socks.append(sock)
            _healthz(served)
            # 1,100 + 1 connections against a limit of 1,000: the 101 oldest half-sent heads
            # were closed to make room, each with the refusal; the rest are still open.
            for sock in socks[:101]:
                headers, _ = assert_refusal(
                    read_all(sock), "503 Service Unavailable", "too_many_connections"
                )
                assert headers["retry-after"] == "1"
            for sock in socks[101:]:
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):
                    sock.recv(1)
        finally:
            for sock in socks:
                sock.close()
        _healthz(served)


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server with small bounds for the tests below (one start instead of three)."""
    tmp = tmp_path_factory.mktemp("bounded")
    config = write_config(
        tmp,
        "[listener]\nhead_timeout_s = 0.5\nmax_head_bytes = 8192\nmax_connections = 3\n"
        "body_min_bytes_per_s = 1024\n",
    )
    with sift_serve(tmp, config=config) as served:
        yield served


def test_head_deadline(bounded: Served) -> None:
    served = bounded
    half, silent, kept = connect(served), connect(served), connect(served)
    with half, silent, kept:
        half.sendall(PARTIAL_HEAD)
        # A kept-alive connection: one whole request, answered; then half of the next.
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = b""
        while b'"ok":true' not in first:
            first += kept.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        kept.sendall(PARTIAL_HEAD)

        assert_refusal(read_all(half), "408 Request Timeout", "request_timeout")
        assert_refusal(read_all(kept), "408 Request Timeout", "request_timeout")
        # Nothing sent, nothing to answer: closed without a word.
        assert read_all(silent) == b""
    _healthz(served)


def test_head_size_cap(bounded: Served) -> None:
    served = bounded
    # One byte over the cap, no end of head: refused, the answer readable.
    with connect(served) as sock:
        head = PARTIAL_HEAD + b"a" * (8192 + 1 - len(PARTIAL_HEAD))
        sock.sendall(head)
        assert_refusal(read_all(sock), "431 Request Header Fields Too Large", "header_too_large")
    # A 150 MiB header: the server stops reading long before the end (the client's
    # send fails), and keeps answering everyone else.
    sent = 0
    chunk = b"a" * (1 << 20)
    with connect(served) as sock:
        sock.sendall(PARTIAL_HEAD)
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            while sent < 150 << 20:
                sock.sendall(chunk)
                sent += len(chunk)
    assert sent < 150 << 20
    _healthz(served)
    # A head just under the cap is served.
    r = httpx.get(f"{served.base_url}/healthz", headers={"X-Pad": "a" * 7000}, timeout=30)
    assert r.status_code == 200


def test_connection_limit_refuses_clearly_when_every_slot_is_on_schedule(
    bounded: Served,
) -> None:
    served = bounded
    holders = []
    try:
        for _ in range(3):
            sock = connect(served)
            holders.append(sock)
            # A whole head and most of its body at once: at the bounded server's minimum
            # body rate (1 KiB/s) the 60,000 bytes sent put it a minute ahead of schedule,
            # so it is no candidate for eviction (a trickle would be, tests/
            # test_listener_bodies.py).
            sock.sendall(
                b"POST /v1/fetch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Authorization: Bearer " + served.fleet_key.encode() + b"\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + b" " * 60000
            )
        with connect(served) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            headers, _ = assert_refusal(
                read_all(sock), "503 Service Unavailable", "too_many_connections"
            )
            assert headers["retry-after"] == "1"
    finally:
        for sock in holders:
            sock.close()
    # The slots are free again once the holders hang up.
    for _ in range(100):
        r = httpx.get(f"{served.base_url}/healthz", timeout=30)
        if r.status_code == 200:
            break
    assert r.status_code == 200


def _healthz_on(sock: socket.socket) -> bytes:
    """One GET /healthz on a kept-alive raw socket: the whole response (by its length)."""
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or len(data) < _length(data):
        chunk = sock.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return data


def _length(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return len(head) + 4 + length


@pytest.mark.slow
def test_a_kept_alive_connection_between_requests_is_not_closed_for_a_newcomer(
    tmp_path: Path,
) -> None:
    """Two slots: one held by a body sent well ahead of schedule (no candidate), one by a
    client between two requests on its kept-alive connection. Before
    ``listener.keep_alive_grace_s``, a newcomer closed that connection (it looked idle): the
    client's next request raced the close and failed, or reconnected into the flood that had
    filled sift. Now the newcomer is refused while the client is within its grace (3 s here:
    generous, its next request follows in milliseconds), and only a connection idle past it
    is closed for one. (The 3.5 s wait is the grace itself passing: nothing to await.)"""
    config = write_config(
        tmp_path,
        "[listener]\nmax_connections = 2\nkeep_alive_grace_s = 3\nkeep_alive_s = 30\n"
        "head_timeout_s = 30\nbody_min_bytes_per_s = 1024\n",
    )
    with sift_serve(tmp_path, config=config) as served, connect(served) as ahead:
        ahead.sendall(
            b"POST /v1/fetch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + served.fleet_key.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + b" " * 60000
        )
        with connect(served) as kept:
            assert _healthz_on(kept).startswith(b"HTTP/1.1 200")
            with connect(served) as newcomer:
                newcomer.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert_refusal(
                    read_all(newcomer), "503 Service Unavailable", "too_many_connections"
                )
            assert _healthz_on(kept).startswith(b"HTTP/1.1 200")  # the same connection
            time.sleep(3.5)
            with connect(served) as newcomer:
                newcomer.sendall(
                    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                )
                assert read_all(newcomer).startswith(b"HTTP/1.1 200")
            assert kept.recv(1) == b""  # closed silently to make room: it had sent nothing


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("listener.max_connections", "0", "listener.max_connections: must be at least 1"),
        ("listener.max_head_bytes", "0", "listener.max_head_bytes: must be at least 1"),
        ("listener.head_timeout_s", "0", "listener.head_timeout_s: must be positive"),
        ("listener.body_idle_timeout_s", "0", "listener.body_idle_timeout_s: must be positive"),
        ("listener.body_timeout_s", "-1", "listener.body_timeout_s: must be positive"),
        ("listener.write_timeout_s", "0", "listener.write_timeout_s: must be positive"),
        (
            "listener.keep_alive_grace_s",
            "-1",
            "listener.keep_alive_grace_s: must be 0 or more",
        ),
        (
            "listener.body_min_bytes_per_s",
            "0",
            "listener.body_min_bytes_per_s: must be at least 1",
        ),
        (
            "listener.allowed_origins",
            "tool.example",
            "listener.allowed_origins: bad origin 'tool.example'; use scheme://host[:port]",
        ),
        (
            "egress.own_addresses",
            "[::1]:99999",
            "egress.own_addresses: bad address '[::1]:99999'; use ip, ip:port or [v6]:port",
        ),
    ],
)
def test_listener_settings_are_validated(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={}, overrides={key: value})
    assert info.value.message == f"defaults: {message}"


def test_open_files_leave_room_for_the_reserve() -> None:
    assert effective_max_connections(1000, 1024) == 1024 - FD_RESERVE
    assert effective_max_connections(1000, 65536) == 1000
