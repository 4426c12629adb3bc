"""Raw sockets against a real `sift serve` on 127.0.0.1: the listener tests' attackers."""

from __future__ import annotations

import json
import socket

from servehelpers import Served

TCP_ESTABLISHED = 1  # tcp_info.tcpi_state values (include/net/tcp_states.h)
TCP_CLOSE = 7


def connect(served: Served, *, rcvbuf: int | None = None) -> socket.socket:
    """A connection to ``served``; ``rcvbuf`` shrinks its receive buffer first (a client
    that reads nothing then holds as little of the answer as the kernel allows)."""
    host, port = served.base_url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect((host, int(port)))
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def parse(raw: bytes) -> tuple[str, dict[str, str], dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, json.loads(body)


def assert_refusal(raw: bytes, status: str, code: str) -> tuple[dict[str, str], dict[str, str]]:
    """``raw`` is one listener refusal: ``status``, closing, the envelope with ``code`` and a
    hint. Returns its headers and its error object."""
    line, headers, body = parse(raw)
    assert line == f"HTTP/1.1 {status}"
    assert headers["connection"] == "close"
    assert headers["content-type"] == "application/json"
    error = body["error"]
    assert isinstance(error, dict)
    assert error["code"] == code
    assert error["hint"]
    return headers, error


def tcp_state(sock: socket.socket) -> int:
    """The kernel's TCP state of ``sock`` (``TCP_ESTABLISHED``, ``TCP_CLOSE`` after a reset)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
