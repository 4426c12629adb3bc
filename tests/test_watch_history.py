"""A watch check's history (issue 23's benchmark work): the node remembers each watch's latest
snapshot and text (no store read before the fetch, none for the previous text), and writes
the check's snapshot with its event in one transaction, checked against the snapshot it
compared with — so a snapshot another writer recorded meanwhile (another node, another
process on the file) is never skipped over: the check compares again. SQLite and a real
PostgreSQL; a fake clock and ``run_due()``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from batchrig import T0, FakeClock
from sift.changes.track import text_digest
from sift.store.history import Conflict, HistoryLimits, HistoryWrite, NewSnapshot, SnapshotRow
from sift.store.watches import WatchEvent
from upstream import Upstream
from watchrig import INDEXER, WatchRig, watch_rig, watch_settings

pytestmark = pytest.mark.timeout(120)

ROOMY = HistoryLimits(max_snapshots=10, max_bytes=1 << 20)


def _page(price: int) -> bytes:
    return (
        f"<html><body><article><h1>Prices</h1><p>price {price}</p></article></body></html>".encode()
    )


def _changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in "---+++"]


async def _events(rig: WatchRig, watch_id: str) -> list[dict[str, object]]:
    shown = await rig.watches.get(INDEXER, watch_id, 10)
    return [e["change"] for e in reversed(shown["events"])]


async def _latest_text(rig: WatchRig, watch_id: str, url: str) -> str:
    history = rig.watches.service.changes.history
    assert history is not None
    latest = await history.latest(INDEXER.name, f"watch:{watch_id}", url)
    assert latest is not None
    text = await history.text(latest.digest)
    assert text is not None
    return text


async def test_a_check_compares_with_a_snapshot_another_writer_recorded_since(
    tmp_path: Path,
) -> None:
    """The node's memo says the latest is price 10 (its own last check); another writer
    recorded price 11 since. The next check (price 12) must report 11 → 12, not 10 → 12."""
    async with Upstream() as up, watch_rig(watch_settings(tmp_path)) as rig:
        up.page("/prices", _page(10))
        view = await rig.create(INDEXER, {"url": up.url("/prices"), "every": 10})
        assert await rig.scheduler.run_due() == 1
        url, tag = up.url("/prices"), f"watch:{view['id']}"
        mine = await _latest_text(rig, view["id"], url)
        assert "price 10" in mine
        theirs = mine.replace("price 10", "price 11")
        history = rig.watches.service.changes.history
        assert history is not None
        await history.record(
            INDEXER.name, tag, url, NewSnapshot(text_digest(theirs), theirs, "b", 200, 5), ROOMY
        )
        up.page("/prices", _page(12))
        rig.clock.now = T0 + 10
        assert await rig.scheduler.run_due() == 1
        new, changed = await _events(rig, view["id"])
        assert new["status"] == "new"
        assert changed["status"] == "changed"
        assert _changed_lines(str(changed["diff"])) == ["-price 11", "+price 12"]
        assert (changed["added"], changed["removed"]) == (1, 1)
        assert changed["previous_digest"] == "b"
        assert [s.latest for s in await history.snapshots(INDEXER.name, tag, url)] == [
            False,
            False,
            True,
        ]
        # The node remembers what it wrote: the next check is "same", against price 12.
        rig.clock.now = T0 + 20
        assert await rig.scheduler.run_due() == 1
        assert (await _events(rig, view["id"]))[-1]["status"] == "same"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    return "" if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


async def test_the_event_and_the_snapshot_are_written_together_or_not_at_all(
    tmp_path: Path, store_url: str
) -> None:
    """``record_check_and_history``: a stale claim writes neither; a snapshot checked
    against a latest that moved on writes neither; otherwise both, in one transaction."""
    settings = watch_settings(tmp_path, store_url=store_url)
    async with watch_rig(settings) as rig:
        store, history = rig.watches.store.watches, rig.watches.service.changes.history
        assert history is not None
        view = await rig.create(INDEXER, {"url": "http://127.0.0.1:9/x", "every": 10})
        (stale,) = await store.claim_due_watches(T0, 10, 1)
        (claim,) = await store.claim_due_watches(T0 + 10, 10, 1)  # the first lease ran out
        tag = f"watch:{view['id']}"
        snap = NewSnapshot(text_digest("one"), "one", "b1", 200, 100)
        write = HistoryWrite(INDEXER.name, tag, "u", snap, ROOMY, None)

        def event() -> WatchEvent:
            return WatchEvent(view["id"], 0, T0 + 10, "ok", 200, '{"status": "new"}')

        assert await store.record_check_and_history(event(), stale.token, 5, write) is None
        assert await history.snapshots(INDEXER.name, tag, "u") == []
        assert (await rig.watches.get(INDEXER, view["id"], 5))["checks"] == 0
        other = await history.record(
            INDEXER.name, tag, "u", NewSnapshot(text_digest("x"), "x", "b0", 200, 90), ROOMY
        )
        assert isinstance(other, SnapshotRow)
        conflict = await store.record_check_and_history(event(), claim.token, 5, write)
        assert conflict == Conflict(other)
        assert await history.snapshots(INDEXER.name, tag, "u") == [other]
        assert (await rig.watches.get(INDEXER, view["id"], 5))["checks"] == 0
        again = HistoryWrite(INDEXER.name, tag, "u", snap, ROOMY, other)
        written = await store.record_check_and_history(event(), claim.token, 5, again)
        assert isinstance(written, SnapshotRow)
        assert written == await history.latest(INDEXER.name, tag, "u")
        assert (written.digest, written.fetched_at) == (text_digest("one"), 100)
        shown = await rig.watches.get(INDEXER, view["id"], 5)
        assert (shown["checks"], shown["last_outcome"]) == (1, "new")
        assert [e["seq"] for e in shown["events"]] == [1]


async def test_two_nodes_checking_one_watch_in_turn_diff_against_each_others_snapshots(
    tmp_path: Path, pg_url: str
) -> None:
    """On a shared PostgreSQL store each node remembers only what it wrote itself: a check
    on node A after node B's must diff against B's snapshot."""
    settings = watch_settings(tmp_path, store_url=pg_url)
    clock = FakeClock()
    async with (
        Upstream() as up,
        watch_rig(settings, clock, data_dir=tmp_path / "a") as a,
        watch_rig(settings, clock, data_dir=tmp_path / "b") as b,
    ):
        view = await a.create(INDEXER, {"url": up.url("/prices"), "every": 10})
        statuses, diffs = [], []
        for step, (node, price) in enumerate(((a, 10), (b, 11), (a, 12), (b, 12), (a, 13))):
            up.page("/prices", _page(price))
            clock.now = T0 + 10 * step
            assert await node.scheduler.run_due() == 1
            change = (await _events(a, view["id"]))[-1]
            statuses.append(change["status"])
            diffs.append(_changed_lines(str(change["diff"])) if change["diff"] else [])
        assert statuses == ["new", "changed", "changed", "same", "changed"]
        assert diffs == [
            [],
            ["-price 10", "+price 11"],
            ["-price 11", "+price 12"],
            [],
            ["-price 12", "+price 13"],
        ]
        assert (a.scheduler.checks_done, b.scheduler.checks_done) == (3, 2)


async def test_checks_ending_after_a_claim_drained_the_backlog_claim_nothing_until_a_tick(
    tmp_path: Path,
) -> None:
    """A claim that found fewer due watches than ``watch.claim_batch`` drained the backlog:
    claiming again for each check that ends (a store round trip each) waits ``watch.tick_s``
    — unless a watch is created here, or ``run_due`` asks."""
    settings = watch_settings(tmp_path, tick_s=1.0, claim_batch=4)
    async with Upstream() as up, watch_rig(settings) as rig:
        up.page("/p", b"<p>x</p>")
        rig.clock.now = T0 - 9.5
        late = await rig.create(INDEXER, {"url": up.url("/p"), "every": 10})
        assert await rig.scheduler.run_due() == 1  # next due: T0 + 0.5
        rig.clock.now = T0
        first = await rig.create(INDEXER, {"url": up.url("/p"), "every": 10})
        assert await rig.scheduler.claim_and_start() == 1  # 1 < 4: drained at T0
        rig.clock.now = T0 + 0.5  # `late` is due, but less than a tick after the drain
        assert await rig.scheduler.claim_and_start() == 0
        rig.clock.now = T0 + 1.0
        assert await rig.scheduler.claim_and_start() == 1
        rig.clock.now = T0 + 1.2
        third = await rig.create(INDEXER, {"url": up.url("/p"), "every": 10})  # notify()
        assert await rig.scheduler.claim_and_start() == 1
        assert await rig.scheduler.run_due() == 0  # waits for the running checks
        checks = {
            w: (await rig.watches.get(INDEXER, w, 5))["checks"]
            for w in (late["id"], first["id"], third["id"])
        }
        assert checks == {late["id"]: 2, first["id"]: 1, third["id"]: 1}
