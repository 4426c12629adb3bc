"""``changes: true`` through the real service: SQLite, the render pool, a loopback upstream
whose page changes between fetches, and a fake clock, so every ``change`` is exact.

The history store's own rules (bounds by count and bytes, both backends) are in
tests/test_history_store.py; the diff's in tests/test_changes_diff.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from apphelpers import make_settings
from batchrig import CRAWLER, INDEXER, T0, Rig, batch_rig
from sift.config import HistorySettings, Settings
from sift.errors import BadRequest
from sift.jsonio import loads
from sift.options import parse_options
from sift.principal import Principal
from sift.store.history import REMOVED
from upstream import Upstream


def page(*paras: str, clock: str | None = None) -> str:
    """An HTML page whose markdown is ``# Prices`` and one paragraph per ``paras``."""
    body = "".join(f"<p>{p}</p>" for p in paras)
    if clock is not None:
        body += f'<p class="clock">Updated {clock}</p>'
    head = "<html><head><title>Prices</title></head>"
    return f"{head}<body><main><h1>Prices</h1>{body}</main></body></html>"


async def fetch(rig: Rig, who: Principal, url: str, **options: Any) -> dict[str, Any]:
    opts = parse_options({"url": url, "changes": True, **options})
    return await rig.service.fetch(who, opts)


def change(env: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = env["change"]
    return found


async def test_new_same_changed_removed_with_the_exact_diff(tmp_path: Path) -> None:
    async with Upstream() as up, batch_rig(tmp_path) as rig:
        url = up.url("/prices")
        up.page("/prices", page("Apples cost 3 euros.", "Pears cost 4 euros."))
        first = await fetch(rig, INDEXER, url, max_age_s=0)
        assert change(first) == {
            "status": "new",
            "previous_fetched_at": None,
            "previous_digest": None,
            "diff": None,
            "added": 0,
            "removed": 0,
            "truncated": False,
        }
        rig.clock.now += 60
        second = await fetch(rig, INDEXER, url, max_age_s=0)
        assert second["cache"] == "miss" and second["fetched_at"] == T0 + 60
        assert change(second) == {
            "status": "same",
            "previous_fetched_at": T0,
            "previous_digest": first["digest"],
            "diff": None,
            "added": 0,
            "removed": 0,
            "truncated": False,
        }
        up.page("/prices", page("Apples cost 3 euros.", "Pears cost 5 euros.", "Plums are new."))
        rig.clock.now += 60
        third = await fetch(rig, INDEXER, url, max_age_s=0)
        assert change(third) == {
            "status": "changed",
            "previous_fetched_at": T0 + 60,  # when the same text was last seen
            "previous_digest": second["digest"],
            "diff": (
                "--- previous\n"
                "+++ current\n"
                "@@ -2,4 +2,6 @@\n"
                " \n"
                " Apples cost 3 euros.\n"
                " \n"
                "-Pears cost 4 euros.\n"
                "+Pears cost 5 euros.\n"
                "+\n"
                "+Plums are new.\n"
            ),
            "added": 3,
            "removed": 1,
            "truncated": False,
        }
        assert (
            third["content"]
            == "# Prices\n\nApples cost 3 euros.\n\nPears cost 5 euros.\n\nPlums are new."
        )
        up.page("/prices", "<html><body><p>Gone</p></body></html>", status=404)
        rig.clock.now += 60
        fourth = await fetch(rig, INDEXER, url, max_age_s=0)
        assert fourth["status"] == 404
        assert change(fourth) == {
            "status": "removed",
            "previous_fetched_at": T0 + 120,
            "previous_digest": third["digest"],
            "diff": None,
            "added": 0,
            "removed": 0,
            "truncated": False,
        }
        rig.clock.now += 60
        fifth = await fetch(rig, INDEXER, url, max_age_s=0)
        assert change(fifth)["status"] == "same"  # still gone
        up.page("/prices", page("Back."))
        rig.clock.now += 60
        back = change(await fetch(rig, INDEXER, url, max_age_s=0))
        assert (back["status"], back["previous_fetched_at"]) == ("changed", T0 + 240)
        assert back["diff"] == "--- previous\n+++ current\n@@ -0,0 +1,3 @@\n+# Prices\n+\n+Back.\n"
        history = rig.service.changes.history
        assert history is not None
        rows = await history.snapshots("indexer", "", url)
        assert [(r.fetched_at, r.seen_at, r.http_status, r.latest) for r in rows] == [
            (T0, T0 + 60, 200, False),
            (T0 + 120, T0 + 120, 200, False),
            (T0 + 180, T0 + 240, 404, False),
            (T0 + 300, T0 + 300, 200, True),
        ]
        assert rows[2].digest == REMOVED
        assert up.hits["/prices"] == 6


async def test_ignore_hides_a_changing_clock_and_keeps_it_in_the_content(tmp_path: Path) -> None:
    async with Upstream() as up, batch_rig(tmp_path) as rig:
        url = up.url("/clock")
        up.page("/clock", page("Apples cost 3 euros.", clock="12:00:01"))
        ignoring = await fetch(rig, INDEXER, url, max_age_s=0, ignore=[".clock"])
        plain = await fetch(rig, INDEXER, url, max_age_s=0, tag="plain")
        assert (change(ignoring)["status"], change(plain)["status"]) == ("new", "new")
        up.page("/clock", page("Apples cost 3 euros.", clock="12:00:02"))
        rig.clock.now += 1
        ignoring = await fetch(rig, INDEXER, url, max_age_s=0, ignore=[".clock"])
        assert change(ignoring)["status"] == "same"
        # The content is the page as asked: the clock is still in it.
        assert ignoring["content"] == "# Prices\n\nApples cost 3 euros.\n\nUpdated 12:00:02"
        plain = await fetch(rig, INDEXER, url, max_age_s=0, tag="plain")
        assert change(plain)["status"] == "changed"
        assert change(plain)["diff"] == (
            "--- previous\n+++ current\n@@ -2,4 +2,4 @@\n \n Apples cost 3 euros.\n \n"
            "-Updated 12:00:01\n+Updated 12:00:02\n"
        )
        # A real change outside the ignored part is still seen.
        up.page("/clock", page("Apples cost 4 euros.", clock="12:00:03"))
        rig.clock.now += 1
        ignoring = await fetch(rig, INDEXER, url, max_age_s=0, ignore=[".clock"])
        assert change(ignoring)["diff"] == (
            "--- previous\n+++ current\n@@ -1,3 +1,3 @@\n # Prices\n \n"
            "-Apples cost 3 euros.\n+Apples cost 4 euros.\n"
        )


async def test_callers_and_tags_keep_histories_apart(tmp_path: Path) -> None:
    async with Upstream() as up, batch_rig(tmp_path) as rig:
        url = up.url("/p")
        up.page("/p", page("One."))
        assert change(await fetch(rig, INDEXER, url))["status"] == "new"
        assert change(await fetch(rig, INDEXER, url))["status"] == "same"
        # Another caller learns nothing of the first one's fetch: new, no previous time.
        other = change(await fetch(rig, CRAWLER, url))
        assert (other["status"], other["previous_fetched_at"]) == ("new", None)
        # Another tag of the same caller is a history of its own.
        tagged = change(await fetch(rig, INDEXER, url, tag="pricing"))
        assert (tagged["status"], tagged["previous_fetched_at"]) == ("new", None)
        assert change(await fetch(rig, INDEXER, url, tag="pricing"))["status"] == "same"
        history = rig.service.changes.history
        assert history is not None
        for owner, tag in (("indexer", ""), ("crawler", ""), ("indexer", "pricing")):
            assert len(await history.snapshots(owner, tag, url)) == 1


async def test_a_changes_fetch_never_compares_a_cached_copy_older_than_its_snapshot(
    tmp_path: Path,
) -> None:
    """The page key differs by robots: an ordinary fetch leaves an old copy under one key,
    a changes fetch under the other records a newer snapshot; the next changes fetch under
    the first key must not be answered from that old copy (it would say "changed")."""
    async with Upstream() as up, batch_rig(tmp_path) as rig:
        url = up.url("/p")
        up.page("/p", page("Old."))
        old = await rig.service.fetch(INDEXER, parse_options({"url": url}))
        up.page("/p", page("New."))
        rig.clock.now += 100
        newer = await fetch(rig, INDEXER, url, robots=False)
        assert (newer["cache"], change(newer)["status"]) == ("miss", "new")
        rig.clock.now += 10
        # Without changes, the old copy is still fresh (default max age 3600 s) ...
        plain = await rig.service.fetch(INDEXER, parse_options({"url": url}))
        assert (plain["cache"], plain["fetched_at"]) == ("hit", old["fetched_at"])
        # ... but a changes fetch refetches rather than compare it with a newer snapshot.
        again = await fetch(rig, INDEXER, url)
        assert (again["cache"], again["fetched_at"]) == ("miss", T0 + 110)
        assert change(again)["status"] == "same"
        # Served from the cache is fine when the copy is not older than the snapshot.
        rig.clock.now += 5
        hit = await fetch(rig, INDEXER, url)
        assert (hit["cache"], change(hit)["status"]) == ("hit", "same")


async def test_history_bounded_by_count_keeps_the_newest(tmp_path: Path) -> None:
    settings = dataclasses.replace(
        make_settings(tmp_path), history=HistorySettings(max_snapshots=3)
    )
    async with Upstream() as up, batch_rig(tmp_path, settings=settings) as rig:
        url = up.url("/p")
        for n in range(5):
            up.page("/p", page(f"Version {n}."))
            rig.clock.now += 10
            await fetch(rig, INDEXER, url, max_age_s=0)
        history = rig.service.changes.history
        assert history is not None
        rows = await history.snapshots("indexer", "", url)
        assert [r.fetched_at for r in rows] == [T0 + 30, T0 + 40, T0 + 50]


async def test_the_history_survives_a_restart(tmp_path: Path) -> None:
    async with Upstream() as up:
        url = up.url("/p")
        up.page("/p", page("One."))
        async with batch_rig(tmp_path) as rig:
            assert change(await fetch(rig, INDEXER, url, max_age_s=0))["status"] == "new"
        up.page("/p", page("Two."))
        async with batch_rig(tmp_path) as rig:  # a new Service on the same data directory
            again = change(await fetch(rig, INDEXER, url, max_age_s=0))
        assert (again["status"], again["previous_fetched_at"]) == ("changed", T0)
        assert (
            again["diff"]
            == "--- previous\n+++ current\n@@ -1,3 +1,3 @@\n # Prices\n \n-One.\n+Two.\n"
        )


async def test_a_failing_upstream_records_nothing(tmp_path: Path) -> None:
    async with Upstream() as up, batch_rig(tmp_path) as rig:
        url = up.url("/p")
        up.page("/p", page("One."))
        await fetch(rig, INDEXER, url, max_age_s=0)
        up.page("/p", "busy", status=503, content_type="text/plain")
        rig.clock.now += 10
        failed = await fetch(rig, INDEXER, url, max_age_s=0)
        assert (failed["status"], failed["change"]) == (503, None)
        up.page("/p", page("One."))
        rig.clock.now += 10
        back = change(await fetch(rig, INDEXER, url, max_age_s=0))
        assert (back["status"], back["previous_fetched_at"]) == ("same", T0)


async def test_a_long_diff_runs_in_the_pool_and_is_cut_to_the_settings(tmp_path: Path) -> None:
    settings = dataclasses.replace(
        make_settings(tmp_path),
        history=HistorySettings(diff_max_lines=1500, diff_max_bytes=1 << 20),
    )
    old = "".join(f"old line {i}\n" for i in range(2000))
    new = "".join(f"new line {i}\n" for i in range(2000))
    async with Upstream() as up, batch_rig(tmp_path, settings=settings) as rig:
        url = up.url("/t")
        up.page("/t", old, content_type="text/plain; charset=utf-8")
        await fetch(rig, INDEXER, url, max_age_s=0)
        up.page("/t", new, content_type="text/plain; charset=utf-8")
        rig.clock.now += 1
        got = change(await fetch(rig, INDEXER, url, max_age_s=0))
    assert (got["status"], got["added"], got["removed"], got["truncated"]) == (
        "changed",
        1500,
        1500,
        True,
    )
    assert got["diff"].startswith("--- previous\n+++ current\n@@ -1,1500 +1,1500 @@\n-old line 0\n")


async def test_batch_targets_carry_the_change(tmp_path: Path) -> None:
    async with Upstream() as up, batch_rig(tmp_path) as rig:
        up.page("/a", page("A."))
        up.page("/b", page("B."))
        await fetch(rig, INDEXER, up.url("/a"))
        job = await rig.submit(
            INDEXER,
            "k",
            [up.url("/a"), {"url": up.url("/b"), "options": {"tag": "t"}}],
            changes=True,
        )
        await rig.runner.run_until_idle()
        body = await rig.jobs.results_page(INDEXER, job, 0, 10, int(rig.clock()), 1 << 20)
    items = loads(body)["items"]
    assert [item["result"]["change"]["status"] for item in items] == ["same", "new"]


async def test_crawled_pages_carry_the_change(tmp_path: Path) -> None:
    from sift.crawl.submit import submit_crawl

    async with Upstream() as up, batch_rig(tmp_path) as rig:
        up.page("/", '<html><body><main><p>Home.</p><a href="/a">a</a><a href="/b">b</a>'
                "</main></body></html>")  # fmt: skip
        up.page("/a", page("A."))
        up.page("/b", page("B."))
        statuses = []
        for key in ("c1", "c2"):
            body = {"url": up.url("/"), "options": {"changes": True, "max_age_s": 0}}
            view, _ = await submit_crawl(rig.jobs, rig.service, INDEXER, key, body, T0)
            await rig.runner.run_until_idle()
            found = await rig.jobs.results_page(INDEXER, view["id"], 0, 10, T0, 1 << 20)
            items = sorted(loads(found)["items"], key=lambda it: str(it["url"]))
            statuses.append([(it["url"], it["result"]["change"]["status"]) for it in items])
            up.page("/b", page("B, again."))
            rig.clock.now += 10
    assert statuses == [
        [(up.url("/"), "new"), (up.url("/a"), "new"), (up.url("/b"), "new")],
        [(up.url("/"), "same"), (up.url("/a"), "same"), (up.url("/b"), "changed")],
    ]


def test_options_refuse_what_changes_cannot_do() -> None:
    for bad, message in (
        ({"tag": "t"}, "tag: only with changes=true"),
        ({"ignore": [".x"]}, "ignore: only with changes=true"),
        ({"changes": True, "tag": "watch:1"}, "tag: watch:* tags are the watches' own"),
        ({"changes": True, "tag": "a b"}, "tag: expected 1-64 of A-Z a-z 0-9 . _ : -"),
        ({"changes": True, "tag": "x" * 65}, "tag: expected 1-64 of A-Z a-z 0-9 . _ : -"),
        (
            {"changes": True, "digest": "sha256:" + "0" * 64},
            "changes: not with digest (a continuation reads an old snapshot)",
        ),
    ):
        with pytest.raises(BadRequest) as info:
            parse_options({"url": "http://example.test/", **bad})
        assert info.value.message == f"invalid options: {message}"
    ok = parse_options(
        {"url": "http://e.test/", "changes": True, "tag": "a.B_1:-", "ignore": ["p"]}
    )
    assert (ok.changes, ok.tag, ok.ignore) == (True, "a.B_1:-", ("p",))


async def test_changes_are_refused_without_the_shared_history(tmp_path: Path) -> None:
    """A node configured for PostgreSQL that did not open its store keeps no history of its
    own: it refuses rather than record apart from the other nodes."""
    from sift.assembly import assemble
    from sift.config import StoreSettings
    from sift.dcache import DB
    from sift.workers import RenderPool

    settings: Settings = dataclasses.replace(
        make_settings(tmp_path), store=StoreSettings(url="postgresql://nobody@127.0.0.1:1/x")
    )
    async with assemble(
        settings, db=DB.open(":memory:"), render_pool=RenderPool(1), with_browser=False
    ) as parts:
        with pytest.raises(BadRequest) as info:
            await parts.service.fetch(
                INDEXER, parse_options({"url": "http://127.0.0.1:1/", "changes": True})
            )
    assert info.value.message == "changes: this sift keeps no change history here"
