"""Operating sift (issue 12 §6): bad paths, exit codes, JSON errors, SIFT_CONFIG, keys list /
remove / reload, a guarded /metrics, store errors without paths, `sift batch --new`."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from apphelpers import FLEET_KEY, RESTRICTED_KEY, auth, make_settings, running_app
from servehelpers import SIFT, sift_serve
from sift.cli import main
from sift.config import load_settings
from sift.keys import add_caller, list_callers
from syncupstream import SyncUpstream, serve_pages
from upstream import Upstream


@pytest.fixture(scope="module")
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages({"/p": ("page one", "text/plain")}) as up:
        yield up


def _one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--listen", "127.0.0.1:1"],
        ["fetch", "http://127.0.0.1:1/"],
        ["stats"],
        ["mcp"],
        ["batch", "URLS"],
    ],
)
def test_a_data_dir_that_is_a_file_is_one_line_and_exit_2(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "not-a-dir"
    file.write_text("")
    urls = tmp_path / "urls.txt"
    urls.write_text("http://127.0.0.1:1/\n")
    argv = [str(urls) if a == "URLS" else a for a in argv]
    assert main([*argv, "--data-dir", str(file)]) == 2
    line = _one_line(capsys.readouterr().err)
    if argv[0] == "stats":  # stats looks for the database first
        assert line == f"sift: data_dir: {file}: no database yet; run `sift serve` first"
    else:
        assert line == f"sift: data_dir: {file}: exists and is not a directory"


def test_other_bad_paths_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text("http://127.0.0.1:1/\n")
    data = str(tmp_path / "d")
    # A config path that is a directory; a --out in a missing directory; keys in a directory.
    assert main(["fetch", "http://127.0.0.1:1/", "--config", str(tmp_path)]) == 2
    assert _one_line(capsys.readouterr().err) == (f"sift: {tmp_path}: cannot read: Is a directory")
    out = tmp_path / "missing" / "out.ndjson"
    assert main(["batch", str(urls), "--data-dir", data, "--out", str(out)]) == 2
    assert _one_line(capsys.readouterr().err) == (f"sift: --out {out}: No such file or directory")
    assert main(["keys", "add", "x", "--class", "fleet", "--config", str(tmp_path)]) == 2
    assert _one_line(capsys.readouterr().err) == f"sift: {tmp_path}: Is a directory"
    # A database path that is a directory: the store cannot open it.
    (tmp_path / "d" / "sift.db").mkdir(parents=True)
    assert main(["stats", "--data-dir", data]) == 2
    assert _one_line(capsys.readouterr().err).startswith(
        f"sift: cannot open database {tmp_path / 'd' / 'sift.db'}: unable to open database file ("
    )


async def test_fetch_exit_status_says_the_upstream_failed(
    tmp_path: Path, upstream: SyncUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--data-dir", str(tmp_path / "d"), "--no-robots"]
    assert await asyncio.to_thread(main, ["fetch", f"{upstream.base_url}/p", *argv]) == 0
    assert capsys.readouterr().out == "page one\n"
    assert await asyncio.to_thread(main, ["fetch", f"{upstream.base_url}/gone", *argv]) == 3
    captured = capsys.readouterr()
    assert captured.out == "missing\n"  # the error page is still content
    assert captured.err == "sift: the upstream answered HTTP 404\n"


async def test_json_errors_are_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(tmp_path / "d")
    assert await asyncio.to_thread(main, ["fetch", "ftp://x/", "--data-dir", data, "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.err == ""
    error = json.loads(captured.out)["error"]
    assert (error["code"], set(error)) == ("invalid_url", {"code", "message", "hint"})
    assert main(["stats", "--data-dir", str(tmp_path / "none"), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "config_error"
    assert (
        error["message"]
        == f"data_dir: {tmp_path / 'none'}: no database yet; run `sift serve` first"
    )


def test_sift_config_names_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "elsewhere.toml"
    cfg.write_text('data_dir = "from-sift-config"\n')
    monkeypatch.setenv("SIFT_CONFIG", str(cfg))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sift.toml").write_text('data_dir = "from-cwd"\n')
    assert load_settings().data_dir == "from-sift-config"
    assert load_settings(tmp_path / "sift.toml").data_dir == "from-cwd"  # --config wins
    assert main(["keys", "add", "viaenv", "--class", "restricted"]) == 0
    capsys.readouterr()
    assert list_callers(cfg) == [("viaenv", "restricted")]
    assert "callers" not in (tmp_path / "sift.toml").read_text()


def test_keys_list_and_remove_keep_the_rest_of_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "sift.toml"
    cfg.write_text('# my settings\n[cache]\nmax_bytes = "2GiB"  # room to grow\n')
    first = add_caller(cfg, "one", "fleet")
    add_caller(cfg, "two", "restricted")
    assert main(["keys", "list", "--config", str(cfg)]) == 0
    assert capsys.readouterr().out == "one\tfleet\ntwo\trestricted\n"
    assert main(["keys", "remove", "two", "--config", str(cfg)]) == 0
    assert capsys.readouterr().err == (
        f"caller 'two' removed from {cfg}; a running sift serve that reads this file picks "
        "it up within a second\n"
    )
    text = cfg.read_text()
    assert text.startswith('# my settings\n[cache]\nmax_bytes = "2GiB"  # room to grow\n')
    settings = load_settings(cfg, env={})
    assert [c.name for c in settings.callers] == ["one"]
    assert settings.find_caller(first) is not None
    assert main(["keys", "list", "--config", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"name": "one", "class": "fleet"}]
    assert main(["keys", "remove", "two", "--config", str(cfg)]) == 2
    assert capsys.readouterr().err == f"sift: {cfg}: callers: no caller named 'two'\n"
    assert main(["keys", "remove", "one", "--config", str(cfg)]) == 0
    assert load_settings(cfg, env={}).callers == ()


def test_the_operator_name_is_reserved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "sift.toml"
    assert main(["keys", "add", "operator", "--class", "fleet", "--config", str(cfg)]) == 2
    assert "the name 'operator' is reserved for the local operator" in capsys.readouterr().err
    assert not cfg.exists()


async def _status_with(client: httpx.AsyncClient, key: str) -> int:
    return (await client.get("/v1/batch/no-such-job", headers=auth(key))).status_code


@pytest.mark.slow
async def test_keys_take_effect_without_a_restart(tmp_path: Path) -> None:
    # The config names the data directory, so `sift keys` finds the server that owns it.
    cfg = tmp_path / "sift.toml"
    cfg.write_text(f"data_dir = {json.dumps(str(tmp_path / 'data'))}\n")
    config = (cfg, add_caller(cfg, "ops", "fleet"), add_caller(cfg, "agent", "restricted"))
    with sift_serve(tmp_path, config=config, data_dir=tmp_path / "data") as served:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=10) as client:
            proc = await asyncio.create_subprocess_exec(
                *SIFT, "keys", "add", "late", "--class", "fleet", "--config", str(cfg),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            out, err = await proc.communicate()
            key = out.decode().strip()
            assert err.decode().endswith(
                f"{served.proc.pid}, listening on {served.base_url.removeprefix('http://')}) "
                "reloads its keys now\n"
            )
            # 404 (a job that does not exist) once the key is known, 401 before.
            deadline = time.monotonic() + 30
            while await _status_with(client, key) != 404:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert main(["keys", "remove", "late", "--config", str(cfg)]) == 0
            while await _status_with(client, key) != 401:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            # A config broken by hand is not loaded: the keys in force stay.
            cfg.write_text(cfg.read_text() + "bogus = 1\n")
            served.proc.send_signal(1)  # SIGHUP
            await asyncio.sleep(0.5)
            assert await _status_with(client, served.fleet_key) == 404
    assert "keys not reloaded, the old ones stay in force" in served.output
    assert "unknown key 'bogus'" in served.output


async def test_metrics_need_a_fleet_key_once_keys_exist(tmp_path: Path) -> None:
    """Issue 24 finding 11: /metrics answered anyone by default although keys existed."""
    async with (
        running_app(make_settings(tmp_path)) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        r = await client.get("/metrics")
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
        r = await client.get("/metrics", headers=auth(RESTRICTED_KEY))
        assert r.status_code == 401
        assert r.json()["error"]["message"] == (
            "GET /metrics needs a fleet caller's key (metrics_require_key = true)"
        )
        r = await client.get("/metrics", headers=auth(FLEET_KEY))
        assert r.status_code == 200 and "sift_" in r.text
    async with (
        running_app(make_settings(tmp_path / "open", metrics_require_key=False)) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        assert (await client.get("/metrics")).status_code == 200  # opened on purpose


async def test_store_errors_do_not_reveal_paths(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    async with (
        Upstream() as up,
        running_app(settings) as base,
        httpx.AsyncClient(base_url=base) as client,
    ):
        up.page("/p", "text", content_type="text/plain")
        # The store breaks under the running server (a table gone, as a damaged file would).
        with sqlite3.connect(settings.db_path) as conn:
            conn.execute("DROP TABLE robots")
        r = await client.post("/v1/fetch", json={"url": up.url("/p")}, headers=auth(FLEET_KEY))
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["code"] == "store_error"
    assert error["message"] == "database error: no such table: robots"
    assert str(tmp_path) not in r.text and "sift.db" not in r.text


async def test_batch_rerun_says_it_replays_and_new_fetches_again(
    tmp_path: Path, upstream: SyncUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text(f"{upstream.base_url}/p\n")
    argv = ["batch", str(urls), "--data-dir", str(tmp_path / "d"), "--set", "render_workers=1"]
    argv += ["--poll-s", "0.05", "--out", str(tmp_path / "out.ndjson")]
    assert await asyncio.to_thread(main, argv) == 0
    first = re.search(r"job ([0-9a-f]{24}) done", capsys.readouterr().err)
    assert first is not None
    hits = upstream.hits["/p"]
    assert await asyncio.to_thread(main, argv) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        f"sift: this list already ran as job {first[1]} (done); its stored results follow and "
        "nothing is fetched again — pass --new to fetch the list again\n"
    )
    assert upstream.hits["/p"] == hits
    assert (
        await asyncio.to_thread(main, [*argv, "--new", "--set", "cache.default_max_age_s=0"]) == 0
    )
    err = capsys.readouterr().err
    assert "already ran" not in err
    fresh = re.search(r"job ([0-9a-f]{24}) done", err)
    assert fresh is not None and fresh[1] != first[1]
    assert upstream.hits["/p"] == hits + 1
