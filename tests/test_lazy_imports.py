"""Heavy libraries are imported where they are used, not at every `sift` start (issue 21,
item 3): the tests start hundreds of `sift` processes, and so does an operator's day. Each
check runs in a fresh interpreter (this one has imported everything already)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from servehelpers import SIFT, _children, write_config
from sift.browser.launcher import playwright_available


def modules_after(code: str, prefix: str) -> list[str]:
    """The modules named ``prefix`` or ``prefix.*`` a fresh interpreter holds after ``code``."""
    script = (
        f"import json, sys\n{code}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.partition('.')[0] == {prefix!r})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(proc.stdout.splitlines()[-1])
    return loaded


def test_serve_loads_the_mcp_sdk_only_when_mcp_is_called() -> None:
    """The MCP SDK is about a second of imports: `sift.mcp.http` imports it on the first
    `/mcp` request (tests/test_mcp_http.py makes those)."""
    assert modules_after("import sift.cli, sift.cli.serve, sift.server.app", "mcp") == []


def test_asking_whether_playwright_is_there_does_not_import_it() -> None:
    """Every `sift serve`, `sift fetch` and `sift mcp` asks at start (``build_browser``);
    Playwright itself is imported at the first launch."""
    assert playwright_available()  # installed here: the lookup, not a short cut, answers
    code = "from sift.browser.launcher import playwright_available\nprint(playwright_available())"
    assert modules_after(code, "playwright") == ["playwright"]  # the package, not its API


def test_sift_mcp_starts_its_render_workers_only_for_a_render(tmp_path: Path) -> None:
    """A one-shot MCP client (a `tools/list`, a `batch_status`) renders nothing: `sift mcp`
    answers without forking the render workers' fork server (which imports and warms the
    renderer); a fetch starts them (tests/test_mcp_stdio.py fetches)."""
    cfg, fleet, _ = write_config(tmp_path)
    proc = subprocess.Popen(
        [*SIFT, "mcp", "--config", str(cfg), "--data-dir", str(tmp_path / "d"), "--key", fleet],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    with proc, proc.stdin, proc.stdout:
        proc.stdin.write(json.dumps(INIT) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        children = _children(proc.pid)
    assert answer["result"]["serverInfo"]["name"] == "sift"
    assert children == []
    assert proc.returncode == 0


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
