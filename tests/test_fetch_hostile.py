"""Hostile upstreams: nothing an upstream sends may hang sift, balloon memory or crash it.

Every route comes from ``upstream.install_hostile_routes``. Deadlines are short policy
parameters (a drip ends at ``timeout_s``), never long sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from sift.errors import TooLarge, UnsupportedEncoding, UpstreamError, UpstreamTimeout
from sift.fetch import Fetcher, FetchPolicy, StaticResolver, restricted_policy
from upstream import Upstream, encode, install_hostile_routes

LIMIT = 1 << 20


@pytest.fixture
async def hostile() -> AsyncIterator[Upstream]:
    async with Upstream("127.0.1.1") as up:
        install_hostile_routes(up, drip_interval_s=0.02)
        yield up


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(
        user_agent="sift-test",
        resolver=StaticResolver({"pub.test": ["127.0.1.1"]}),
        extra_public_cidrs=["127.0.1.0/24"],
    ) as f:
        yield f


def policy(up: Upstream, **kw: object) -> FetchPolicy:
    kw.setdefault("max_download_bytes", LIMIT)
    kw.setdefault("timeout_s", 5.0)
    return restricted_policy(frozenset({up.port}), **kw)


def url(up: Upstream, path: str) -> str:
    return f"http://pub.test:{up.port}{path}"


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
async def test_bombs_stop_at_the_limit(hostile: Upstream, fetcher: Fetcher, coding: str) -> None:
    with pytest.raises(TooLarge) as info:
        await fetcher.fetch(url(hostile, f"/bomb/{coding}"), policy(hostile))
    assert (info.value.code, info.value.status) == ("too_large", 502)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "deflate-raw", "br", "zstd", "x-gzip"])
async def test_encoded_bodies_are_decoded(hostile: Upstream, fetcher: Fetcher, coding: str) -> None:
    body = b"<p>" + b"compressible text " * 5000 + b"</p>"
    wire = encode(body, "gzip" if coding == "x-gzip" else coding)
    header = "deflate" if coding == "deflate-raw" else coding
    hostile.page("/enc", wire, headers={"Content-Encoding": header})
    r = await fetcher.fetch(url(hostile, "/enc"), policy(hostile))
    assert r.body == body
    assert r.headers["content-encoding"] == header


async def test_body_exactly_at_the_limit_passes(hostile: Upstream, fetcher: Fetcher) -> None:
    hostile.page("/exact", b"a" * LIMIT, content_type="text/plain")
    hostile.page("/over", b"a" * (LIMIT + 1), content_type="text/plain")
    assert len((await fetcher.fetch(url(hostile, "/exact"), policy(hostile))).body) == LIMIT
    with pytest.raises(TooLarge, match="announced"):
        await fetcher.fetch(url(hostile, "/over"), policy(hostile))


async def test_endless_chunked_body(hostile: Upstream, fetcher: Fetcher) -> None:
    with pytest.raises(TooLarge):
        await fetcher.fetch(url(hostile, "/endless"), policy(hostile))


async def test_truncation_when_asked(hostile: Upstream, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(url(hostile, "/endless"), policy(hostile), allow_truncation=True)
    assert (r.truncated, len(r.body), r.body[:3]) == (True, LIMIT, b"xxx")
    r = await fetcher.fetch(url(hostile, "/bomb/gzip"), policy(hostile), allow_truncation=True)
    assert (r.truncated, r.body) == (True, bytes(LIMIT))


async def test_huge_content_length_is_refused_before_reading(
    hostile: Upstream, fetcher: Fetcher
) -> None:
    # The body never comes: only the header check can end this before the deadline.
    with pytest.raises(TooLarge, match="announced 1099511627776 bytes"):
        await fetcher.fetch(url(hostile, "/huge-length"), policy(hostile, timeout_s=30.0))


async def test_slow_drip_ends_at_the_deadline(hostile: Upstream, fetcher: Fetcher) -> None:
    with pytest.raises(UpstreamTimeout) as info:
        await fetcher.fetch(url(hostile, "/drip"), policy(hostile, timeout_s=0.3))
    assert (info.value.code, info.value.status) == ("upstream_timeout", 504)


async def test_slow_headers_end_at_the_deadline(hostile: Upstream, fetcher: Fetcher) -> None:
    with pytest.raises(UpstreamTimeout):
        await fetcher.fetch(url(hostile, "/slow-headers"), policy(hostile, timeout_s=0.2))


async def test_one_deadline_spans_every_hop(hostile: Upstream, fetcher: Fetcher) -> None:
    async def slow_hop(request: web.Request) -> web.StreamResponse:
        n = int(request.path.rsplit("/", 1)[1])
        await asyncio.sleep(0.1)
        return web.Response(status=302, headers={"Location": f"/slow/{n + 1}"})

    hostile.route("/slow/", slow_hop, prefix=True)
    # Each hop takes 0.1 s, well inside 0.35 s; the chain as a whole does not fit (and
    # ten redirects are allowed, so only the deadline can end it).
    fleet = FetchPolicy(allow_private=True, timeout_s=0.35)
    with pytest.raises(UpstreamTimeout):
        await fetcher.fetch(url(hostile, "/slow/0"), fleet)
    assert hostile.hits.total() >= 2


@pytest.mark.parametrize("path", ["/header-flood", "/header-huge"])
async def test_header_bounds(hostile: Upstream, fetcher: Fetcher, path: str) -> None:
    with pytest.raises(TooLarge, match="headers"):
        await fetcher.fetch(url(hostile, path), policy(hostile))


async def test_header_bounds_are_policy_parameters(hostile: Upstream, fetcher: Fetcher) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.Response(text="ok")
        for i in range(20):
            resp.headers[f"X-H{i}"] = "v" * 100
        resp.headers["X-Long"] = "w" * 9000  # one field over aiohttp's 8190-byte line limit
        return resp

    async def fine(request: web.Request) -> web.StreamResponse:
        resp = web.Response(text="ok")
        for i in range(20):
            resp.headers[f"X-H{i}"] = "v" * 100
        return resp

    hostile.route("/long", handler)
    hostile.route("/fine", fine)
    with pytest.raises(TooLarge):
        await fetcher.fetch(url(hostile, "/long"), policy(hostile))
    assert (await fetcher.fetch(url(hostile, "/fine"), policy(hostile))).body == b"ok"
    with pytest.raises(TooLarge):
        await fetcher.fetch(url(hostile, "/fine"), policy(hostile, max_header_fields=10))
    with pytest.raises(TooLarge):
        await fetcher.fetch(url(hostile, "/fine"), policy(hostile, max_header_bytes=1024))


@pytest.mark.parametrize("path", ["/stacked", "/unknown-encoding"])
async def test_stacked_and_unknown_encodings(
    hostile: Upstream, fetcher: Fetcher, path: str
) -> None:
    with pytest.raises(UnsupportedEncoding) as info:
        await fetcher.fetch(url(hostile, path), policy(hostile))
    assert (info.value.code, info.value.status) == ("unsupported_encoding", 502)


async def test_corrupt_compressed_body(hostile: Upstream, fetcher: Fetcher) -> None:
    garbage = b"\x1f\x8b\x08\x00garbage-not-deflate"
    hostile.page("/corrupt", garbage, headers={"Content-Encoding": "gzip"})
    with pytest.raises(UpstreamError) as info:
        await fetcher.fetch(url(hostile, "/corrupt"), policy(hostile))
    assert info.value.code == "upstream_error"


@pytest.mark.parametrize(("path", "charset"), [
    ("/charset/zlib", "utf-8"),  # the bytes-to-bytes codec is ignored; ASCII sniffs as UTF-8
    ("/charset/rot13", "utf-8"),
    ("/charset/base64", "utf-8"),
    ("/charset/utf7", "utf-8"),
    ("/charset/bom-utf16", "utf-16"),
    ("/charset/meta", "koi8-r"),
    ("/charset/http-equiv", "cp1251"),
    ("/charset/header-wins", "utf-8"),
    ("/charset/sniff", "cp1251"),
    ("/charset/binary", None),
    ("/page", "utf-8"),
])  # fmt: skip
async def test_charsets(
    hostile: Upstream, fetcher: Fetcher, path: str, charset: str | None
) -> None:
    r = await fetcher.fetch(url(hostile, path), policy(hostile))
    assert r.charset == charset
    if charset is not None:
        text = r.body.decode(charset)
        assert "<" in text


async def test_decoded_texts(hostile: Upstream, fetcher: Fetcher) -> None:
    meta = await fetcher.fetch(url(hostile, "/charset/meta"), policy(hostile))
    assert "привет" in meta.body.decode(meta.charset or "")
    sniff = await fetcher.fetch(url(hostile, "/charset/sniff"), policy(hostile))
    assert "Съешь же ещё" in sniff.body.decode(sniff.charset or "")
    wide = await fetcher.fetch(url(hostile, "/charset/bom-utf16"), policy(hostile))
    assert wide.body.decode(wide.charset or "") == "<p>wide</p>"


@pytest.mark.parametrize("status", [404, 500, 429])
async def test_error_statuses_are_results(hostile: Upstream, fetcher: Fetcher, status: int) -> None:
    r = await fetcher.fetch(url(hostile, f"/status/{status}"), policy(hostile))
    assert (r.status, r.body) == (status, f"status {status}".encode())
