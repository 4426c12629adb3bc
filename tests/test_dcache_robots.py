"""The robots.txt table's byte budget (issue 24, finding 7): exact byte counts, oldest first."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from sift.assembly import assemble
from sift.config import load_settings
from sift.dcache import DB
from sift.dcache.robots import robots_entry_bytes
from sift.errors import ConfigError

KEY_A = "pub.0123456789abcdef https://a.test"  # the shape _DBRobotsCache writes
KEY_B = "pub.0123456789abcdef https://b.test"
KEY_C = "pub.0123456789abcdef https://c.test"
BODY = b"User-agent: *\nDisallow: /private\n" + b"#" * 67  # 100 bytes


@pytest.fixture
def db() -> Iterator[DB]:
    store = DB.open(":memory:", compress_level=0, robots_max_bytes=300)
    yield store
    store.close()


def test_entry_counts_its_key_and_body() -> None:
    assert len(BODY) == 100
    assert robots_entry_bytes(KEY_A, BODY) == 35 + 100
    assert robots_entry_bytes("https://é.test", b"") == 15  # UTF-8 bytes, not characters


def test_the_oldest_entry_goes_when_the_budget_is_passed(db: DB) -> None:
    db.put_robots(KEY_A, 200, BODY, 100)
    db.put_robots(KEY_B, 200, BODY, 101)
    assert db.robots_bytes() == 270
    db.put_robots(KEY_C, 200, BODY, 102)  # 405 > 300: the oldest (a) is evicted
    assert db.robots_bytes() == 270
    assert db.get_robots(KEY_A) is None
    assert db.get_robots(KEY_B) == (200, BODY, 101)
    assert db.get_robots(KEY_C) == (200, BODY, 102)
    stats = db.stats()
    assert (stats["robots"], stats["robots_bytes"], stats["robots_evictions"]) == (2, 270, 1)


def test_a_rewritten_entry_counts_its_new_size_and_becomes_the_newest(db: DB) -> None:
    db.put_robots(KEY_A, 200, BODY, 100)
    db.put_robots(KEY_B, 200, BODY, 101)
    db.put_robots(KEY_A, 404, b"", 200)  # refreshed: a is now newer than b
    assert db.robots_bytes() == 135 + 35
    db.put_robots(KEY_C, 200, BODY + BODY, 201)  # 170 + 235 = 405: b goes, not a
    assert db.robots_bytes() == 35 + 235
    assert db.get_robots(KEY_B) is None
    assert db.get_robots(KEY_A) == (404, b"", 200)


def test_an_entry_larger_than_the_budget_is_not_kept(db: DB) -> None:
    db.put_robots(KEY_A, 200, BODY, 100)
    db.put_robots(KEY_B, 200, b"x" * 300, 101)  # 335 alone exceeds 300
    assert db.get_robots(KEY_B) is None
    assert db.get_robots(KEY_A) is None  # evicted first, being older
    assert db.robots_bytes() == 0


def test_many_origins_stay_within_the_budget_exactly() -> None:
    """The finding's attack at small scale: 200 origins of 8 KiB each under a 64 KiB budget.
    Before the budget, all 200 (1.6 MiB) stayed for good."""
    store = DB.open(":memory:", compress_level=0, robots_max_bytes=64 << 10)
    body = b"#" * 8192
    keys = [f"pub.0123456789abcdef https://s{i}.a.test" for i in range(200)]
    for i, key in enumerate(keys):
        store.put_robots(key, 200, body, 100 + i)
    kept = [k for k in keys if store.get_robots(k) is not None]
    # Newest first until the next one would not fit: 7 entries of 8192 + key (<= 41) bytes.
    assert kept == keys[-7:]
    assert store.robots_bytes() == sum(robots_entry_bytes(k, body) for k in kept)
    assert store.stats()["robots_evictions"] == 193
    store.close()


def test_reopen_sums_the_table_and_applies_a_smaller_budget(tmp_path: Path) -> None:
    path = tmp_path / "sift.db"
    store = DB.open(path, robots_max_bytes=1000)
    for key in (KEY_A, KEY_B, KEY_C):
        store.put_robots(key, 200, BODY, 100)
    store.close()
    store = DB.open(path, robots_max_bytes=300)
    assert store.robots_bytes() == 405  # what the file holds, summed on first use
    store.put_robots(KEY_C, 200, BODY, 200)  # any put applies the budget
    assert store.robots_bytes() == 270
    assert store.get_robots(KEY_A) is None
    store.close()
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT sum(length(CAST(origin AS BLOB)) + length(body)) FROM robots"
    ).fetchall()
    conn.close()
    assert rows == [(270,)]


def test_a_rolled_back_put_leaves_the_count_true(db: DB) -> None:
    db.put_robots(KEY_A, 200, BODY, 100)
    with pytest.raises(RuntimeError), db.transaction():
        db.put_robots(KEY_B, 200, BODY, 101)
        raise RuntimeError("abort")
    assert db.get_robots(KEY_B) is None
    assert db.robots_bytes() == 135


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ConfigError, match="robots_max_bytes"):
        DB.open(":memory:", robots_max_bytes=-1)


async def test_the_setting_reaches_the_running_database(tmp_path: Path) -> None:
    cfg = tmp_path / "sift.toml"
    cfg.write_text(f'data_dir = "{tmp_path}"\n[cache]\nrobots_max_bytes = "4KiB"\n')
    settings = load_settings(cfg, env={})
    async with assemble(settings, with_browser=False, start_pool=False) as parts:
        assert parts.adb.db.robots_max_bytes == 4096
