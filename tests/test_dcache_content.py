"""The content cache, robots cache, and the database file itself (open, reopen, corrupt, close)."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from sift.dcache import DB, PageEntry
from sift.dcache.schema import SCHEMA_VERSION
from sift.errors import ConfigError, StoreError
from sift.store import BatchJob, BatchTarget


@pytest.fixture
def raw_db() -> Iterator[DB]:
    """Compression off, so stored sizes equal the byte counts the tests choose."""
    store = DB.open(":memory:", compress_level=0)
    yield store
    store.close()


def noise(n: int, seed: int) -> bytes:
    """Incompressible bytes: stored as-is even with compression on."""
    return random.Random(seed).randbytes(n)


def page(digest: str, url: str = "https://example.com/", fetched_at: int = 100) -> PageEntry:
    return PageEntry(url, url, 200, "text/html", '"e1"', None, fetched_at, digest)


def side_check(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Query the file through a second, independent connection."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_identical_bodies_are_stored_once(raw_db: DB) -> None:
    body = b"<html><body>same</body></html>"
    d1 = raw_db.put_body(body, 100)
    raw_db.put_page("https://a.test/", page(d1, "https://a.test/"), 100)
    d2 = raw_db.put_body(body, 101)
    raw_db.put_page("https://b.test/", page(d2, "https://b.test/"), 101)
    assert d1 == d2 == "sha256:" + hashlib.sha256(body).hexdigest()
    assert raw_db.size() == len(body)
    s = raw_db.stats()
    assert (s["bodies"], s["pages"], s["bytes"], s["raw_bytes"]) == (1, 2, len(body), len(body))
    assert raw_db.get_body(d1, 102) == body


def test_compression_pays_on_html_and_is_skipped_on_noise(tmp_path: Path) -> None:
    db = DB.open(tmp_path / "sift.db")
    html = b"<html><body>" + b"<p>sift fetches pages for programs.</p>\n" * 200 + b"</body></html>"
    d_html = db.put_body(html, 100)
    compressed = db.size()
    assert compressed < len(html) // 10
    rand = noise(4096, 1)
    d_rand = db.put_body(rand, 100)
    assert db.size() == compressed + len(rand)  # would not shrink: stored as-is
    db.put_render(d_html, "markdown", html[:5000], 100)
    assert db.get_body(d_html, 101) == html
    assert db.get_body(d_rand, 101) == rand
    assert db.get_render(d_html, "markdown", 101) == html[:5000]
    assert db.stats()["raw_bytes"] == len(html) + len(rand) + 5000
    db.close()
    codecs = side_check(tmp_path / "sift.db", "SELECT codec FROM body ORDER BY raw_bytes")
    assert codecs == [("identity",), ("zstd",)]


def test_evict_removes_least_recently_used_across_bodies_and_renders(raw_db: DB) -> None:
    a = raw_db.put_body(noise(1000, 1), 100)
    b = raw_db.put_body(noise(1000, 2), 100)
    raw_db.put_render(a, "md", noise(500, 3), 100)  # uses body a again
    c = raw_db.put_body(noise(1000, 4), 100)
    assert raw_db.get_body(b, 101) is not None
    # Least recent first: render a/md (ties with body a; the render goes first), a, c, b.
    assert raw_db.size() == 3500
    raw_db.max_bytes = 3000
    assert raw_db.evict(102) == 1
    assert raw_db.size() == 3000
    assert raw_db.get_render(a, "md", 103) is None
    raw_db.max_bytes = 2000
    assert raw_db.evict(102) == 1  # body a: its lookup above was a miss, so it stayed oldest
    assert raw_db.size() == 2000
    assert raw_db.get_body(a, 103) is None
    assert raw_db.get_body(c, 103) is not None  # order now: b, c
    raw_db.max_bytes = 1000
    assert raw_db.evict(104) == 1
    assert raw_db.size() == 1000
    assert raw_db.get_body(b, 105) is None
    assert raw_db.get_body(c, 105) is not None
    assert raw_db.stats()["evictions"] == 3


def test_a_render_can_go_before_its_body(raw_db: DB) -> None:
    a = raw_db.put_body(noise(1000, 1), 100)
    raw_db.put_render(a, "text", noise(300, 2), 100)
    raw_db.put_render(a, "md", noise(400, 3), 100)
    assert raw_db.get_body(a, 101) is not None  # body most recent; renders text, md older
    raw_db.max_bytes = 1500
    assert raw_db.evict() == 1
    assert raw_db.get_render(a, "text", 102) is None
    assert raw_db.get_render(a, "md", 102) is not None
    assert raw_db.size() == 1400


def test_page_and_render_hits_keep_their_body_alive(raw_db: DB) -> None:
    a = raw_db.put_body(noise(1000, 1), 100)
    raw_db.put_page("ka", page(a), 100)
    b = raw_db.put_body(noise(1000, 2), 100)
    raw_db.put_render(b, "md", noise(10, 3), 100)
    c = raw_db.put_body(noise(1000, 4), 100)
    assert raw_db.get_page("ka", 101) == page(a)  # bumps body a
    assert raw_db.get_render(b, "md", 101) is not None  # bumps render and body b
    raw_db.max_bytes = 2010
    assert raw_db.evict() == 1
    assert raw_db.get_body(c, 102) is None
    assert raw_db.get_body(a, 102) is not None
    assert raw_db.get_body(b, 102) is not None


def test_evicting_a_body_drops_its_pages_and_renders(tmp_path: Path) -> None:
    db = DB.open(tmp_path / "sift.db", compress_level=0)
    a = db.put_body(noise(1000, 1), 100)
    db.put_page("k1", page(a, "https://a.test/1"), 100)
    db.put_page("k2", page(a, "https://a.test/2"), 100)
    db.put_render(a, "md", noise(100, 2), 100)
    b = db.put_body(noise(1000, 3), 100)
    db.max_bytes = 1000
    assert db.evict() == 2  # body a and its render
    assert db.get_page("k1", 101) is None and db.get_page("k2", 101) is None
    assert db.get_body(b, 101) is not None
    s = db.stats()
    assert (s["bodies"], s["pages"], s["renders"], s["bytes"]) == (1, 0, 0, 1000)
    db.close()
    path = tmp_path / "sift.db"
    assert side_check(path, "PRAGMA foreign_key_check") == []
    assert side_check(path, "SELECT count(*) FROM blob") == [(1,)]


def test_puts_without_a_body_store_nothing(raw_db: DB) -> None:
    ghost = "sha256:" + "0" * 64
    raw_db.put_page("k", page(ghost), 100)
    raw_db.put_render(ghost, "md", b"x" * 100, 100)
    assert raw_db.get_page("k", 101) is None
    assert raw_db.get_render(ghost, "md", 101) is None
    s = raw_db.stats()
    assert (s["orphan_puts"], s["pages"], s["renders"], s["bytes"]) == (2, 0, 0, 0)


def test_replacing_entries_replaces_their_bytes(raw_db: DB) -> None:
    a = raw_db.put_body(noise(1000, 1), 100)
    raw_db.put_render(a, "md", noise(300, 2), 100)
    raw_db.put_render(a, "md", noise(200, 3), 101)
    assert raw_db.size() == 1200
    assert raw_db.get_render(a, "md", 102) == noise(200, 3)
    newer = PageEntry("u", "u2", 200, "text/plain", None, "Tue, 01 Jan 2030 00:00:00 GMT", 200, a)
    raw_db.put_page("k", page(a), 100)
    raw_db.put_page("k", newer, 200)
    assert raw_db.get_page("k", 201) == newer
    assert raw_db.stats()["pages"] == 1


def test_budget_holds_after_every_evict_and_the_counter_matches_the_tables(tmp_path: Path) -> None:
    path = tmp_path / "sift.db"
    db = DB.open(path, max_bytes=20_000)
    rng = random.Random(7)
    digests: list[str] = []
    for step in range(300):
        op = rng.random()
        if op < 0.5 or not digests:
            size = rng.randrange(100, 6000)
            data = noise(size, step) if rng.random() < 0.5 else b"<p>x</p>" * (size // 8)
            digest = db.put_body(data, step)
            digests.append(digest)
            db.put_page(f"k{step}", page(digest, f"https://a.test/{step}"), step)
        elif op < 0.8:
            db.put_render(rng.choice(digests), rng.choice(["md", "text"]), noise(500, step), step)
        else:
            db.get_page(f"k{rng.randrange(step)}", step)
        db.evict(step)
        assert db.size() <= 20_000, step
    size = db.size()
    db.close()
    stored = side_check(
        path,
        "SELECT (SELECT sum(nbytes) FROM body) + coalesce((SELECT sum(nbytes) FROM render), 0),"
        " (SELECT sum(length(data)) FROM blob)",
    )
    assert stored == [(size, size)]
    assert side_check(path, "PRAGMA foreign_key_check") == []
    reopened = DB.open(path, max_bytes=20_000)
    assert reopened.size() == size
    reopened.close()


def test_stats_count_hits_and_misses(raw_db: DB) -> None:
    a = raw_db.put_body(b"body", 100)
    raw_db.put_page("k", page(a), 100)
    raw_db.put_render(a, "md", b"md", 100)
    raw_db.get_body(a, 101)
    raw_db.get_body("sha256:nope", 101)
    raw_db.get_page("k", 101)
    raw_db.get_page("missing", 101)
    raw_db.get_page("missing", 101)
    raw_db.get_render(a, "md", 101)
    raw_db.get_render(a, "text", 101)
    s = raw_db.stats()
    assert {k: s[k] for k in ("hits", "misses", "body_hits", "body_misses")} == {
        "hits": 3,
        "misses": 4,
        "body_hits": 1,
        "body_misses": 1,
    }
    assert (s["page_hits"], s["page_misses"], s["render_hits"], s["render_misses"]) == (1, 2, 1, 1)
    assert (s["bodies"], s["pages"], s["renders"], s["bytes"], s["max_bytes"]) == (
        1,
        1,
        1,
        6,
        1 << 30,
    )


def test_robots_cache_round_trip(raw_db: DB) -> None:
    assert raw_db.get_robots("https://a.test") is None
    raw_db.put_robots("https://a.test", 200, b"User-agent: *\nDisallow: /x\n", 100)
    assert raw_db.get_robots("https://a.test") == (200, b"User-agent: *\nDisallow: /x\n", 100)
    raw_db.put_robots("https://a.test", 404, b"", 200)
    assert raw_db.get_robots("https://a.test") == (404, b"", 200)
    assert raw_db.size() == 0  # robots.txt is not part of the content budget


def test_reopen_keeps_data_lru_order_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "sift.db"
    db = DB.open(path, compress_level=0)
    a = db.put_body(noise(1000, 1), 100)
    db.put_body(noise(1000, 2), 100)  # b
    db.get_body(a, 101)  # b is now the least recent
    db.put_page("k", page(a), 100)
    db.put_robots("https://a.test", 200, b"", 100)
    db.create_batch_job(BatchJob("j", "alice", "fleet", "k", "running", "", 1, 0, 100, 100, 0))
    db.put_batch_targets("j", [BatchTarget("j", 0, "https://a.test/", "{}", "pending")])
    db.update_batch_target("j", 0, 110, "done", "result", None, None)
    db.close()
    tables = side_check(path, "SELECT name FROM sqlite_schema ORDER BY name")

    for _ in range(2):  # migration is idempotent: a second open changes nothing
        db = DB.open(path, max_bytes=1000, compress_level=0)
        assert db.size() == 2000
        assert db.get_page("k", 200) == page(a)
        assert db.get_robots("https://a.test") == (200, b"", 100)
        got = db.batch_job("j")
        assert got is not None and (got.targets_done, got.nbytes, got.lease) == (1, 6, 110)
        db.close()
        assert side_check(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
        assert side_check(path, "SELECT name FROM sqlite_schema ORDER BY name") == tables
    assert side_check(path, "PRAGMA journal_mode") == [("wal",)]

    # The recency sequence continues past the stored one: the new body is the most recent, so
    # evict takes b (least recent) and then a, not the new body.
    db = DB.open(path, max_bytes=1000, compress_level=0)
    new = db.put_body(noise(10, 3), 300)
    assert db.evict() == 2
    assert db.size() == 10
    assert db.get_body(new, 301) == noise(10, 3)
    db.close()


def test_schema_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sift.db"
    DB.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer") as info:
        DB.open(path)
    assert str(path) in info.value.message


def test_corrupt_file_raises_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "sift.db"
    path.write_bytes(b"this is not a sqlite database, just text\n" * 100)
    with pytest.raises(StoreError) as info:
        DB.open(path)
    assert str(path) in info.value.message
    assert "not a database" in info.value.message
    assert path.read_bytes().startswith(b"this is not")  # nothing overwritten


def test_unwritable_paths_raise_store_error_naming_them(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for path in (blocker / "sift.db", tmp_path):  # parent is a file; path is a directory
        with pytest.raises(StoreError) as info:
            DB.open(path)
        assert str(path) in info.value.message


def test_negative_budget_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        DB.open(":memory:", max_bytes=-1)


def test_close_is_idempotent_and_later_calls_raise(tmp_path: Path) -> None:
    db = DB.open(tmp_path / "sift.db")
    db.check()
    assert db.integrity_check() == "ok"
    db.close()
    db.close()
    for call in (
        db.check,
        db.size,
        db.stats,
        lambda: db.put_body(b"x", 1),
        lambda: db.get_page("k", 1),
        lambda: db.batch_job("j"),
        lambda: db.sweep_batch(1, 1),
    ):
        with pytest.raises(StoreError, match="closed"):
            call()


def test_hit_recency_is_written_at_close_and_in_bounded_batches(tmp_path: Path) -> None:
    path = tmp_path / "sift.db"
    db = DB.open(path, compress_level=0)
    a = db.put_body(noise(1000, 1), 100)
    db.put_body(noise(1000, 2), 100)  # b
    db.get_body(a, 101)  # a hit is a read; its recency waits in memory ...
    db.close()  # ... and is written at close
    db = DB.open(path, max_bytes=1000, compress_level=0)
    assert db.evict() == 1
    assert db.get_body(a, 102) is not None  # b went, a stayed

    many = [db.put_body(noise(10, 100 + i), 200) for i in range(300)]
    for d in many:
        db.get_body(d, 500)
    # The 256th distinct hit wrote the pending recency; the last 44 still wait in memory.
    assert side_check(path, "SELECT count(*) FROM body WHERE accessed_at = 500") == [(256,)]
    db.close()
    assert side_check(path, "SELECT count(*) FROM body WHERE accessed_at = 500") == [(300,)]


def test_get_page_render_is_one_call_for_the_common_hit(raw_db: DB) -> None:
    a = raw_db.put_body(b"<p>hi</p>", 100)
    raw_db.put_page("k", page(a), 100)
    assert raw_db.get_page_render("missing", "md", 101) is None
    assert raw_db.get_page_render("k", "md", 101) == (page(a), None)
    raw_db.put_render(a, "md", b"hi", 102)
    assert raw_db.get_page_render("k", "md", 103) == (page(a), b"hi")
    s = raw_db.stats()
    assert (s["page_hits"], s["page_misses"], s["render_hits"], s["render_misses"]) == (2, 1, 1, 1)
