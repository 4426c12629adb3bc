"""Settings: defaults, the documented TOML format, env and flag overrides, every bad case."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sift.config import Settings, iter_fields, load_settings, parse_size
from sift.errors import ConfigError

EXAMPLE = """
listen = "127.0.0.1:8080"
data_dir = "sift-data"
[cache]
max_bytes = "1GiB"
[batch]
max_bytes = "256MiB"
ttl_s = 86400
concurrency = 32
per_host = 4
[classes.fleet]
output_cap = "1MiB"
live_jobs = 20
max_targets = 10000
allow_private = false      # true: this class may reach private/loopback addresses
max_download_bytes = "16MiB"
timeout_s = 30
[classes.restricted]
output_cap = "64KiB"
live_jobs = 2
max_targets = 500
max_download_bytes = "8MiB"
timeout_s = 20
[[callers]]
name = "indexer"
class = "fleet"
key_sha256 = "%s"
"""
DIGEST = hashlib.sha256(b"secret-key").hexdigest()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sift.toml"
    path.write_text(text)
    return path


def test_defaults_match_the_documented_table() -> None:
    s = load_settings(None, env={})
    assert s == Settings()
    assert s.listen == "127.0.0.1:8080"
    assert s.classes.fleet.output_cap == 1 << 20
    assert s.classes.fleet.live_jobs == 20
    assert s.classes.fleet.max_targets == 10_000
    assert s.classes.fleet.max_download_bytes == 16 << 20
    assert s.classes.fleet.timeout_s == 30.0
    assert s.classes.restricted.output_cap == 64 << 10
    assert s.classes.restricted.live_jobs == 2
    assert s.classes.restricted.max_targets == 500
    assert s.classes.restricted.max_download_bytes == 8 << 20
    assert s.classes.restricted.timeout_s == 20.0
    assert s.cache.max_bytes == 1 << 30
    assert (s.batch.max_bytes, s.batch.ttl_s, s.batch.concurrency, s.batch.per_host) == (
        256 << 20,
        86400,
        32,
        4,
    )
    assert s.callers == ()


def test_the_issue_example_loads(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, EXAMPLE % DIGEST), env={})
    assert len(s.callers) == 1
    assert s.callers[0].name == "indexer"
    assert s.callers[0].caller_class == "fleet"
    assert s.find_caller("secret-key") == s.callers[0]
    assert s.find_caller("wrong") is None
    assert s.db_path == Path("sift-data") / "sift.db"


def test_egress_lab_settings(tmp_path: Path) -> None:
    text = """
[egress]
extra_public_cidrs = ["127.0.1.0/24"]
[egress.resolve]
"pub.test" = ["127.0.0.1"]
"mixed.test" = ["127.0.1.1", "127.0.0.1"]
"""
    s = load_settings(write(tmp_path, text), env={})
    assert s.egress.extra_public_cidrs == ("127.0.1.0/24",)
    assert dict(s.egress.resolve) == {
        "pub.test": ("127.0.0.1",),
        "mixed.test": ("127.0.1.1", "127.0.0.1"),
    }


def test_partial_class_table_keeps_that_class_defaults(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, "[classes.fleet]\nallow_private = true\n"), env={})
    assert s.classes.fleet.allow_private is True
    assert s.classes.fleet.output_cap == 1 << 20
    assert s.classes.restricted.output_cap == 64 << 10


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (65536, 65536),
        ("64KiB", 65536),
        ("1GiB", 1 << 30),
        ("16MiB", 16 << 20),
        ("10MB", 10_000_000),
        ("512", 512),
        (" 2 KiB ", 2048),
    ],
)
def test_parse_size(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["64k", "1.5GiB", "-1", "", "GiB", True, -5, 1.5])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_size(bad)


def test_env_overrides_file_and_flags_override_env(tmp_path: Path) -> None:
    path = write(tmp_path, '[cache]\nmax_bytes = "1MiB"\n[classes.restricted]\ntimeout_s = 5\n')
    env = {
        "SIFT_CACHE_MAX_BYTES": "2MiB",
        "SIFT_CLASSES_RESTRICTED_TIMEOUT_S": "7.5",
        "SIFT_CLASSES_FLEET_ALLOW_PRIVATE": "true",
        "SIFT_BATCH_PER_HOST": "9",
        "SIFT_EGRESS_EXTRA_PUBLIC_CIDRS": "127.0.1.0/24, 10.9.0.0/16",
        "UNRELATED": "x",
    }
    s = load_settings(path, env=env, overrides={"batch.per_host": "3"})
    assert s.cache.max_bytes == 2 << 20
    assert s.classes.restricted.timeout_s == 7.5
    assert s.classes.fleet.allow_private is True
    assert s.batch.per_host == 3
    assert s.egress.extra_public_cidrs == ("127.0.1.0/24", "10.9.0.0/16")


def test_default_file_is_read_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, 'listen = "127.0.0.1:9999"\n')
    monkeypatch.chdir(tmp_path)
    assert load_settings(None, env={}).listen == "127.0.0.1:9999"


BAD_CASES = [
    ("unknown top-level key", 'colour = "blue"\n', "sift.toml: colour: unknown setting"),
    ("unknown nested key", "[cache]\nmax_byte = 1\n", "sift.toml: cache.max_byte: unknown setting"),
    ("bad size", '[cache]\nmax_bytes = "lots"\n', "sift.toml: cache.max_bytes: bad size 'lots'"),
    (
        "unknown class table",
        "[classes.gold]\noutput_cap = 1\n",
        "sift.toml: classes.gold: unknown class",
    ),
    (
        "unknown caller class",
        f'[[callers]]\nname = "a"\nclass = "gold"\nkey_sha256 = "{DIGEST}"\n',
        "sift.toml: callers: entry 0 (a): unknown class 'gold'",
    ),
    (
        "duplicate caller",
        f'[[callers]]\nname = "a"\nclass = "fleet"\nkey_sha256 = "{DIGEST}"\n'
        f'[[callers]]\nname = "a"\nclass = "fleet"\nkey_sha256 = "{"0" * 64}"\n',
        "sift.toml: callers: duplicate caller name 'a'",
    ),
    (
        "duplicate key",
        f'[[callers]]\nname = "a"\nclass = "fleet"\nkey_sha256 = "{DIGEST}"\n'
        f'[[callers]]\nname = "b"\nclass = "fleet"\nkey_sha256 = "{DIGEST}"\n',
        "sift.toml: callers: 'b' reuses another caller's key",
    ),
    (
        "bad key hash",
        '[[callers]]\nname = "a"\nclass = "fleet"\nkey_sha256 = "abc"\n',
        "sift.toml: callers: entry 0 (a): key_sha256 must be 64 lowercase hex digits",
    ),
    (
        "restricted allow_private",
        "[classes.restricted]\nallow_private = true\n",
        "sift.toml: classes.restricted.allow_private: restricted callers never reach private",
    ),
    (
        "wrong type",
        '[batch]\nconcurrency = "many"\n',
        "sift.toml: batch.concurrency: expected an integer, got 'many'",
    ),
    ("bad listen", 'listen = "nowhere"\n', "sift.toml: listen: bad listen address 'nowhere'"),
    (
        "bad cidr",
        '[egress]\nextra_public_cidrs = ["300.1.0.0/16"]\n',
        "sift.toml: egress.extra_public_cidrs: bad CIDR '300.1.0.0/16'",
    ),
    (
        "bad resolve address",
        '[egress.resolve]\n"a.test" = ["not-an-ip"]\n',
        "sift.toml: egress.resolve: 'not-an-ip' does not appear to be an IPv4 or IPv6 address",
    ),
    ("zero concurrency", "[batch]\nconcurrency = 0\n", "sift.toml: batch.concurrency: must be"),
    ("invalid toml", "listen = \n", "sift.toml: not valid TOML"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_config_names_file_key_and_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings("sift.toml", env={})
    assert info.value.message.startswith(message), info.value.message
    assert "\n" not in info.value.message


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path / "missing.toml", env={})
    assert (
        info.value.message == f"{tmp_path / 'missing.toml'}: cannot read: No such file or directory"
    )


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={"SIFT_BATCH_TTL_S": "soon"})
    assert info.value.message.startswith("environment SIFT_BATCH_TTL_S: batch.ttl_s: ")


def test_unknown_flag_key() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={}, overrides={"cache.size": "1"})
    assert info.value.message == "flag --set cache.size: cache.size: unknown setting"


def test_every_setting_is_documented(repo_root: Path) -> None:
    doc = (repo_root / "docs" / "configuration.md").read_text()
    missing = [f.key for f in iter_fields() if f"`{f.key}`" not in doc]
    assert missing == []
    missing_env = [
        f.env
        for f in iter_fields()
        if f.key not in ("callers", "egress.resolve") and f"`{f.env}`" not in doc
    ]
    assert missing_env == []


def test_screenshot_bounds_are_checked() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={"SIFT_CLASSES_FLEET_SCREENSHOT_MAX_PIXELS": "67108865"})
    assert info.value.message.endswith(
        "classes.fleet.screenshot_max_pixels: at most 67108864 (a 8192 x 8192 image)"
    )
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={"SIFT_CLASSES_RESTRICTED_SCREENSHOT_MAX_BYTES": "0"})
    assert info.value.message.endswith("classes.restricted.screenshot_max_bytes: must be positive")
    ok = load_settings(None, env={"SIFT_CLASSES_FLEET_SCREENSHOT_MAX_PIXELS": "67108864"})
    assert ok.classes.fleet.screenshot_max_pixels == 67108864


def test_render_worker_settings_are_checked() -> None:
    s = load_settings(
        None,
        env={
            "SIFT_RENDER_RESERVED_WORKERS": "2",
            "SIFT_RENDER_SPARE_WORKERS": "0",
            "SIFT_RENDER_WORKER_NICE": "10",
        },
    )
    assert (s.render_reserved_workers, s.render_spare_workers, s.render_worker_nice) == (2, 0, 10)
    assert (Settings().render_reserved_workers, Settings().render_spare_workers) == (1, 1)
    for env, message in (
        ({"SIFT_RENDER_RESERVED_WORKERS": "-1"}, "render_reserved_workers: must be 0 or more"),
        ({"SIFT_RENDER_SPARE_WORKERS": "-1"}, "render_spare_workers: must be 0 or more"),
        ({"SIFT_RENDER_WORKER_NICE": "20"}, "render_worker_nice: must be 0 to 19"),
    ):
        with pytest.raises(ConfigError) as info:
            load_settings(None, env=env)
        assert info.value.message.endswith(message)
