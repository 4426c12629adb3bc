"""One owner per data directory: an OS lock held for the owning process's whole life.

Every command that opens the store (``serve``, in-process ``batch`` and ``fetch``, ``mcp``,
``stats``, ``batch reconcile``) first takes an exclusive ``flock`` on ``DATA_DIR/sift.lock``
and only then touches the database — so restart reconciliation (which fails the jobs a
*previous* run left in flight) can only ever run in the one process that owns the
directory, never in a second process next to a live server. The kernel drops the lock
when the process exits, however it exits (``kill -9`` included): there is no stale lock to
clean up.

The lock file also says who holds it (pid, command, and for ``sift serve`` the address it
listens on), so a second process can refuse with one line naming the owner. A server also
writes ``operator.json`` (mode 0600: readable only by the user who started it) with a
random operator key for this run; the in-process CLI commands use it to go through the
running server instead of refusing (see ``operator_credential``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sift.errors import ConfigError

LOCK_FILE: Final = "sift.lock"
OPERATOR_FILE: Final = "operator.json"
# A process that has just taken the lock may not have written its record yet.
OWNER_READ_ATTEMPTS: Final = 50
OWNER_READ_PAUSE_S: Final = 0.02


@dataclass(frozen=True)
class Owner:
    """Who holds a data directory's lock. ``listen`` is set for ``sift serve`` once bound;
    ``config`` is the absolute path of the config file it reads (for ``sift serve``, the
    file it reads its keys from, which may not exist yet; None: defaults only)."""

    pid: int
    command: str
    listen: str | None = None
    config: str | None = None

    def describe(self) -> str:
        where = f", listening on {self.listen}" if self.listen else ""
        return f"sift {self.command} (pid {self.pid}{where})"

    def base_url(self) -> str | None:
        """The URL to reach this server from the same host, or None if it is no server."""
        if self.listen is None:
            return None
        host, _, port = self.listen.rpartition(":")
        host = host.strip("[]")
        # A wildcard bind is reachable on loopback; a v6 address needs brackets in a URL.
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def prepare(data_dir: str | os.PathLike[str]) -> Path:
    """Create ``data_dir`` if missing. A path that cannot be a directory (a file, a
    directory without write permission, …) is a ``ConfigError`` with one line, not a
    traceback."""
    path = Path(data_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ConfigError(f"data_dir: {path}: exists and is not a directory") from exc
    except OSError as exc:
        raise ConfigError(f"data_dir: {path}: {exc.strerror or exc}") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"data_dir: {path}: not writable")
    return path


class DataDirLock:
    """The held lock on a data directory. Build it with ``try_acquire``; ``release()`` (or
    process exit) gives it up."""

    def __init__(self, fd: int, data_dir: Path, owner: Owner) -> None:
        self._fd: int | None = fd
        self.data_dir = data_dir
        self.owner = owner

    @classmethod
    def try_acquire(
        cls, data_dir: str | os.PathLike[str], command: str, *, config: str | None = None
    ) -> DataDirLock | Owner:
        """Lock ``data_dir`` for this process as ``command``, or return the ``Owner`` that
        holds it. ``data_dir`` must exist (see ``prepare``)."""
        path = Path(data_dir)
        lock_path = path / LOCK_FILE
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ConfigError(f"data_dir: {lock_path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise ConfigError(f"data_dir: {lock_path}: {exc.strerror or exc}") from exc
                return _read_owner(fd)
            finally:
                os.close(fd)
        config_path = None if config is None else str(Path(config).resolve())
        lock = cls(fd, path, Owner(os.getpid(), command, config=config_path))
        lock._write(lock.owner)
        return lock

    @classmethod
    def adopt(cls, fd: int, data_dir: str | os.PathLike[str], command: str) -> DataDirLock:
        """The lock held through ``fd``, a descriptor of the lock file inherited from the
        process that took it (the lock belongs to the open file, so it stays held while
        either process keeps it open): this process is recorded as its owner, as
        ``command``. How ``sift mcp`` hands its data directory to the process that
        finishes its jobs, with no moment in which another process could take it."""
        lock = cls(fd, Path(data_dir), Owner(os.getpid(), command))
        lock._write(lock.owner)
        return lock

    def fileno(self) -> int:
        """The lock file's descriptor (a child given it holds the lock too, see ``adopt``)."""
        assert self._fd is not None, "released"
        return self._fd

    def announce(self, listen: str) -> None:
        """Record the address this server is bound to (call once the port is bound)."""
        self.owner = Owner(self.owner.pid, self.owner.command, listen, self.owner.config)
        self._write(self.owner)

    def write_operator_key(self) -> str:
        """A fresh operator key for this run, written to ``operator.json`` (mode 0600).

        Anyone who can read that file can already read the database itself, so it grants
        nothing the file system did not. Returns the key."""
        key = "sift_op_" + secrets.token_urlsafe(32)
        path = self.data_dir / OPERATOR_FILE
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a crashed server's file: never reuse its mode or contents
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"pid": self.owner.pid, "key": key}, fh)
        return key

    def release(self) -> None:
        """Remove ``operator.json`` if this process wrote it, then unlock. Idempotent."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if _operator_record(self.data_dir).get("pid") == self.owner.pid:
                (self.data_dir / OPERATOR_FILE).unlink()
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None

    def _write(self, owner: Owner) -> None:
        assert self._fd is not None
        record = json.dumps(dataclasses.asdict(owner)).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, record, 0)


def owner_of(data_dir: str | os.PathLike[str]) -> Owner | None:
    """Who holds ``data_dir``'s lock right now, or None (no lock file, or nobody holds it)."""
    try:
        fd = os.open(Path(data_dir) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _read_owner(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_owner(fd: int) -> Owner:
    """The record of the process holding the lock (retried briefly: it may be writing it)."""
    for _ in range(OWNER_READ_ATTEMPTS):
        raw = os.pread(fd, 4096, 0)
        try:
            data = json.loads(raw)
            return Owner(
                int(data["pid"]), str(data["command"]), data.get("listen"), data.get("config")
            )
        except (ValueError, KeyError, TypeError):
            time.sleep(OWNER_READ_PAUSE_S)
    return Owner(0, "(unknown command)")


def _operator_record(data_dir: Path) -> dict[str, object]:
    try:
        data = json.loads((data_dir / OPERATOR_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def operator_credential(data_dir: str | os.PathLike[str], owner: Owner) -> tuple[str, str] | None:
    """``(base_url, key)`` to reach the server that owns ``data_dir`` as the operator, or
    None when the owner is no server or its key file is missing or not readable to us."""
    url = owner.base_url()
    record = _operator_record(Path(data_dir))
    key = record.get("key")
    if url is None or record.get("pid") != owner.pid or not isinstance(key, str):
        return None
    return url, key


def busy(data_dir: str | os.PathLike[str], owner: Owner, advice: str) -> ConfigError:
    """The one-line refusal for a directory another process owns."""
    return ConfigError(f"data_dir: {data_dir}: in use by {owner.describe()}; {advice}")


def own(
    data_dir: str | os.PathLike[str], command: str, *, config: str | None = None, advice: str
) -> DataDirLock:
    """Create and lock ``data_dir`` for this process, or refuse naming its owner (``advice``
    ends the line)."""
    prepare(data_dir)
    got = DataDirLock.try_acquire(data_dir, command, config=config)
    if isinstance(got, Owner):
        raise busy(data_dir, got, advice)
    return got


def own_or_delegate(
    data_dir: str | os.PathLike[str], command: str, *, config: str | None = None
) -> DataDirLock | tuple[Owner, str, str]:
    """Lock ``data_dir`` for an in-process command or — when a running ``sift serve`` owns
    it and its operator key is readable to us — ``(owner, url, key)`` to go through that
    server instead. Any other owner is refused with one line."""
    prepare(data_dir)
    got = DataDirLock.try_acquire(data_dir, command, config=config)
    if isinstance(got, DataDirLock):
        return got
    credential = operator_credential(data_dir, got)
    if credential is None:
        raise busy(data_dir, got, "wait for it to finish, use --server, or another --data-dir")
    return (got, *credential)
