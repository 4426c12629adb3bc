"""A real `sift serve` subprocess for the benchmarks, and a look at its processes.

``sift_serve(config, data_dir)`` starts ``python -m sift.cli serve`` on a free loopback
port, waits for ``/healthz`` to answer 200 (60 s at most), yields the running ``Serve``, and
stops it with SIGTERM (SIGKILL after 30 s). ``descendants(pid)`` lists every process under
the server — its render workers are children of its fork server, not of the server itself
(``src/sift/workers/process.py``); ``cpu_s(pid)`` is a process's CPU time so far.

Loopback only: the server listens on 127.0.0.1.

Data: none (a helper of ``bench/fairness.py`` and ``bench/batch.py``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

SIFT = [sys.executable, "-m", "sift.cli"]
HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Serve:
    """A running `sift serve`."""

    proc: subprocess.Popen[bytes]
    base_url: str
    port: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@contextmanager
def sift_serve(config: Path, data_dir: Path, *extra: str) -> Iterator[Serve]:
    """`sift serve --config config --data-dir data_dir *extra`, up and healthy."""
    port = free_port()
    proc = subprocess.Popen(
        [*SIFT, "serve", "--config", str(config), "--listen", f"{HOST}:{port}",
         "--data-dir", str(data_dir), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://{HOST}:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            httpx.get(f"{base}/healthz", timeout=1).raise_for_status()
            break
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("sift serve did not start") from None
            time.sleep(0.1)
    try:
        yield Serve(proc, base, port)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid``, from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
        if ppid == pid:
            out.append(int(stat.parent.name))
    return out


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``, children first."""
    out = []
    for child in children(pid):
        out += [child, *descendants(child)]
    return out


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (its threads included)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
