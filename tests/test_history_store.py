"""The change history store (``sift.store.history``), on both backends: the embedded SQLite
and PostgreSQL (a fresh database per test; tests/pgserver.py). Exact rows, ``fetched_at``
passed in. Then the whole service over PostgreSQL: the history lives there, not in the
node's SQLite file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apphelpers import fetcher_for, make_settings
from batchrig import INDEXER, T0, FakeClock
from sift.assembly import assemble
from sift.changes.track import text_digest
from sift.config import StoreSettings
from sift.dcache import DB, AsyncDB
from sift.options import parse_options
from sift.store.history import (
    REMOVED,
    Conflict,
    HistoryLimits,
    HistoryStore,
    NewSnapshot,
    SnapshotRow,
)
from sift.store.postgres.store import PgBatchStore
from sift.store.sqlite.historystore import SqliteHistory
from sift.workers import RenderPool
from upstream import Upstream

ROOMY = HistoryLimits(max_snapshots=10, max_bytes=1 << 20)


@pytest.fixture(params=["sqlite", "postgres"])
async def history(request: pytest.FixtureRequest) -> AsyncIterator[HistoryStore]:
    if request.param == "sqlite":
        adb = AsyncDB(DB.open(":memory:"))
        yield SqliteHistory(adb)
        await adb.close()
        return
    url = request.getfixturevalue("pg_url")
    pg = await PgBatchStore.open(StoreSettings(url=url), migrate=False)
    yield pg.history
    await pg.close()


def snap(text: str, at: int, *, status: int = 200) -> NewSnapshot:
    if status in (404, 410):
        return NewSnapshot(REMOVED, None, f"body-{at}", status, at)
    return NewSnapshot(text_digest(text), text, f"body-{at}", status, at)


async def rows(h: HistoryStore, owner: str, url: str, tag: str = "") -> list[tuple[str, int]]:
    """(text or "removed", fetched_at) of the key's snapshots, oldest first."""
    out = []
    for row in await h.snapshots(owner, tag, url):
        text = REMOVED if row.digest == REMOVED else await h.text(row.digest)
        assert text is not None
        out.append((text, row.fetched_at))
    return out


async def test_record_touch_and_read(history: HistoryStore) -> None:
    assert await history.latest("alice", "", "u") is None
    await history.record("alice", "", "u", snap("one", 100), ROOMY)
    await history.record("alice", "", "u", snap("one", 150), ROOMY)  # same text: a touch
    latest = await history.latest("alice", "", "u")
    assert latest is not None
    assert (latest.digest, latest.body_digest, latest.fetched_at, latest.seen_at) == (
        text_digest("one"),
        "body-150",
        100,
        150,
    )
    assert latest.latest and await history.text(latest.digest) == "one"
    await history.record("alice", "", "u", snap("", 200, status=404), ROOMY)
    assert await rows(history, "alice", "u") == [("one", 100), (REMOVED, 200)]
    assert [r.latest for r in await history.snapshots("alice", "", "u")] == [False, True]
    assert await history.nbytes() == 3  # a tombstone stores no text
    # Keys are apart: another owner, another tag.
    assert await history.latest("bob", "", "u") is None
    assert await history.latest("alice", "t", "u") is None


async def test_texts_are_stored_once_per_digest(history: HistoryStore) -> None:
    limits = HistoryLimits(max_snapshots=1, max_bytes=1 << 20)
    await history.record("alice", "", "u", snap("shared", 100), limits)
    await history.record("bob", "", "u", snap("shared", 100), limits)
    assert await history.nbytes() == 6
    # alice's snapshot goes (count 1); bob's still has the text.
    await history.record("alice", "", "u", snap("mine", 110), limits)
    assert await rows(history, "alice", "u") == [("mine", 110)]
    assert await rows(history, "bob", "u") == [("shared", 100)]
    assert await history.nbytes() == 10


async def test_forget_drops_one_owners_tag_and_the_texts_only_it_had(
    history: HistoryStore,
) -> None:
    """A deleted watch's history goes with it (its latest snapshots are never evicted)."""
    for url, text in (("u1", "gone"), ("u2", "shared")):
        await history.record("alice", "watch:w1", url, snap(text, 100), ROOMY)
    await history.record("alice", "watch:w1", "u1", snap("gone too", 110), ROOMY)
    await history.record("alice", "watch:w2", "u1", snap("kept", 100), ROOMY)
    await history.record("bob", "watch:w1", "u1", snap("shared", 100), ROOMY)
    assert await history.forget("alice", "watch:w1") == 3
    assert await history.snapshots("alice", "watch:w1", "u1") == []
    assert await history.snapshots("alice", "watch:w1", "u2") == []
    assert await rows(history, "alice", "u1", "watch:w2") == [("kept", 100)]
    assert await rows(history, "bob", "u1", "watch:w1") == [("shared", 100)]
    assert await history.text(text_digest("gone")) is None
    assert await history.nbytes() == len("kept") + len("shared")
    assert await history.forget("alice", "watch:w1") == 0


async def test_bounded_by_count_oldest_first(history: HistoryStore) -> None:
    limits = HistoryLimits(max_snapshots=2, max_bytes=1 << 20)
    for i, text in enumerate(("v1", "v2", "v3", "v4")):
        await history.record("alice", "", "u", snap(text, 100 + i), limits)
    assert await rows(history, "alice", "u") == [("v3", 102), ("v4", 103)]
    assert await history.text(text_digest("v1")) is None
    assert await history.nbytes() == 4


async def test_bounded_by_bytes_oldest_history_first(history: HistoryStore) -> None:
    limits = HistoryLimits(max_snapshots=10, max_bytes=25)
    ten = [f"{c}" * 10 for c in "abcdef"]
    await history.record("alice", "", "A", snap(ten[0], 100), limits)
    await history.record("alice", "", "B", snap(ten[1], 101), limits)
    await history.record("alice", "", "A", snap(ten[2], 102), limits)  # 30 > 25: A's first goes
    assert await rows(history, "alice", "A") == [(ten[2], 102)]
    assert await rows(history, "alice", "B") == [(ten[1], 101)]
    assert await history.nbytes() == 20
    await history.record("alice", "", "B", snap(ten[3], 103), limits)  # B's first goes
    assert await rows(history, "alice", "B") == [(ten[3], 103)]
    # Oldest first across keys and owners: bob's older snapshot goes before alice's newer.
    await history.record("bob", "", "C", snap("x", 104), limits)
    await history.record("bob", "", "C", snap("y", 105), limits)
    await history.record("alice", "", "A", snap("z", 106), limits)  # 23: nothing goes
    await history.record("alice", "", "A", snap(ten[4], 107), limits)  # 33: A's ten[2] goes
    assert await rows(history, "bob", "C") == [("x", 104), ("y", 105)]
    assert await rows(history, "alice", "A") == [("z", 106), (ten[4], 107)]
    assert await history.nbytes() == 10 + 1 + 1 + 1 + 10
    # 33 again: bob's x (older) goes before alice's z and ten[4].
    await history.record("alice", "", "A", snap(ten[5], 108), limits)
    assert await rows(history, "bob", "C") == [("y", 105)]
    assert await rows(history, "alice", "A") == [(ten[5], 108)]
    assert await history.nbytes() == 10 + 1 + 10


async def test_past_the_budget_latest_snapshots_go_but_never_a_watchs(
    history: HistoryStore,
) -> None:
    """Only latest snapshots left and still too many bytes: the least recently seen go
    (seen_at, not insertion order), never a watch's, never the one just recorded."""
    roomy = HistoryLimits(max_snapshots=10, max_bytes=1 << 20)
    await history.record("alice", "", "A", snap("a" * 10, 100), roomy)
    await history.record("alice", "watch:w1", "W", snap("w" * 10, 101), roomy)
    await history.record("alice", "", "B", snap("b" * 10, 102), roomy)
    await history.record("alice", "", "A", snap("a" * 10, 103), roomy)  # A seen again
    await history.record("bob", "", "C", snap("c" * 10, 104), HistoryLimits(10, 35))  # 40
    # B (seen at 102) goes before A (recorded first, but seen at 103).
    assert await rows(history, "alice", "B") == []
    assert await rows(history, "alice", "A") == [("a" * 10, 100)]
    assert await history.nbytes() == 30
    await history.record("bob", "", "D", snap("d" * 10, 105), HistoryLimits(10, 15))  # 40
    # A, then C; the watch's stays, and so does the one just recorded, over the budget.
    assert await rows(history, "alice", "A") == []
    assert await rows(history, "bob", "C") == []
    assert await rows(history, "alice", "W", tag="watch:w1") == [("w" * 10, 101)]
    assert await rows(history, "bob", "D") == [("d" * 10, 105)]
    assert await history.nbytes() == 20


async def test_the_service_keeps_its_history_in_postgresql(tmp_path: Path, pg_url: str) -> None:
    settings = dataclasses.replace(make_settings(tmp_path), store=StoreSettings(url=pg_url))
    clock = FakeClock()
    async with Upstream() as up:
        url = up.url("/p")
        up.page("/p", "<html><body><main><h1>T</h1><p>One.</p></main></body></html>")
        for text, expected in (("One.", "new"), ("One.", "same"), ("Two.", "changed")):
            up.page("/p", f"<html><body><main><h1>T</h1><p>{text}</p></main></body></html>")
            async with assemble(  # a new node each time: the history is the store's
                settings,
                db=DB.open(tmp_path / "sift.db"),
                fetcher=fetcher_for(settings),
                render_pool=RenderPool(1),
                with_browser=False,
                store=True,
                clock=clock,
            ) as parts:
                opts = parse_options({"url": url, "changes": True, "max_age_s": 0})
                env = await parts.service.fetch(INDEXER, opts)
                assert env["change"]["status"] == expected
                assert await parts.adb.run(DB.history_nbytes) == 0  # nothing in SQLite
            clock.now += 10
        assert env["change"]["diff"] == (
            "--- previous\n+++ current\n@@ -1,3 +1,3 @@\n # T\n \n-One.\n+Two.\n"
        )
        assert env["change"]["previous_fetched_at"] == T0 + 10
    pg = await PgBatchStore.open(StoreSettings(url=pg_url), migrate=False)
    try:
        assert [r.fetched_at for r in await pg.history.snapshots("indexer", "", url)] == [
            T0,
            T0 + 20,
        ]
    finally:
        await pg.close()


async def test_a_checked_record_writes_only_over_the_latest_it_expects(
    history: HistoryStore,
) -> None:
    """``expect``: the snapshot a fetch compared against. Another writer (another node)
    that moved the key on in between makes the write a ``Conflict`` that names the latest it
    found, and nothing is written; the answer of a write is the key's latest as written."""
    first = await history.record("alice", "", "u", snap("one", 100), ROOMY, expect=None)
    assert isinstance(first, SnapshotRow)
    assert first == await history.latest("alice", "", "u")
    assert (first.digest, first.body_digest, first.fetched_at, first.seen_at) == (
        text_digest("one"),
        "body-100",
        100,
        100,
    )
    # A key with history is not "no history".
    assert await history.record("alice", "", "u", snap("two", 110), ROOMY, expect=None) == (
        Conflict(first)
    )
    touched = await history.record("alice", "", "u", snap("one", 120), ROOMY, expect=first)
    assert touched == dataclasses.replace(first, body_digest="body-120", seen_at=120)
    assert touched == await history.latest("alice", "", "u")
    # A write checked against the row before the touch: its seen_at moved on.
    assert await history.record("alice", "", "u", snap("two", 130), ROOMY, expect=first) == (
        Conflict(touched)
    )
    assert await rows(history, "alice", "u") == [("one", 100)]
    assert await history.text(text_digest("two")) is None  # nothing written, the text neither
    second = await history.record("alice", "", "u", snap("two", 130), ROOMY, expect=touched)
    assert isinstance(second, SnapshotRow)
    assert second == await history.latest("alice", "", "u")
    assert (second.digest, second.fetched_at, second.seen_at) == (text_digest("two"), 130, 130)
    assert await rows(history, "alice", "u") == [("one", 100), ("two", 130)]
    # Unchecked (the default): written over whatever is there.
    third = await history.record("alice", "", "u", snap("three", 140), ROOMY)
    assert isinstance(third, SnapshotRow) and third.id > second.id
    await history.forget("alice", "")
    assert await history.record("alice", "", "u", snap("x", 150), ROOMY, expect=third) == (
        Conflict(None)
    )


async def test_the_sqlite_byte_count_follows_other_connections_and_rollbacks(
    tmp_path: Path,
) -> None:
    """The SQLite history keeps its byte count beside the table (no sum of every text per
    record); it is counted again when another connection (another process on the file) has
    written, and after a rollback, so the budget holds exactly all the same."""
    path = tmp_path / "h.db"
    adb = AsyncDB(DB.open(path))
    other = DB.open(path)
    try:
        history = SqliteHistory(adb)
        limits = HistoryLimits(max_snapshots=10, max_bytes=25)
        await history.record("alice", "", "A", snap("a" * 10, 100), limits)
        # Another connection adds 10 bytes the first one never saw written.
        other.record_history("bob", "", "B", snap("b" * 10, 101), limits)
        # 10 + 10 + 10 = 30 > 25: A's first snapshot (not a latest) goes.
        await history.record("alice", "", "A", snap("c" * 10, 102), limits)
        assert await rows(history, "alice", "A") == [("c" * 10, 102)]
        assert await history.nbytes() == 20
        # A write rolled back (its group failed) leaves the count as the table has it (a
        # count of 30 kept from the undone write would evict c below).
        with pytest.raises(RuntimeError), adb.db.transaction():
            adb.db.record_history("alice", "", "A", snap("d" * 10, 103), ROOMY)
            raise RuntimeError("undone")
        assert await history.nbytes() == 20
        await history.record("alice", "", "A", snap("e" * 4, 104), limits)  # 24: fits
        assert await rows(history, "alice", "A") == [("c" * 10, 102), ("e" * 4, 104)]
        await history.record("alice", "", "A", snap("f" * 2, 105), limits)  # 26: c goes
        assert await rows(history, "alice", "A") == [("e" * 4, 104), ("f" * 2, 105)]
        assert await history.nbytes() == 16
    finally:
        other.close()
        await adb.close()
