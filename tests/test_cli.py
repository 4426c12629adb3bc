"""The `sift` command: keys, bad configuration, and a real `sift serve` subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from browserhelpers import BROWSER_STATE
from servehelpers import SIFT, free_port, sift_serve
from sift.cli import main
from sift.config import load_settings


def test_keys_add_prints_key_once_and_stores_only_its_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "sift.toml"
    assert main(["keys", "add", "indexer", "--class", "fleet", "--config", str(cfg)]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("sift_") and len(key) > 40
    text = cfg.read_text()
    assert key not in text
    settings = load_settings(cfg, env={})
    assert [(c.name, c.caller_class) for c in settings.callers] == [("indexer", "fleet")]
    assert settings.callers[0].key_sha256 == hashlib.sha256(key.encode()).hexdigest()
    assert settings.find_caller(key) == settings.callers[0]
    # A second caller appends; a duplicate name is refused and leaves the file as it was.
    assert main(["keys", "add", "agent", "--class", "restricted", "--config", str(cfg)]) == 0
    before = cfg.read_text()
    assert main(["keys", "add", "agent", "--class", "fleet", "--config", str(cfg)]) == 2
    assert cfg.read_text() == before
    err = capsys.readouterr().err
    assert "a caller named 'agent' already exists" in err


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[classes.restricted]\nallow_private = true\n", "classes.restricted.allow_private"),
        ('[cache]\nmax_bytes = "huge"\n', "cache.max_bytes: bad size 'huge'"),
        ("bogus = 1\n", "bogus: unknown setting"),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path: Path, toml: str, expected: str) -> None:
    cfg = tmp_path / "sift.toml"
    cfg.write_text(toml)
    listen = ["--listen", f"127.0.0.1:{free_port()}"]
    proc = subprocess.run(
        # A bad config refuses before the data directory and the port are taken; were that
        # to change, nothing lands in the working directory or on a fixed port.
        [*SIFT, "serve", "--config", str(cfg), "--data-dir", str(tmp_path / "data"), *listen],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"sift: {cfg}: ") and expected in lines[0]
    assert "Traceback" not in proc.stderr


def test_anonymous_serve_refuses_a_public_bind(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*SIFT, "serve", "--listen", f"0.0.0.0:{free_port()}", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SIFT_LISTEN": ""},
    )
    assert proc.returncode == 2
    assert "no callers are configured" in proc.stderr


def test_serve_answers_healthz_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    with sift_serve(tmp_path) as served:
        r = httpx.get(f"{served.base_url}/healthz", timeout=5)
        assert r.status_code == 200
        assert r.json() == {"ok": True, "version": "0.1.0", "browser": BROWSER_STATE}
        assert (served.data_dir / "sift.db").exists()
    # sift_serve stops it with SIGTERM: a clean exit, no traceback.
    assert served.proc.returncode == 0, served.output
    assert "Traceback" not in served.output
    # One JSON access-log line per request, flushed at shutdown at the latest.
    lines = [json.loads(ln) for ln in served.output.splitlines() if ln.startswith('{"ts":')]
    assert [(ln["method"], ln["route"], ln["status"]) for ln in lines][-1] == (
        "GET",
        "/healthz",
        200,
    )
