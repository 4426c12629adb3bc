"""The browser in the two commands: ``tools/browser-setup`` (run by ``make serve``) and the
browser's state where an operator looks (``sift stats``; ``/healthz`` is in test_browser.py).

The setup script is run with a PATH holding no ``apt-get`` and with ``HTTPS_PROXY`` pointing at
a closed loopback port, so no case here can install anything or reach the network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from browserhelpers import BROWSER_STATE
from sift.dcache import DB

REPO = Path(__file__).resolve().parent.parent
SETUP = REPO / "tools" / "browser-setup"
SIFT = [sys.executable, "-m", "sift.cli"]


def _fake_chromium(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 'HeadlessChrome 130.0'\n")
    path.chmod(0o755)
    return path


def setup(tmp_path: Path, python: str, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"  # what the script needs, and no apt-get
    bin_dir.mkdir(exist_ok=True)
    for tool in ("bash", "id", "timeout"):
        found = shutil.which(tool)
        assert found is not None
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    base = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path / "home"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "SIFT_BROWSER_SETUP_TIMEOUT_S": "5",
        "BROWSER_SETUP_DEBIAN_SHELL": str(tmp_path / "no-debian-shell"),
        "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "ms-playwright"),
    }
    return subprocess.run(
        [str(SETUP), python], env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def test_debian_shell_installed_nothing_to_do(tmp_path: Path) -> None:
    debian = _fake_chromium(tmp_path / "debian" / "chromium-headless-shell")
    proc = setup(tmp_path, "/bin/false", BROWSER_SETUP_DEBIAN_SHELL=str(debian))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_nothing_possible_says_how_in_one_line(tmp_path: Path) -> None:
    """No Debian package, no apt-get, no Playwright: one line, and success (sift serves)."""
    proc = setup(tmp_path, "/bin/false")
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr == (
        "browser-setup: no Chromium: sift serves without the browser (engine auto stays on "
        "HTTP). To add it: apt-get install --no-install-recommends chromium-headless-shell "
        "(as root), or /bin/false -m playwright install chromium-headless-shell; "
        "see docs/browser.md#setup\n"
    )


def test_playwright_download_is_handed_to_sift(tmp_path: Path) -> None:
    """A headless shell already in Playwright's folder is found (no download) and printed,
    for ``make serve`` to pass on as SIFT_BROWSER_EXECUTABLE."""
    exe = _fake_chromium(
        tmp_path
        / "ms-playwright"
        / "chromium_headless_shell-1169"
        / "chrome-linux"
        / "headless_shell"
    )
    proc = setup(tmp_path, sys.executable)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{exe}\n", "")
    # An operator's own choice is never overridden.
    mine = setup(tmp_path, sys.executable, SIFT_BROWSER_EXECUTABLE="/opt/my/chromium")
    assert (mine.returncode, mine.stdout, mine.stderr) == (0, "", "")


def _stats(data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SIFT, "stats", "--data-dir", str(data), "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_stats_says_whether_the_browser_is_there(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    DB.open(data / "sift.db", max_bytes=1 << 20).close()
    missing = tmp_path / "no-chromium"
    proc = _stats(data, SIFT_BROWSER_EXECUTABLE=str(missing))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["browser"] == {
        "state": "absent",
        "absent_reason": f"Chromium is not installed here ({missing} not found)",
    }
    text = subprocess.run(
        [*SIFT, "stats", "--data-dir", str(data)],
        env={**os.environ, "SIFT_BROWSER_EXECUTABLE": str(missing)},
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert (
        f"browser   absent: Chromium is not installed here ({missing} not found); "
        "0 pages loaded (see docs/browser.md)\n"
    ) in text
    here = json.loads(_stats(data).stdout)["browser"]
    assert here["state"] == BROWSER_STATE
