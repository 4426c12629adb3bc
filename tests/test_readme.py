"""The README's "Use from Python" example runs as printed and prints what the README shows.

It must be self-contained (issue 12 §6, issue 21 #15): it works next to a running `make
serve` or anything else, because its servers bind free ports (the page server port 0, sift
one found free) and it reads each server's address from what that server printed. When a
server cannot start, the example says so in one line and runs nothing against anything.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from servehelpers import sift_serve

MARKER = "A runnable example — self-contained"


def _example(readme: str) -> tuple[str, str]:
    """The shell block after the marker and the output block after it."""
    rest = readme[readme.index(MARKER) :]
    blocks = re.findall(r"```(\w*)\n(.*?)```", rest, flags=re.S)
    (lang, script), (_, output) = blocks[0], blocks[1]
    assert lang == "sh"
    return script, output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_use_from_python_runs_as_printed(repo_root: Path) -> None:
    script, expected = _example((repo_root / "README.md").read_text())
    bin_dir = Path(sys.executable).parent
    script = script.replace(".venv/bin/", f"{bin_dir}/")
    assert "--listen 127.0.0.1:$port " in script and "http.server 0 " in script
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=150, cwd=repo_root
    )
    assert proc.stdout == expected, proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_use_from_python_says_in_one_line_when_its_server_cannot_start(
    repo_root: Path, tmp_path: Path
) -> None:
    """Its sift cannot bind (here: the example is pointed at a port another sift serve
    holds): one line names the reason, and the client never runs."""
    script, _ = _example((repo_root / "README.md").read_text())
    bin_dir = Path(sys.executable).parent
    script = script.replace(".venv/bin/", f"{bin_dir}/")
    with sift_serve(tmp_path) as other:
        taken = other.base_url.rsplit(":", 1)[1]
        failing = subprocess.run(
            ["bash", "-c", script.replace("127.0.0.1:$port ", f"127.0.0.1:{taken} ")],
            capture_output=True, text=True, timeout=150, cwd=repo_root,
        )  # fmt: skip
    assert failing.stdout == ""  # the client never ran, against no server
    lines = [line for line in failing.stderr.splitlines() if line.startswith("demo:")]
    assert lines == [
        f"demo: server did not start: sift: listen: 127.0.0.1:{taken}: cannot bind: "
        "Address already in use"
    ], failing.stderr
