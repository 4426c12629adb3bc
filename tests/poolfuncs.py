"""Jobs for render-pool tests. A module of its own: pool workers import it by name."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sift.errors import UnsupportedContentType


def echo(value: str) -> tuple[str, int]:
    return value, os.getpid()


def refuse(message: str) -> None:
    raise UnsupportedContentType(message, hint="a hint from the worker")


def backtrack(n: int) -> bool:
    """Catastrophic regex backtracking: minutes inside C code that never checks signals."""
    return re.match(r"(a+)+$", "a" * n + "b") is not None


def die_once(marker: str) -> int:
    """Kill this worker the first time (the marker file records it), answer the second."""
    path = Path(marker)
    if not path.exists():
        path.write_text("died")
        os._exit(9)
    return os.getpid()


def die() -> None:
    os._exit(9)


def allocate(nbytes: int) -> int:
    return len(bytearray(nbytes))


def nap(value: str, seconds: float) -> str:
    """A render that takes ``seconds`` of wall-clock time, then answers ``value``."""
    import time

    time.sleep(seconds)
    return value


def announce_then_backtrack(marker: str, n: int) -> bool:
    """Say "running" (the marker file holds this worker's pid), then backtrack for minutes."""
    Path(marker).write_text(str(os.getpid()))
    return backtrack(n)


def announce_then_wait(marker: str, release: str) -> int:
    """Say "running" (the marker file holds this worker's pid), then wait until the file
    ``release`` exists (at most 60 s); answer this worker's pid."""
    import time

    Path(marker).write_text(str(os.getpid()))
    end = time.monotonic() + 60
    while not Path(release).exists() and time.monotonic() < end:
        time.sleep(0.01)
    return os.getpid()


_REMEMBERED: list[str] = []


def remember(value: str) -> str | None:
    """Keep ``value`` in this worker's memory; answer what the previous job kept, if any."""
    previous = _REMEMBERED[-1] if _REMEMBERED else None
    _REMEMBERED.append(value)
    return previous
