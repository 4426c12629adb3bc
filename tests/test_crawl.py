"""Crawls over the batch runner, against a local multi-host site (tests/crawlsite.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from batchrig import INDEXER, Rig, batch_rig
from crawlsite import Site, crawl_site
from sift.crawl.submit import submit_crawl
from sift.errors import BadRequest, InvalidUrl
from sift.jsonio import loads
from upstream import Upstream


async def crawl(rig: Rig, site: Site, key: str, **body: Any) -> tuple[dict[str, Any], list[Any]]:
    """Run a crawl to the end: its final view and every result item, in idx order."""
    view, created = await submit_crawl(rig.jobs, rig.service, INDEXER, key, body, int(rig.clock()))
    assert created
    await rig.runner.run_until_idle()
    return await finished(rig, view["id"])


async def finished(rig: Rig, job_id: str) -> tuple[dict[str, Any], list[Any]]:
    view = await rig.status(INDEXER, job_id)
    page = loads(await rig.jobs.results_page(INDEXER, job_id, 0, 1000, int(rig.clock()), 1 << 30))
    assert page["next_offset"] is None
    return view, page["items"]


def paths(site: Site, items: list[Any]) -> list[str]:
    out = []
    for it in items:
        for prefix, short in ((site.m(""), ""), (site.d(""), "D"), (site.o(""), "O")):
            if it["url"].startswith(prefix):
                out.append(short + it["url"][len(prefix) :])
                break
        else:
            out.append(it["url"])
    return out


def check_tree(items: list[Any]) -> None:
    """Exactly once each; idx in order; every parent an earlier page one level up."""
    urls = [it["url"] for it in items]
    assert len(urls) == len(set(urls))
    assert [it["idx"] for it in items] == list(range(len(items)))
    assert items[0]["depth"] == 0 and items[0]["parent"] is None
    for it in items[1:]:
        parent = items[it["parent"]]
        assert parent["idx"] < it["idx"]
        assert parent["depth"] == it["depth"] - 1


@pytest.fixture
async def site() -> Any:
    async with crawl_site() as s:
        yield s


@pytest.mark.parametrize("remembered", [50_000, 1])
async def test_host_scope_follows_links_and_sitemaps_once_each(
    tmp_path: Path, site: Site, remembered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the runner's memory of seen URLs down to one entry, the seen-set in the store
    # alone keeps every URL to one fetch: the same exact crawl.
    monkeypatch.setattr("sift.crawl.crawler.MAX_REMEMBERED_SEEN", remembered)
    async with batch_rig(tmp_path, settings=site.settings(tmp_path)) as rig:
        view, items = await crawl(rig, site, "c1", url=site.m("/"), scope="host")
    assert view["kind"] == "crawl" and view["status"] == "done", view
    assert view["crawl"] == {
        "url": site.m("/"),
        "scope": "host",
        "max_pages": 100,
        "max_depth": 3,
        "include": [],
        "exclude": [],
        "sitemap": True,
    }
    assert sorted(paths(site, items)) == sorted(
        [
            "/",
            *("/docs/", "/blog/", "/about.html", "/old", "/away", "/trap/"),
            *("/docs/hidden.html", "/docs/a.html", "/blog/3.html"),
            *("/docs/b.html", "/docs/sub/", "/blog/1.html", "/blog/2.html", "/trap/x/"),
            *("/docs/sub/c.html", "/docs/sub/d.html", "/trap/x/x/"),
        ]
    )
    assert view["targets_total"] == view["targets_done"] == len(items) == 18
    check_tree(items)
    depth = {p: it["depth"] for p, it in zip(paths(site, items), items, strict=True)}
    assert (depth["/docs/hidden.html"], depth["/docs/a.html"], depth["/docs/sub/c.html"]) == (
        1,
        1,
        3,
    )
    # Each page was fetched once; robots.txt's Disallow, nofollow, the PDF, the depth limit
    # and the other hosts kept sift away from the rest.
    for p in ("/", "/docs/", "/docs/a.html", "/docs/b.html", "/blog/3.html", "/docs/moved.html"):
        assert site.main.hits[p] == 1, p
    for p in ("/private/x", "/secret/", "/file.pdf", "/docs/sub/deep/e.html", "/trap/x/x/x/"):
        assert site.main.hits[p] == 0, p
    assert site.docs.hits["/"] == 0 and site.other.hits["/"] == 0
    assert site.other.hits["/sitemap.xml"] == 0  # named by the index, on another host
    # The off-scope redirect: fetched (the redirect is followed) but not crawled further.
    away = items[paths(site, items).index("/away")]
    assert away["result"]["final_url"] == site.o("/landing")
    assert "redirected_off_scope" in away["result"]["warnings"]
    assert site.other.hits["/o2.html"] == 0
    # An on-scope redirect's final URL counts as seen.
    old = items[paths(site, items).index("/old")]
    assert old["result"]["final_url"] == site.m("/docs/moved.html")


async def test_prefix_scope_and_exact_depths(tmp_path: Path, site: Site) -> None:
    async with batch_rig(tmp_path, settings=site.settings(tmp_path)) as rig:
        view, items = await crawl(rig, site, "c2", url=site.m("/docs/"))
    assert view["status"] == "done"
    # robots.txt's Crawl-delay (2 s) spaced the starts on site.test: the runner waited for
    # it (on the rig's fake clock) between pages.
    assert rig.clock.slept.count(2.0) >= len(items) - 2
    got = dict(zip(paths(site, items), [it["depth"] for it in items], strict=True))
    assert got == {
        "/docs/": 0,
        "/docs/a.html": 1,
        "/docs/b.html": 1,
        "/docs/sub/": 1,
        "/docs/hidden.html": 1,
        "/docs/sub/c.html": 2,
        "/docs/sub/d.html": 2,
        "/docs/sub/deep/e.html": 3,
    }
    check_tree(items)


async def test_domain_scope_takes_subdomains_and_never_a_refused_address(
    tmp_path: Path, site: Site
) -> None:
    async with batch_rig(tmp_path, settings=site.settings(tmp_path)) as rig:
        view, items = await crawl(
            rig, site, "c3", url=site.m("/"), scope="domain", max_depth=1, sitemap=False
        )
    assert sorted(paths(site, items)) == sorted(
        ["/", "/docs/", "/blog/", "/about.html", "/old", "/away", "/trap/", "D/"]
    )
    assert site.canary.accepted() == 0  # canary.site.test is in scope but not reachable
    assert view["status"] == "done"


async def test_include_exclude_and_max_pages(tmp_path: Path, site: Site) -> None:
    async with batch_rig(tmp_path, settings=site.settings(tmp_path)) as rig:
        _, items = await crawl(
            rig,
            site,
            "c4",
            url=site.m("/"),
            scope="host",
            include=["/docs/**"],
            exclude=["/docs/sub/*"],
        )
        assert sorted(paths(site, items)) == sorted(
            ["/", "/docs/", "/docs/hidden.html", "/docs/a.html", "/docs/b.html"]
        )
        view, items = await crawl(rig, site, "c5", url=site.m("/"), scope="host", max_pages=4)
        # The job stops growing at max_pages: the start page and its first three links.
        assert paths(site, items) == ["/", "/docs/", "/blog/", "/about.html"]
        assert view["targets_total"] == 4 and view["status"] == "done"


async def test_trap_is_cut_where_the_path_repeats(tmp_path: Path, site: Site) -> None:
    async with batch_rig(tmp_path, settings=site.settings(tmp_path)) as rig:
        _, items = await crawl(rig, site, "c6", url=site.m("/trap/"), max_depth=50)
    assert paths(site, items) == ["/trap/", "/trap/x/", "/trap/x/x/"]
    assert site.main.hits["/trap/x/x/x/"] == 0


async def test_bad_requests_are_refused_whole_and_nothing_is_stored(
    tmp_path: Path, site: Site
) -> None:
    async with batch_rig(tmp_path, settings=site.settings(tmp_path)) as rig:
        submit = rig.jobs.store.live_batch_jobs_total
        with pytest.raises(BadRequest) as bad:
            await submit_crawl(
                rig.jobs,
                rig.service,
                INDEXER,
                "k",
                {
                    "url": site.m("/"),
                    "max_pages": 0,
                    "max_depth": -1,
                    "scope": "site",
                    "include": ["/a/[b"],
                    "exclude": "x",
                    "sitemap": "yes",
                    "depth": 2,
                    "options": {"format": "pdf"},
                },
                0,
            )
        assert bad.value.code == "invalid_request"
        assert bad.value.message == (
            "invalid crawl request: unknown field depth (known: url, max_pages, max_depth, "
            "scope, include, exclude, sitemap, options); scope: expected one of host, domain, "
            "prefix; include[0]: '/a/[b' is not a valid glob: unclosed '[' at 3; exclude: "
            "expected a list of at most 32 path globs; sitemap: expected true or false; "
            "max_pages: expected an integer from 1 to 1000000; max_depth: expected an integer "
            "from 0 to 100; options: format: expected one of markdown, text, html, raw, "
            "screenshot"
        )
        with pytest.raises(InvalidUrl):
            await submit_crawl(rig.jobs, rig.service, INDEXER, "k", {"url": "gopher://x/"}, 0)
        canary = f"http://canary.site.test:{site.canary_port}/"
        with pytest.raises(BadRequest) as refused:  # [egress.resolve] maps it to 127.0.0.1
            await submit_crawl(rig.jobs, rig.service, INDEXER, "k", {"url": canary}, 0)
        assert refused.value.message == (
            f"the start URL is refused before any fetch: {canary}: blocked_address (its "
            "host, address or port is outside this caller's egress policy)"
        )
        assert await submit() == 0
        assert site.canary.accepted() == 0
        assert json.dumps(site.main.hits) == "{}"


async def test_cancel_mid_crawl_stops_it_growing(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        n = request.path.rsplit("/", 1)[1]
        return web.Response(text=f'<a href="/next/{n}">next</a>', content_type="text/html")

    async with Upstream() as up:
        up.page("/", "".join(f'<a href="/slow/{i}">{i}</a>' for i in range(6)))
        up.route("/slow/", slow, prefix=True)
        async with batch_rig(tmp_path, concurrency=4, per_host=4) as rig:
            view, _ = await submit_crawl(
                rig.jobs, rig.service, INDEXER, "k", {"url": up.url("/")}, int(rig.clock())
            )
            running = asyncio.create_task(rig.runner.run_until_idle())
            while sum(n for p, n in up.hits.items() if p.startswith("/slow/")) < 4:
                assert not running.done()
                await asyncio.sleep(0.01)
            cancelled = await rig.jobs.cancel(INDEXER, view["id"], int(rig.clock()))
            release.set()  # the abandoned fetches may finish now: nothing of them lands
            await asyncio.wait_for(running, 10)
            await asyncio.sleep(0.1)
            after = await rig.status(INDEXER, view["id"])
    assert cancelled["status"] == after["status"] == "cancelled"
    assert after["targets_total"] == 7  # no link of a cancelled page was appended
    assert after["counts"] == {"pending": 0, "running": 0, "done": 1, "failed": 0, "cancelled": 6}
    assert after["targets_done"] == 7
    assert not any(p.startswith("/next/") for p in up.hits)
