"""`make serve` installs only what serving needs; `make test` adds the dev tools (issue 21
§7). Checked with the real Makefile under ``make -n`` (print, do not run) in a scratch
copy, so nothing is installed: which install each target would run, and that the stamps
never skip an install that is still needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SERVE_INSTALL = "pip install --quiet -e '.[browser]'"
DEV_INSTALL = "pip install --quiet -e '.[dev,browser]'"


def _dry_run(work: Path, target: str) -> list[str]:
    """The commands ``make <target>`` would run now."""
    out = subprocess.run(
        ["make", "-n", target], cwd=work, capture_output=True, text=True, check=True, timeout=30
    ).stdout
    return out.splitlines()


def _plan(work: Path, target: str) -> list[str]:
    """The install commands ``make <target>`` would run now."""
    return [line.split("python -m ", 1)[1] for line in _dry_run(work, target) if "-e '." in line]


def _age(path: Path, seconds_ago: int) -> None:
    t = path.stat().st_mtime - seconds_ago if path.exists() else 0
    os.utime(path, (t, t))


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_serve_installs_serving_extras_and_test_adds_dev(repo_root: Path, tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(repo_root / name, tmp_path / name)
    (tmp_path / ".venv").mkdir()
    serve_stamp, dev_stamp = tmp_path / ".venv/.installed-serve", tmp_path / ".venv/.installed"

    # A fresh clone: serving needs only the serving install, the tests the dev one.
    assert _plan(tmp_path, "serve") == [SERVE_INSTALL]
    assert _plan(tmp_path, "lint") == [DEV_INSTALL]

    # After `make serve`, serving installs nothing more, and the dev install is not skipped.
    serve_stamp.touch()
    assert _plan(tmp_path, "serve") == []
    assert _plan(tmp_path, "lint") == [DEV_INSTALL]

    # After `make test` (the dev install covers serving too, so it marks both done),
    # neither installs again.
    serve_stamp.unlink()
    assert "touch .venv/.installed-serve .venv/.installed" in _dry_run(tmp_path, "lint")
    dev_stamp.touch()
    serve_stamp.touch()
    for target in ("serve", "lint", "typecheck", "pytest"):
        assert _plan(tmp_path, target) == [], target

    # pyproject.toml changed: each installs again, its own way.
    _age(serve_stamp, 60)
    _age(dev_stamp, 60)
    assert _plan(tmp_path, "serve") == [SERVE_INSTALL]
    assert _plan(tmp_path, "lint") == [DEV_INSTALL]
