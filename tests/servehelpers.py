"""A real `sift serve` subprocess on 127.0.0.1 for end-to-end tests.

A thread reads the server's output as it comes (``Served.output`` once it has exited): a
server that logs a lot must never block on a full pipe (a long benchmark run did).

The subprocess uses the system resolver, so tests hand it IP-literal URLs only (a local
upstream on 127.0.0.1, reachable because the test config lets fleet reach private
addresses): nothing it is asked to fetch needs DNS.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sift.keys import add_caller

SIFT = [sys.executable, "-m", "sift.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def closed_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port on ``host`` that refuses every connection while the block runs: bound, so no
    other process can start listening on it meanwhile, but not listening."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        yield int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid``, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (children first), from /proc."""
    found = []
    for child in _children(pid):
        found += [child, *_descendants(child)]
    return found


class _Drain:
    """Collects a process's output on a thread of its own."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._stream = proc.stdout
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            self._lines.append(line)

    def text(self) -> str:
        """Everything read, once the process has exited (its end of the pipe is closed)."""
        self._thread.join(10)
        self._stream.close()
        return "".join(self._lines)


@dataclass
class Served:
    base_url: str
    config: Path
    data_dir: Path
    fleet_key: str
    restricted_key: str
    proc: subprocess.Popen[str]
    output: str = ""  # everything the server printed, set once it has exited
    drain: _Drain | None = field(default=None, repr=False)

    def kill_hard(self) -> None:
        """The whole service dies at once, as on an OOM kill or a power cut: the server and
        every process under it — the render workers' fork server and the workers forked
        from it — which would otherwise hold its output open."""
        for pid in [self.proc.pid, *_descendants(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(30)

    def wait_output(self, timeout_s: float = 30) -> str:
        """Wait for the server to exit (killed after ``timeout_s``); its whole output."""
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.drain is not None:
            self.output = self.drain.text()
            self.drain = None
        return self.output


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


def _spawn(spec: ServeSpec) -> tuple[subprocess.Popen[str], _Drain, str]:
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
    return proc, _Drain(proc), f"http://127.0.0.1:{port}"


class _PortTaken(Exception):
    """The port ``free_port`` found was taken by someone else before the server bound it."""


def _wait_up(
    proc: subprocess.Popen[str], drain: _Drain, base: str, deadline: float, healthy: bool
) -> None:
    while True:
        try:
            answer = httpx.get(f"{base}/healthz", timeout=5)
            if healthy:
                answer.raise_for_status()
            return
        except httpx.TransportError as exc:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                output = drain.text()
                if f"{base.rpartition(':')[2]}: cannot bind: " in output:
                    raise _PortTaken(output) from exc
                raise RuntimeError(f"sift serve did not start: {output}") from exc
            time.sleep(0.1)


def _start(
    spec: ServeSpec,
    deadline: float,
    healthy: bool,
    spawned: tuple[subprocess.Popen[str], _Drain, str] | None = None,
) -> tuple[subprocess.Popen[str], _Drain, str]:
    """Wait for a server (``spawned``, else a new one) to answer /healthz; one whose port
    was taken between ``free_port`` and its bind (another process on the machine got it
    first) is started again on another port, up to 5 times."""
    for _ in range(5):
        proc, drain, base = spawned or _spawn(spec)
        spawned = None
        try:
            _wait_up(proc, drain, base, deadline, healthy)
        except _PortTaken:
            continue
        return proc, drain, base
    raise RuntimeError("sift serve: 5 ports in a row were taken before it could bind them")


def _stop(served: list[Served]) -> None:
    """SIGTERM every server first, then collect each one's output (they stop together)."""
    for s in served:
        if s.proc.poll() is None:
            s.proc.send_signal(signal.SIGTERM)
    for s in served:
        s.wait_output()


@contextmanager
def sift_serves(specs: list[ServeSpec], *, start_timeout_s: float = 30) -> Iterator[list[Served]]:
    """Start every server at once, wait for each /healthz (``start_timeout_s`` for all of
    them), stop them together on exit: several nodes start in the time of about one."""
    procs: list[tuple[subprocess.Popen[str], _Drain, str]] = []
    try:
        for spec in specs:
            procs.append(_spawn(spec))
        deadline = time.monotonic() + start_timeout_s
        for i, spec in enumerate(specs):
            procs[i] = _start(spec, deadline, True, procs[i])
    except BaseException:
        for proc, drain, _ in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            drain.text()
        raise
    served = [
        Served(base, spec.config[0], spec.data_dir, spec.config[1], spec.config[2], proc, "", drain)
        for spec, (proc, drain, base) in zip(specs, procs, strict=True)
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
    proc, drain, base = _start(spec, time.monotonic() + start_timeout_s, healthy)
    served = Served(
        base, spec.config[0], spec.data_dir, spec.config[1], spec.config[2], proc, "", drain
    )
    try:
        yield served
    finally:
        _stop([served])
