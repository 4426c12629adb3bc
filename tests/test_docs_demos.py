"""The docs' demos that start their own servers pick free ports and run as printed (issue 21
#15): they once all used port 8765, and when another program held it they crawled and
fetched that program's pages without an error.

A site server in a demo binds port 0 (the system picks a free port) and the demo reads the
address from what the server printed, so whatever else listens on this machine, the demo
reads only its own pages. Each runnable demo here runs in a temporary directory and must
print exactly what its doc shows, the port aside. (The README's Python example, which also
starts a `sift serve`, is run by test_readme.py.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = (
    "README.md",
    *(f"docs/{p.name}" for p in (Path(__file__).parent.parent / "docs").glob("*.md")),
)
PORT_RE = re.compile(r"127\.0\.0\.1:\d+")


def _blocks_after(text: str, marker: str) -> list[tuple[str, str]]:
    """The fenced blocks after ``marker``: (language, text)."""
    return re.findall(r"```(\w*)\n(.*?)```", text[text.index(marker) :], flags=re.S)


def _block_after(text: str, marker: str) -> str:
    """The first block after ``marker``, a shell block."""
    lang, script = _blocks_after(text, marker)[0]
    assert lang == "sh"
    return script


def _with_bin(script: str) -> tuple[str, dict[str, str]]:
    """The script with ``.venv/bin/`` pointing at this interpreter's, and an environment with
    that directory first on PATH (what ``. .venv/bin/activate`` does)."""
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(Path.home())}
    return script.replace(".venv/bin/", f"{bin_dir}/"), env


def test_every_demo_site_server_binds_port_0(repo_root: Path) -> None:
    """No doc starts `python3 -m http.server` on a fixed port."""
    fixed = []
    for name in DOCS:
        text = (repo_root / name).read_text()
        for m in re.finditer(r"http\.server\s+(\d+)", text):
            if m.group(1) != "0":
                fixed.append(f"{name}: {m.group(0)}")
    assert fixed == []
    # Nor a hand-made server on a fixed port in a Python demo.
    for name in DOCS:
        text = (repo_root / name).read_text()
        assert re.findall(r"HTTPServer\(\(\"127\.0\.0\.1\", [1-9]\d*\)", text) == [], name


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_crawl_demo_runs_as_printed(repo_root: Path, tmp_path: Path) -> None:
    script = _block_after((repo_root / "docs/crawl.md").read_text(), "## Try it on a local site")
    expected = [line[2:] for line in script.splitlines() if re.match(r"# (\d|http)", line)]
    assert len(expected) == 6
    script, env = _with_bin(script)
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=100, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / "demo" / "site.log").read_text()
    port = re.search(r"port (\d+) ", log)
    assert port is not None, log
    # The printed port is an example: the demo's own server got another one.
    shown = [PORT_RE.sub(f"127.0.0.1:{port.group(1)}", line) for line in expected]
    assert proc.stdout.splitlines() == shown, proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_mcp_demo_runs_as_printed(repo_root: Path, tmp_path: Path) -> None:
    readme = (repo_root / "README.md").read_text()
    marker = "A runnable example with the SDK's own client"
    script, env = _with_bin(_block_after(readme, marker))
    expected = _blocks_after(readme, marker)[1][1]
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=100, cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert PORT_RE.sub("PORT", proc.stdout) == PORT_RE.sub("PORT", expected), proc.stderr
