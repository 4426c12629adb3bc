"""The official MCP Inspector (CLI mode) against sift: tools/list and every tool, success and
error, over stdio (`sift mcp`) and over `/mcp` on a real `sift serve`.

The Inspector is the reference client: like the TypeScript SDK it checks every structured
result against the tool's `outputSchema` (an error whose structured content broke that
schema was reported as a client-side failure, hiding sift's error), and `--strict` checks
the tool schemas for portability. Its version is pinned in tools/mcp-inspector/
package-lock.json; the `inspector` fixture installs it there with `npm ci` and reuses it
while the lock file is unchanged. Without node and npm the tests skip with one line (in CI
they fail instead).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from servehelpers import SIFT, Served, sift_serve, write_config
from sift.api.auth import UNKNOWN_KEY_HINT
from sift.errors import Unauthorized
from syncupstream import SyncUpstream, serve_pages

REPO = Path(__file__).resolve().parent.parent
INSPECTOR_DIR = REPO / "tools" / "mcp-inspector"
INSPECTOR_BIN = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
STAMP = INSPECTOR_DIR / "node_modules" / ".sift-lock-sha256"
TOOLS = [
    "fetch",
    "batch_submit",
    "batch_status",
    "batch_results",
    "crawl",
    "map",
    "watch",
    "watches",
    "changes",
]
PAGE = (
    "<html><head><title>Inspected</title></head><body><article><h1>Heading</h1>"
    "<p>A paragraph long enough to be the main content of this small test page.</p>"
    "</article></body></html>"
)
CONTENT = "# Heading\n\nA paragraph long enough to be the main content of this small test page."
JOB_KEYS = {"id", "status", "error", "targets_total", "targets_done", "counts", "expires_at"}
# The Inspector's exit status for a call that worked but whose result is a tool error.
TOOL_IS_ERROR = 5
# Its exit status when the server refused the credentials (it then says why).
AUTH_REQUIRED = 3
# A loaded 2-core machine can take longer than the Inspector's 15 s default to start a
# `sift mcp` (Python, the MCP SDK) and answer initialize.
_WAIT = ("--connect-timeout", "90000")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _install() -> Path:
    """``npm ci`` the pinned Inspector into tools/mcp-inspector unless already there."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        message = "MCP Inspector tests need node and npm (apt-get install nodejs npm)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    lock = (INSPECTOR_DIR / "package-lock.json").read_bytes()
    digest = hashlib.sha256(lock).hexdigest()
    with open(INSPECTOR_DIR / ".install.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # two test runs must not npm ci at once
        if not (STAMP.exists() and STAMP.read_text() == digest and INSPECTOR_BIN.exists()):
            proc = subprocess.run(
                [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=INSPECTOR_DIR,
                capture_output=True,
                text=True,
                timeout=540,
                stdin=subprocess.DEVNULL,
            )
            if proc.returncode != 0:
                pytest.fail(f"npm ci in {INSPECTOR_DIR} failed:\n{proc.stderr[-3000:]}")
            STAMP.write_text(digest)
    return INSPECTOR_BIN


@pytest.fixture(scope="module")
def inspector() -> Path:
    return _install()


@dataclass(frozen=True)
class Outcome:
    returncode: int
    result: dict[str, Any]
    stderr: str


@dataclass(frozen=True)
class Inspector:
    """One way of reaching the server: the arguments naming it (last: a stdio command
    follows ``--``, so the Inspector takes none of its flags), and where the CLI may write."""

    bin: Path
    target: list[str]
    home: Path

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "MCP_CATALOG_PATH": str(self.home / "catalog.json"),
            "MCP_CLIENT_CONFIG_PATH": str(self.home / "client.json"),
        }

    def run(self, *method: str) -> Outcome:
        proc = subprocess.run(
            [str(self.bin), "--cli", "--format", "json", "-q", *_WAIT, *method, *self.target],
            capture_output=True,
            text=True,
            timeout=120,
            env=self._env(),
            stdin=subprocess.DEVNULL,
        )
        try:
            result = json.loads(proc.stdout)["result"]
        except (ValueError, KeyError) as exc:
            raise AssertionError(
                f"inspector exited {proc.returncode} without a result:\n"
                f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
            ) from exc
        return Outcome(proc.returncode, result, proc.stderr)

    def fail(self, *method: str) -> tuple[int, dict[str, Any]]:
        """A run that cannot connect: its exit status and the error object it prints."""
        proc = subprocess.run(
            [str(self.bin), "--cli", "--format", "json", "-q", *_WAIT, *method, *self.target],
            capture_output=True,
            text=True,
            timeout=120,
            env=self._env(),
            stdin=subprocess.DEVNULL,
        )
        assert proc.stdout == "", proc.stdout
        error: dict[str, Any] = json.loads(proc.stderr)["error"]
        return proc.returncode, error

    def call(self, tool: str, args: dict[str, Any]) -> Outcome:
        return self.run(
            "--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(args)
        )


def ok(outcome: Outcome) -> dict[str, Any]:
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.result.get("isError", False) is False
    return outcome.result


def tool_error(outcome: Outcome) -> dict[str, Any]:
    """The error object of a tool error the Inspector accepted (no client-side failure)."""
    assert outcome.returncode == TOOL_IS_ERROR, outcome.stderr
    result = outcome.result
    assert result["isError"] is True
    assert "structuredContent" not in result
    err: dict[str, Any] = result["_meta"]["sift/error"]
    assert result["content"] == [
        {"type": "text", "text": f"{err['code']}: {err['message']}\nhint: {err['hint']}"}
    ]
    return err


def check_list(insp: Inspector) -> None:
    listed = insp.run("--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in listed.result["tools"]] == TOOLS
    # --strict reports every portability problem of a tool schema on standard error, even
    # under -q (a `"type": [..., "null"]` was one): there must be none.
    assert listed.stderr == ""


def check_errors(insps: list[Inspector], job_id: str) -> None:
    """One failing call per tool, all at once (each is its own Inspector run), the i-th
    through ``insps[i]``."""
    calls = [
        ("fetch", {"url": "ftp://example.com/"}),
        ("batch_submit", {"urls": ["http://127.0.0.1:9/"], "options": {"robots": False}}),
        ("batch_status", {"id": "no-such-job"}),
        ("batch_results", {"id": job_id, "limit": 0}),
    ]
    with ThreadPoolExecutor(len(calls)) as pool:
        errors = list(pool.map(lambda i, c: tool_error(i.call(*c)), insps, calls))
    assert [(e["code"], e["message"]) for e in errors] == [
        ("invalid_url", "Only http and https URLs can be fetched, not ftp:."),
        ("invalid_request", "options: unknown option robots"),
        ("not_found", "no batch job 'no-such-job'"),
        ("invalid_request", "limit: expected an integer from 1 to 100"),
    ]
    assert errors[1]["hint"] == (
        "batch_submit options take: format, main_content, selector, exclude, max_bytes, "
        "max_age_s, engine, wait_for, actions, headers, cookies, screenshot."
    )


def check_fetch(insp: Inspector, url: str) -> None:
    result = ok(insp.call("fetch", {"url": url}))
    content, foot = (c["text"] for c in result["content"])
    assert content == CONTENT
    assert foot.startswith(f"---\ntitle: Inspected\nfinal_url: {url}\nstatus: 200 | ")


@pytest.fixture
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages({"/page": (PAGE, "text/html; charset=utf-8")}) as up:
        yield up


def test_inspector_over_stdio(inspector: Path, upstream: SyncUpstream, tmp_path: Path) -> None:
    # A fleet caller (private addresses allowed by the test config) named by --key, so the
    # test holds whatever `sift mcp` runs as without one.
    cfg, fleet, _restricted = write_config(tmp_path)
    url = f"{upstream.base_url}/page"

    def over_stdio(data_dir: Path) -> Inspector:
        server = [*SIFT, "mcp", "--config", str(cfg), "--data-dir", str(data_dir)]
        return Inspector(inspector, ["--", *server, "--key", fleet], tmp_path)

    def the_job_chain() -> None:
        # Every `sift mcp` is a new process on the same data directory: the job outlives it.
        # One at a time there: each run owns the data directory while it lives.
        insp = over_stdio(tmp_path / "data")
        submitted = ok(insp.call("batch_submit", {"urls": [url], "idempotency_key": "inspect-1"}))
        job = submitted["structuredContent"]
        assert set(job) == {*JOB_KEYS, "created"}
        assert (job["created"], job["targets_total"]) == (True, 1)
        # The Inspector exits right after the call: the job is handed to a finisher, or to
        # the next `sift mcp` — never failed as "sift restarted" (issue 21, item 10).
        for _ in range(20):  # each poll is a whole Inspector run and a new `sift mcp`
            status = ok(insp.call("batch_status", {"id": job["id"]}))["structuredContent"]
            if status["status"] not in ("queued", "running"):
                break
        assert set(status) == JOB_KEYS
        assert (status["id"], status["targets_total"]) == (job["id"], 1)
        assert (status["status"], status["error"], status["targets_done"]) == ("done", "", 1)
        page = ok(insp.call("batch_results", {"id": job["id"]}))["structuredContent"]
        assert (page["id"], page["next_offset"], [i["url"] for i in page["items"]]) == (
            job["id"],
            None,
            [url],
        )
        # The calls that need no job each on a data directory of their own, so all four
        # run at once (a `sift mcp` owns its data directory while it lives).
        alone = [over_stdio(tmp_path / f"data-error{i}") for i in range(3)]
        check_errors([*alone, insp], job["id"])

    # The job chain and the calls that need no job (each on a data directory of its own)
    # run side by side: every run starts a node process and a `sift mcp`.
    with ThreadPoolExecutor(3) as pool:
        chain = pool.submit(the_job_chain)
        listed = pool.submit(check_list, over_stdio(tmp_path / "data-list"))
        fetched = pool.submit(check_fetch, over_stdio(tmp_path / "data-fetch"), url)
        for done in (chain, listed, fetched):
            done.result()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with sift_serve(tmp_path_factory.mktemp("inspect-serve")) as s:
        yield s


def test_inspector_over_http(
    inspector: Path, upstream: SyncUpstream, served: Served, tmp_path: Path
) -> None:
    def over_http(key: str) -> Inspector:
        target = ["--server-url", f"{served.base_url}/mcp", "--transport", "http"]
        return Inspector(inspector, [*target, "--header", f"Authorization: Bearer {key}"], tmp_path)

    insp = over_http(served.fleet_key)
    url = f"{upstream.base_url}/page"
    check_list(insp)
    check_fetch(insp, url)

    submitted = ok(insp.call("batch_submit", {"urls": [url], "idempotency_key": "inspect-h"}))
    job = submitted["structuredContent"]
    assert (job["created"], job["targets_total"]) == (True, 1)
    for _ in range(100):  # the job runs in the server; each poll is a whole Inspector run
        status = ok(insp.call("batch_status", {"id": job["id"]}))["structuredContent"]
        if status["status"] not in ("queued", "running"):
            break
    assert (status["status"], status["targets_done"]) == ("done", 1)
    page = ok(insp.call("batch_results", {"id": job["id"]}))["structuredContent"]
    (item,) = page["items"]
    assert {k: item[k] for k in ("idx", "url", "status", "http_status", "title")} == {
        "idx": 0,
        "url": url,
        "status": "done",
        "http_status": 200,
        "title": "Inspected",
    }
    check_errors([insp] * 4, job["id"])

    # A restricted caller is refused loopback: the error names its way out (a fleet key).
    refused = tool_error(over_http(served.restricted_key).call("fetch", {"url": url}))
    assert refused["code"] == "blocked_address"
    assert "fleet key" in refused["hint"]
    assert upstream.hits["/page"] == 1  # the batch job was served the page fetch cached


def test_a_wrong_or_missing_key_shows_sifts_message_not_an_oauth_sign_in(
    inspector: Path, served: Served, tmp_path: Path
) -> None:
    """A 401 sends the Inspector (like the TypeScript SDK) into an OAuth sign-in ("Interactive
    OAuth requires a TTY…"); /mcp answers 403 with sift's error object, which it shows."""
    target = ["--server-url", f"{served.base_url}/mcp", "--transport", "http"]
    wrong = Inspector(inspector, [*target, "--header", "Authorization: Bearer wrong"], tmp_path)
    missing = Inspector(inspector, target, tmp_path)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda i: i.fail("--method", "tools/list"), [wrong, missing]))
    hints = [UNKNOWN_KEY_HINT, Unauthorized.default_hint]
    for (returncode, error), message, hint in zip(
        runs, ["unknown key", "missing Authorization header"], hints, strict=True
    ):
        assert returncode == AUTH_REQUIRED
        assert (error["code"], error["status"]) == ("auth_required", 403)
        body = error["message"].removeprefix("Error POSTing to endpoint: ")
        assert json.loads(body)["error"] == {
            "code": "unauthorized",
            "message": message,
            "hint": f"{hint} sift's /mcp has no OAuth sign-in: configure the key in the MCP "
            "client as the header 'Authorization: Bearer <key>'.",
        }


def test_why_sift_mcp_cannot_start_reaches_the_client(inspector: Path, tmp_path: Path) -> None:
    """A bad flag, or a key no caller has: the Inspector (quiet: it shows no server stderr)
    says sift's reason, not "Connection closed"."""
    cfg, _fleet, _restricted = write_config(tmp_path)
    server = [*SIFT, "mcp", "--config", str(cfg), "--data-dir", str(tmp_path / "data")]
    runs = [
        Inspector(inspector, ["--", *server, "--bogus"], tmp_path),
        Inspector(inspector, ["--", *server, "--class", "admin"], tmp_path),
        Inspector(inspector, ["--", *server, "--key", "nope"], tmp_path),
    ]
    with ThreadPoolExecutor(len(runs)) as pool:
        failed = list(pool.map(lambda i: i.fail("--method", "tools/list"), runs))
    assert [code for code, _ in failed] == [1, 1, 1]
    assert [error for _, error in failed] == [
        {
            "code": "error",
            "message": "sift mcp could not start: unrecognized arguments: --bogus "
            "(`sift mcp --help` lists its flags)",
        },
        {
            "code": "error",
            "message": "sift mcp could not start: argument --class: invalid choice: 'admin' "
            "(choose from 'fleet', 'restricted') (`sift mcp --help` lists its flags)",
        },
        {
            "code": "error",
            "message": "sift mcp could not start: --key: no caller with this key is configured "
            "(hint: Pass a key issued with `sift keys add` for this config, or use --class "
            "instead of --key.)",
        },
    ]
