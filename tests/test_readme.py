"""The README's "Use from Python" example runs as printed and prints what the README shows.

It must be self-contained (issue 12 §6): it works next to a running `make serve`, so here it
runs while another `sift serve` already answers /healthz on the example's port — the wait
loop must not mistake that server for its own. Ports are swapped for free ones (loopback).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from servehelpers import free_port, sift_serve

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
def test_use_from_python_runs_as_printed(repo_root: Path, tmp_path: Path) -> None:
    script, expected = _example((repo_root / "README.md").read_text())
    bin_dir = Path(sys.executable).parent
    site_port = free_port()
    script = script.replace(".venv/bin/", f"{bin_dir}/").replace("8765", str(site_port))
    # The example's sift port is already taken by another sift serve, as by `make serve`.
    with sift_serve(tmp_path) as other:
        sift_port = other.base_url.rsplit(":", 1)[1]
        failing = subprocess.run(
            ["bash", "-c", script.replace("8766", sift_port)],
            capture_output=True, text=True, timeout=150, cwd=repo_root,
        )  # fmt: skip
    assert failing.stdout.startswith("sift serve failed: sift: listen: 127.0.0.1:"), failing
    assert "cannot bind: Address already in use" in failing.stdout
    assert "Hello miss" not in failing.stdout  # it never talked to the other server as its own
    proc = subprocess.run(
        ["bash", "-c", script.replace("8766", str(free_port()))],
        capture_output=True, text=True, timeout=150, cwd=repo_root,
    )  # fmt: skip
    assert proc.stdout == expected, proc.stderr
