"""Telling an MCP client why ``sift mcp`` cannot start.

A client that starts ``sift mcp`` (an agent, the MCP Inspector) talks JSON-RPC on its
standard input and output; what ``sift mcp`` writes on standard error before it exits — a
bad flag's usage error, an unknown ``--key``, a busy data directory — many clients never
show (the Inspector with ``-q``, most agents), so their user reads only "Connection
closed". Before exiting, ``sift mcp`` therefore also answers the client's first request
(``initialize``) with a JSON-RPC error carrying the same message, which clients show as the
reason the connection failed.

Plain JSON lines, no MCP SDK: it runs where the command line could not even be parsed. Only
when standard input is not a terminal (a person at a shell sees standard error), and for at
most ``wait_s`` (``REFUSAL_WAIT_S``): a client that sends nothing is not waited for longer.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from typing import Any, BinaryIO, Final

# How long ``sift mcp`` waits for the client's first request before it exits anyway.
REFUSAL_WAIT_S: Final = 10.0
# The JSON-RPC error code of the answer: the server cannot serve (JSON-RPC "internal error").
REFUSAL_CODE: Final = -32603
# The first request is one JSON line; a longer one is not an MCP client.
MAX_LINE_BYTES: Final = 1 << 20


def tell_client(
    message: str,
    data: dict[str, Any] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    wait_s: float = REFUSAL_WAIT_S,
) -> bool:
    """Answer the client's first request with a JSON-RPC error ``message`` (``data``: sift's
    error object, when there is one). Returns True if a request was answered; False when
    standard input is a terminal, ends, or brings no request within ``wait_s``."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    try:
        if os.isatty(stdin.fileno()):
            return False
        request_id = _first_request_id(stdin.fileno(), time.monotonic() + wait_s)
        if request_id is None:
            return False
        error: dict[str, Any] = {"code": REFUSAL_CODE, "message": message}
        if data is not None:
            error["data"] = data
        answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
        stdout.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
        stdout.flush()
        return True
    except (OSError, ValueError):
        return False  # the client went away (or there is no usable stdin): stderr has it


def _first_request_id(fd: int, deadline: float) -> int | str | None:
    """The id of the first JSON-RPC request read from ``fd`` before ``deadline``."""
    buffered = b""
    while True:
        newline = buffered.find(b"\n")
        if newline >= 0:
            line, buffered = buffered[:newline], buffered[newline + 1 :]
            found = _request_id(line)
            if found is not None:
                return found
            continue  # a notification, or noise: keep reading
        if len(buffered) > MAX_LINE_BYTES:
            return None
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        buffered += chunk


def _request_id(line: bytes) -> int | str | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id
