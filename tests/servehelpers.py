"""A real `sift serve` subprocess on 127.0.0.1 for end-to-end tests.

The subprocess uses the system resolver, so tests hand it IP-literal URLs only (a local
upstream on 127.0.0.1, reachable because the test config lets fleet reach private
addresses): nothing it is asked to fetch needs DNS.
"""

from __future__ import annotations

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

from sift.keys import add_caller

SIFT = [sys.executable, "-m", "sift.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    base_url: str
    config: Path
    data_dir: Path
    fleet_key: str
    restricted_key: str
    proc: subprocess.Popen[str]
    output: str = ""  # everything the server printed, set once it has exited


def write_config(tmp_path: Path, extra: str = "") -> tuple[Path, str, str]:
    """A config with a fleet caller (private addresses allowed) and a restricted one."""
    cfg = tmp_path / "sift.toml"
    cfg.write_text(f"[classes.fleet]\nallow_private = true\n{extra}")
    fleet = add_caller(cfg, "ops", "fleet")
    restricted = add_caller(cfg, "agent", "restricted")
    return cfg, fleet, restricted


@dataclass(frozen=True)
class ServeSpec:
    """How to start one `sift serve` (see ``sift_serve``)."""

    config: tuple[Path, str, str]
    data_dir: Path
    listen_host: str = "127.0.0.1"


def _spawn(spec: ServeSpec) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            *SIFT,
            "serve",
            "--config",
            str(spec.config[0]),
            "--listen",
            f"{spec.listen_host}:{port}",
            "--data-dir",
            str(spec.data_dir),
            "--set",
            "render_workers=1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, f"http://127.0.0.1:{port}"


def _wait_up(proc: subprocess.Popen[str], base: str, deadline: float, healthy: bool) -> None:
    while True:
        try:
            answer = httpx.get(f"{base}/healthz", timeout=5)
            if healthy:
                answer.raise_for_status()
            return
        except httpx.TransportError as exc:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()  # first: reading a live server's output would wait forever
                out, _ = proc.communicate()  # and close the pipe, or a later test warns
                raise RuntimeError(f"sift serve did not start: {out}") from exc
            time.sleep(0.1)


def _stop(served: list[Served]) -> None:
    """SIGTERM every server first, then collect each one's output (they stop together)."""
    for s in served:
        if s.proc.poll() is None:
            s.proc.send_signal(signal.SIGTERM)
    for s in served:
        try:
            out, _ = s.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            out, _ = s.proc.communicate()
        s.output = out


@contextmanager
def sift_serves(specs: list[ServeSpec], *, start_timeout_s: float = 30) -> Iterator[list[Served]]:
    """Start every server at once, wait for each /healthz (``start_timeout_s`` for all of
    them), stop them together on exit: several nodes start in the time of about one."""
    procs: list[tuple[subprocess.Popen[str], str]] = []
    try:
        for spec in specs:
            procs.append(_spawn(spec))
        deadline = time.monotonic() + start_timeout_s
        for proc, base in procs:
            _wait_up(proc, base, deadline, healthy=True)
    except BaseException:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        raise
    served = [
        Served(base, spec.config[0], spec.data_dir, spec.config[1], spec.config[2], proc)
        for spec, (proc, base) in zip(specs, procs, strict=True)
    ]
    try:
        yield served
    finally:
        _stop(served)


@contextmanager
def sift_serve(
    tmp_path: Path,
    *,
    config: tuple[Path, str, str] | None = None,
    data_dir: Path | None = None,
    listen_host: str = "127.0.0.1",
    healthy: bool = True,
    start_timeout_s: float = 30,
) -> Iterator[Served]:
    """Start `sift serve`, wait for /healthz (``start_timeout_s``; any answer when ``healthy``
    is False), stop it with SIGTERM on exit.

    ``listen_host`` may be a name that resolves to 127.0.0.1 (``localhost``); the returned
    ``base_url`` always uses 127.0.0.1."""
    spec = ServeSpec(config or write_config(tmp_path), data_dir or tmp_path / "data", listen_host)
    proc, base = _spawn(spec)
    _wait_up(proc, base, time.monotonic() + start_timeout_s, healthy)
    served = Served(base, spec.config[0], spec.data_dir, spec.config[1], spec.config[2], proc)
    try:
        yield served
    finally:
        _stop([served])
