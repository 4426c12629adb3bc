"""Real Chromium for the browser tests: Debian's chromium-headless-shell, or a skip.

A machine without it skips the browser tests with one line saying how to get it; under CI
(``CI=true``) a missing browser fails instead, because ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sift.browser.launcher import playwright_available
from sift.config import BrowserSettings

CHROMIUM = BrowserSettings().executable
HAVE_BROWSER = os.access(CHROMIUM, os.X_OK) and playwright_available()
BROWSER_STATE = "ready" if HAVE_BROWSER else "absent"
HOW_TO_GET = (
    "no Chromium: apt-get install --no-install-recommends chromium-headless-shell "
    "(and pip install -e '.[browser]'); see docs/browser.md"
)


def require_browser() -> None:
    """Skip (fail under CI) when Chromium or Playwright is missing."""
    if HAVE_BROWSER:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run the browser tests: {HOW_TO_GET}")
    pytest.skip(HOW_TO_GET)


def browser_pids() -> list[int]:
    """Every running Chromium process that is a descendant of this test process."""
    me = os.getpid()
    parents: dict[int, int] = {}
    exes: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            exes[int(entry.name)] = os.readlink(entry / "exe")
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def descends(pid: int) -> bool:
        seen = 0
        while pid > 1 and seen < 64:
            pid = parents.get(pid, 0)
            if pid == me:
                return True
            seen += 1
        return False

    return [p for p, exe in exes.items() if exe == CHROMIUM and descends(p)]
