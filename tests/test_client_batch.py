"""sift.client batch jobs (sync and async) and `sift batch --server`, against a real `sift serve`.

One server subprocess for the module; the upstream is a threaded HTTP server on 127.0.0.1
(the sync client blocks its thread, so the upstream cannot share an event loop with it).
Every URL is an IP literal: the server process uses the system resolver.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servehelpers import SIFT, Served, sift_serve
from sift.client import AsyncClient, BatchItem, Client, Envelope, JobView
from sift.errors import (
    BadRequest,
    ConnectFailed,
    NotFound,
    SiftError,
    SiftTimeout,
    SiftUnavailable,
    UpstreamError,
)
from syncupstream import SyncUpstream, serve_pages

PAGES = {
    f"/p{i}": f"<html><head><title>Page {i}</title></head><body><article><h1>Page {i}</h1>"
    f"<p>Paragraph {i} long enough to be the main content of this small test page.</p>"
    "</article></body></html>"
    for i in range(4)
}
_PARA = (
    "The harbour council met on Tuesday evening and agreed the new budget for the coming "
    "year, after a long debate about the cost of dredging the northern channel. "
)
# A news article that declares its metadata (JSON-LD, OpenGraph, a relative canonical link).
PAGES["/news"] = (
    "<html lang='en'><head><title>Harbour budget agreed | Example News</title>"
    "<link rel='canonical' href='/news/harbour-budget'>"
    "<meta property='og:site_name' content='Example News'>"
    '<script type="application/ld+json">{"@context": "https://schema.org", "@type": '
    '"NewsArticle", "headline": "Harbour budget agreed", "author": {"@type": "Person", '
    '"name": "Ada Lovelace"}, "datePublished": "2026-11-02T09:30:00Z", "description": '
    '"The council agreed the harbour budget."}</script></head><body><nav><a href="/">Home</a>'
    "</nav><article><h1>Harbour budget agreed</h1>"
    + f"<p>{_PARA * 2}</p>" * 6
    + "</article><footer>Example News</footer></body></html>"
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[SyncUpstream]:
    """/hang answers only at teardown: a target fetching it cannot finish before then."""
    pages = {path: (html, "text/html; charset=utf-8") for path, html in PAGES.items()}
    with serve_pages(pages, hang=frozenset({"/hang"})) as up:
        yield up


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with sift_serve(tmp_path_factory.mktemp("serve")) as s:
        yield s


def _title(item: BatchItem) -> str | None:
    assert item.result is not None
    return item.result.title


def test_submit_wait_results(served: Served, upstream: SyncUpstream) -> None:
    urls = [f"{upstream.base_url}/p{i}" for i in range(4)] + [f"{upstream.base_url}/missing"]
    seen: list[JobView] = []
    with Client(served.base_url, served.fleet_key) as client:
        job = client.submit(urls, idempotency_key="client-1", options={"format": "text"})
        assert job.created is True
        assert (job.view.targets_total, job.view.status) == (5, "queued")
        final = job.wait(progress=seen.append, poll_s=0.05)
        assert final.finished and final.status == "done"
        assert final.counts == {"pending": 0, "running": 0, "done": 5, "failed": 0, "cancelled": 0}
        assert seen[0].id == job.id and seen[-1] == final
        # Pages of 2: results() follows next_offset across three pages.
        items = list(job.results(page_size=2))
        assert [i.idx for i in items] == [0, 1, 2, 3, 4]
        assert [i.url for i in items] == urls
        assert [_title(i) for i in items[:4]] == [f"Page {i}" for i in range(4)]
        first = items[0].result
        assert isinstance(first, Envelope)
        assert (first.format, first.status) == ("text", 200)
        assert first.content == (
            "Paragraph 0 long enough to be the main content of this small test page."
        )
        assert items[4].result is not None and items[4].result.status == 404
        # The same key while the job lives: the same job, nothing new fetched.
        again = client.submit(urls, idempotency_key="client-1", options={"format": "text"})
        assert (again.created, again.id) == (False, job.id)
        assert client.job(job.id).view.status == "done"
        ndjson = b"".join(job.results_ndjson()).decode().splitlines()
        assert [json.loads(line)["idx"] for line in ndjson] == [0, 1, 2, 3, 4]
    assert upstream.hits["/p0"] == 1


def test_results_carry_page_type_and_metadata(served: Served, upstream: SyncUpstream) -> None:
    """A batch result is the whole envelope: the page's type and its metadata reach the
    client's ``Envelope`` as the single fetch gives them (dates in ISO 8601, the relative
    canonical link made absolute against the page's URL)."""
    url = f"{upstream.base_url}/news"
    with Client(served.base_url, served.fleet_key) as client:
        job = client.submit([url], idempotency_key="client-meta", options={"format": "text"})
        assert job.wait(poll_s=0.05).status == "done"
        [item] = list(job.results())
        single = client.fetch(url, format="text")
    assert item.result is not None
    assert (item.result.page_type, item.result.metadata) == (
        "article",
        {
            "description": "The council agreed the harbour budget.",
            "author": "Ada Lovelace",
            "published": "2026-11-02T09:30:00+00:00",
            "site_name": "Example News",
            "canonical_url": f"{upstream.base_url}/news/harbour-budget",
            "lang": "en",
        },
    )
    assert (single.page_type, single.metadata) == (item.result.page_type, item.result.metadata)


def test_target_errors_are_rebuilt_exceptions(
    served: Served, upstream: SyncUpstream, refused_port: int
) -> None:
    target = f"http://127.0.0.1:{refused_port}/"  # a closed port: the target fails
    with Client(served.base_url, served.fleet_key) as client:
        job = client.submit([target], idempotency_key="client-target-error")
        job.wait(poll_s=0.05)
        (item,) = list(job.results())
        assert item.status == "failed" and item.result is None
        assert type(item.error) is ConnectFailed
        assert (
            item.error.message
            == f"{target} could not be fetched: sift could not connect to its host."
        )
        # Another caller's job is as missing as an unknown one.
        with Client(served.base_url, served.restricted_key) as other, pytest.raises(NotFound):
            other.job(job.id)
        with pytest.raises(BadRequest) as info:
            client.submit(["ftp://x/"], idempotency_key="client-bad")
        assert type(info.value) is BadRequest
        assert info.value.message == (
            "1 of 1 targets are invalid: [0] Only http and https URLs can be fetched, not ftp:."
        )


def test_a_refused_batch_is_refused_at_submit(served: Served, upstream: SyncUpstream) -> None:
    """A restricted caller's loopback target: the BadRequest (422) of the submission names
    it; no job is stored, nothing is fetched."""
    url = f"{upstream.base_url}/refused"
    with Client(served.base_url, served.restricted_key) as client:
        with pytest.raises(BadRequest) as info:
            client.submit([url], idempotency_key="client-restricted")
        assert type(info.value) is BadRequest
        assert info.value.message == (
            f"1 of 1 targets are refused before any fetch: [0] {url}: blocked_address (its "
            "host, address or port is outside this caller's egress policy)"
        )
        assert info.value.hint.startswith("This caller may only reach public addresses")
        assert info.value.hint.endswith(" and submit again; nothing was stored.")
        assert client.request("GET", "/v1/batch")["items"] == []
    assert upstream.hits["/refused"] == 0


def test_cancel(served: Served, upstream: SyncUpstream) -> None:
    with Client(served.base_url, served.fleet_key) as client:
        job = client.submit([f"{upstream.base_url}/hang"] * 3, idempotency_key="client-cancel")
        view = job.cancel()
        # /hang never answers before teardown: no target can finish before the cancel.
        assert view.status == "cancelled"
        assert view.counts == {"pending": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 3}
        assert job.wait(poll_s=0.05).status == "cancelled"
        assert {i.status for i in job.results()} == {"cancelled"}
        errors = [i.error for i in job.results()]
        # "cancelled" is a target-level code outside the error tree: a plain SiftError
        # carrying it (a class per code would join the tree).
        assert all(type(e) is SiftError and e.code == "cancelled" for e in errors)
        assert errors[0] is not None and errors[0].to_dict()["error"]["code"] == "cancelled"


def test_sift_down_is_sift_unavailable_not_an_upstream_error(refused_port: int) -> None:
    base = f"http://127.0.0.1:{refused_port}"
    with Client(base, "k") as client, pytest.raises(SiftUnavailable) as info:
        client.fetch("http://127.0.0.1/")
    exc = info.value
    assert type(exc) is SiftUnavailable and not isinstance(exc, UpstreamError)
    assert exc.code == "sift_unavailable"
    assert exc.message.startswith(f"cannot reach sift at {base} (ConnectError: ")
    assert exc.message.endswith(
        "; sift itself is down or unreachable, the target site was never asked"
    )
    assert exc.hint.startswith("sift itself is not reachable: check that `sift serve` runs")


async def test_sift_down_is_sift_unavailable_async(refused_port: int) -> None:
    base = f"http://127.0.0.1:{refused_port}"
    async with AsyncClient(base, "k") as client:
        with pytest.raises(SiftUnavailable) as info:
            await client.submit(["http://127.0.0.1/"], idempotency_key="k")
    assert type(info.value) is SiftUnavailable
    assert info.value.message.startswith(f"cannot reach sift at {base} (ConnectError: ")


def test_target_down_is_the_upstream_error_sift_reports(served: Served, refused_port: int) -> None:
    """sift is up, the target site's port is closed: sift's own ConnectFailed, an
    UpstreamError, never SiftUnavailable."""
    target = f"http://127.0.0.1:{refused_port}/"
    with Client(served.base_url, served.fleet_key) as client, pytest.raises(UpstreamError) as info:
        client.fetch(target)
    exc = info.value
    assert type(exc) is ConnectFailed and not isinstance(exc, SiftUnavailable)
    assert exc.message == f"{target} could not be fetched: sift could not connect to its host."


def test_sift_silent_is_sift_timeout() -> None:
    """A listener that accepts connections (the kernel's backlog) but never answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        base = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with Client(base, "k", timeout_s=0.5) as client, pytest.raises(SiftTimeout) as info:
            client.fetch("http://127.0.0.1/")
    assert isinstance(info.value, SiftUnavailable) and info.value.code == "sift_timeout"
    assert info.value.message.startswith(f"sift at {base} did not answer in time (ReadTimeout)")


def test_an_answer_that_is_not_sifts_is_sift_unavailable(upstream: SyncUpstream) -> None:
    """An HTTP server that is not sift (a proxy's error page): 501 in HTML, no error object."""
    with Client(upstream.base_url, "k") as client, pytest.raises(SiftUnavailable) as info:
        client.fetch("http://127.0.0.1/")
    assert type(info.value) is SiftUnavailable
    assert info.value.message == (
        f"sift at {upstream.base_url} is not answering: HTTP 501 came back without sift's "
        "error object (a proxy in front of a stopped sift, or not sift)"
    )


async def test_async_job(served: Served, upstream: SyncUpstream) -> None:
    urls = [f"{upstream.base_url}/p1", f"{upstream.base_url}/p2"]
    async with AsyncClient(served.base_url, served.fleet_key) as client:
        job = await client.submit(urls, idempotency_key="client-async")
        final = await job.wait(poll_s=0.05)
        assert final.status == "done" and final.targets_done == 2
        titles = [_title(item) async for item in job.results(page_size=1)]
        assert titles == ["Page 1", "Page 2"]
        chunks = [c async for c in job.results_ndjson()]
        assert len(b"".join(chunks).splitlines()) == 2
        assert (await (await client.job(job.id)).cancel()).status == "done"


def test_cli_batch_server_uses_the_client(
    served: Served, upstream: SyncUpstream, tmp_path: Path
) -> None:
    listing = tmp_path / "urls.txt"
    listing.write_text(f"# two pages\n{upstream.base_url}/p2\n\n{upstream.base_url}/p3\n")
    out = tmp_path / "out.ndjson"
    proc = subprocess.run(
        [
            *SIFT,
            "batch",
            str(listing),
            "--server",
            served.base_url,
            "--key",
            served.fleet_key,
            "--out",
            str(out),
            "--poll-s",
            "0.05",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["idx"], r["status"], r["result"]["title"]) for r in lines] == [
        (0, "done", "Page 2"),
        (1, "done", "Page 3"),
    ]
    assert " done: 2 done, 0 failed, 0 cancelled of 2 in " in proc.stderr
    # A refused key is the server's error, printed with its hint.
    proc = subprocess.run(
        [*SIFT, "batch", str(listing), "--server", served.base_url, "--key", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("sift: unknown key\nhint: ")
