"""The README's command blocks run as printed (issue 21 §6), offline.

Every ``sh`` block of the README is either run here — with the ports, paths and
``.venv/bin/`` of this machine swapped in, next to servers the test starts on loopback —
or named in ``NOT_RUN`` with the reason it cannot run offline. A new block that is neither
fails ``test_every_command_block_is_run_or_named``.

The "Use from Python" example must be self-contained (issue 12 §6, issue 21 #15): it works
next to a running `make serve` or anything else, because its servers bind free ports (the
page server port 0, sift one found free) and it reads each server's address from what that
server printed. When a server cannot start, the example says so in one line and runs
nothing against anything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servehelpers import Served, sift_serve
from syncupstream import SyncUpstream, serve_pages

README = Path(__file__).resolve().parent.parent / "README.md"
BIN = Path(sys.executable).parent

# The README's sh blocks this file runs, by how each begins, and the test that runs it.
RUN = {
    "curl -s localhost:8080/healthz": "test_healthz_block",
    ".venv/bin/sift keys add indexer": "test_keys_block",
    ".venv/bin/sift batch urls.txt": "test_batch_block",
    "demo=$(mktemp -d)": "test_use_from_python_runs_as_printed",
}
# The ones another test file runs as printed.
RUN_ELSEWHERE = {
    "cat > mcp_demo.py <<'PY'": "tests/test_docs_demos.py::test_the_mcp_demo_runs_as_printed",
}
# The ones it does not run, and why.
NOT_RUN = {
    "make serve": "a server on the fixed port 8080 until Ctrl-C, and `make test` would run "
    "this very suite: test_make_install.py checks what each installs, test_stop.py the Ctrl-C",
    "curl -s localhost:8080/v1/fetch": "fetches example.com: not offline (tests stay on loopback)",
    "# Submit: URLs": "a batch of example.com URLs: not offline",
    "curl -s -X POST localhost:8080/v1/crawl": "crawls docs.example.com: not offline",
}


def _blocks(lang: str) -> list[str]:
    return [body for kind, body in re.findall(r"```(\w*)\n(.*?)```", README.read_text(), re.S)
            if kind == lang]  # fmt: skip


def _block(start: str) -> str:
    (block,) = [b for b in _blocks("sh") if b.startswith(start)]
    return block


def _run(
    script: str, cwd: Path, subs: dict[str, str], **env: str
) -> subprocess.CompletedProcess[str]:
    """``script`` under bash -e, with ``subs`` applied and this venv for ``.venv/bin/``;
    whatever it starts in the background is stopped when it ends."""
    for old, new in {".venv/bin/": f"{BIN}/", **subs}.items():
        script = script.replace(old, new)
    script = "trap 'kill $(jobs -p) 2> /dev/null || true' EXIT\n" + script
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=150,
        env={**os.environ, **env},
    )  # fmt: skip


def test_every_command_block_is_run_or_named() -> None:
    starts = [*RUN, *RUN_ELSEWHERE, *NOT_RUN]
    matched = [[s for s in starts if block.startswith(s)] for block in _blocks("sh")]
    assert all(len(m) == 1 for m in matched), matched  # each block: exactly one entry
    assert sorted(m[0] for m in matched) == sorted(starts)  # and no entry for a gone block
    tests = {name for name in globals() if name.startswith("test_")}
    assert set(RUN.values()) <= tests
    demos = (README.parent / "tests" / "test_docs_demos.py").read_text()
    assert all(f"def {ref.split('::')[1]}(" in demos for ref in RUN_ELSEWHERE.values())


@pytest.fixture(scope="module")
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages({"/a": ("<html><title>A</title><p>Page a.</p></html>", "text/html")}) as up:
        yield up


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with sift_serve(tmp_path_factory.mktemp("readme")) as s:
        yield s


def _at(served: Served) -> dict[str, str]:
    """The README's server address, swapped for the test server's."""
    address = served.base_url.removeprefix("http://")
    return {"localhost:8080": address, "127.0.0.1:8080": address}


def test_healthz_block(served: Served, tmp_path: Path) -> None:
    done = _run(_block("curl -s localhost:8080/healthz"), tmp_path, _at(served))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True


def test_keys_block(tmp_path: Path) -> None:
    done = _run(_block(".venv/bin/sift keys add indexer"), tmp_path, {})
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"sift_[A-Za-z0-9_-]{43}\n", done.stdout)
    assert done.stderr == (
        "caller 'indexer' (fleet) added to sift.toml; the key is shown only once; a running "
        "sift serve that reads this file picks it up within a second\n"
    )
    assert 'name = "indexer"\nclass = "fleet"' in (tmp_path / "sift.toml").read_text()


@pytest.mark.slow
def test_batch_block(served: Served, upstream: SyncUpstream, tmp_path: Path) -> None:
    """In-process (as the operator, on ./sift-data), then through the server with a key."""
    (tmp_path / "urls.txt").write_text(f"# one page\n{upstream.base_url}/a\n")
    done = _run(
        _block(".venv/bin/sift batch urls.txt"), tmp_path, _at(served), KEY=served.fleet_key
    )
    assert done.returncode == 0, done.stderr
    (line,) = (tmp_path / "results.ndjson").read_text().splitlines()
    item = json.loads(line)
    assert (item["status"], item["result"]["title"], item["result"]["content"]) == (
        "done",
        "A",
        "Page a.",
    )
    assert (tmp_path / "sift-data" / "sift.db").exists()  # the in-process run's own store
    assert done.stderr.count(" done: 1 done, 0 failed, 0 cancelled of 1 ") == 2


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
    script = script.replace(".venv/bin/", f"{BIN}/")
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
    script = script.replace(".venv/bin/", f"{BIN}/")
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
