"""The fetcher against well-behaved (and simply broken) local upstreams.

Pages, redirects, conditional GETs, translated errors, TLS through the IP-literal connect,
pool separation and the fetcher's lifecycle. The upstream listens on the pseudo-public
127.0.1.1 (``extra_public_cidrs``), so the restricted path runs the whole guard for real.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from servehelpers import closed_port
from sift.errors import (
    Blocked,
    ConnectFailed,
    DnsFailure,
    SiftError,
    TlsFailure,
    TooManyRedirects,
    UpstreamError,
    UpstreamTimeout,
)
from sift.fetch import Fetcher, FetchPolicy, StaticResolver, restricted_policy
from sift.fetch.transport import CONNECT_TIMEOUT_MEMO_SIZE, _timeout, send, translate
from upstream import BlackholeListener, CanaryListener, RawUpstream, TestCA, Upstream

UA = "sift/0.1.0 (+https://github.com/sift-fetch/sift)"
NAMES = {"pub.test": ["127.0.1.1"], "other.test": ["127.0.1.1"]}
FLEET = FetchPolicy(allow_private=True, timeout_s=5.0)


def make_fetcher(**kw: object) -> Fetcher:
    args: dict[str, object] = {
        "user_agent": UA,
        "resolver": StaticResolver(NAMES),
        "extra_public_cidrs": ["127.0.1.0/24"],
    }
    args.update(kw)
    return Fetcher(**args)  # type: ignore[arg-type]


@pytest.fixture
async def up() -> AsyncIterator[Upstream]:
    async with Upstream("127.0.1.1") as server:
        server.page("/page", "<html><body>hello</body></html>")
        for n in range(1, 13):
            server.redirect(f"/hop/{n}", f"/hop/{n - 1}" if n > 1 else "/page")
        yield server


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with make_fetcher() as f:
        yield f


def restricted(up: Upstream, **kw: object) -> FetchPolicy:
    return restricted_policy(frozenset({up.port}), **kw)


async def test_page_result(up: Upstream, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(f"http://PUB.test:{up.port}/page#top", restricted(up))
    assert r.url == r.final_url == f"http://pub.test:{up.port}/page"
    assert (r.status, r.body, r.redirects) == (200, b"<html><body>hello</body></html>", ())
    assert (r.content_type, r.charset) == ("text/html; charset=utf-8", "utf-8")
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["content-length"] == "31"
    assert (r.not_modified, r.etag, r.last_modified, r.truncated) == (False, None, None, False)
    assert set(r.timings) == {"resolve_s", "headers_s", "body_s", "total_s"}


async def test_request_carries_original_host_and_honest_headers(
    up: Upstream, fetcher: Fetcher
) -> None:
    await fetcher.fetch(f"http://pub.test:{up.port}/page?x=1", restricted(up))
    [req] = up.requests
    assert req.path_qs == "/page?x=1"
    assert req.headers["host"] == f"pub.test:{up.port}"
    assert req.headers["user-agent"] == UA
    assert req.headers["accept-encoding"] == "gzip, deflate, br, zstd"
    assert "cookie" not in req.headers


async def test_repeated_headers_are_joined(fetcher: Fetcher) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.Response(text="x")
        resp.headers.add("X-Dup", "a")
        resp.headers.add("X-Dup", "b")
        resp.headers.add("Set-Cookie", "s=1")
        return resp

    async with Upstream("127.0.1.1") as server:
        server.route("/", handler)
        r = await fetcher.fetch(f"http://pub.test:{server.port}/", FLEET)
        # No cookie jar: the next request must not carry the cookie back.
        await fetcher.fetch(f"http://pub.test:{server.port}/", FLEET)
    assert r.headers["x-dup"] == "a, b"
    assert "cookie" not in server.requests[1].headers


@pytest.mark.parametrize(
    ("fields", "content_type", "charset"),
    [
        # The last valid type wins, as in browsers; its own charset (or none) goes with it.
        (["text/plain; charset=iso-8859-5", "text/html"], "text/html", "utf-8"),
        (["text/plain", "text/html; charset=koi8-r"], "text/html; charset=koi8-r", "koi8-r"),
        # The same essence again without a charset keeps the earlier one.
        (["text/html; charset=koi8-r", "text/html"], "text/html; charset=koi8-r", "koi8-r"),
        # Unparsable types and */* are skipped; one field may list several types.
        (["text/html; charset=koi8-r", "nonsense", "*/*"], "text/html; charset=koi8-r", "koi8-r"),
        (['text/plain, text/html;charset="koi8-r"'], 'text/html;charset="koi8-r"', "koi8-r"),
    ],
)
async def test_the_last_valid_content_type_wins(
    fetcher: Fetcher, fields: list[str], content_type: str, charset: str
) -> None:
    body = "<p>Привет</p>".encode("koi8-r") if charset == "koi8-r" else b"<p>hello</p>"
    head = "".join(f"Content-Type: {f}\r\n" for f in fields)
    script = f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
    async with RawUpstream(script, host="127.0.1.1") as raw:
        r = await fetcher.fetch(raw.url("/"), FLEET)
    assert (r.content_type, r.charset, r.body) == (content_type, charset, body)


async def test_connect_timeout_memo_is_bounded(up: Upstream, fetcher: Fetcher) -> None:
    # A caller picks timeout_s (so connect_timeout_s) per request: every distinct value
    # must not stay in memory for good.
    _timeout.cache_clear()
    for i in range(CONNECT_TIMEOUT_MEMO_SIZE * 3):
        policy = FetchPolicy(allow_private=True, timeout_s=5.0, connect_timeout_s=1 + i / 1000)
        r = await fetcher.fetch(f"http://pub.test:{up.port}/page", policy)
        assert r.status == 200
    assert _timeout.cache_info().currsize == CONNECT_TIMEOUT_MEMO_SIZE


async def test_redirect_chain(up: Upstream, fetcher: Fetcher) -> None:
    r = await fetcher.fetch(f"http://pub.test:{up.port}/hop/3", restricted(up))
    base = f"http://pub.test:{up.port}"
    assert r.redirects == (f"{base}/hop/3", f"{base}/hop/2", f"{base}/hop/1")
    assert (r.final_url, r.status, r.url) == (f"{base}/page", 200, f"{base}/hop/3")


@pytest.mark.parametrize(("start", "policy_kind", "ok"), [
    (10, "fleet", True), (11, "fleet", False), (5, "restricted", True), (6, "restricted", False),
])  # fmt: skip
async def test_redirect_limits(
    up: Upstream, fetcher: Fetcher, start: int, policy_kind: str, ok: bool
) -> None:
    policy = FLEET if policy_kind == "fleet" else restricted(up)
    url = f"http://pub.test:{up.port}/hop/{start}"
    if ok:
        assert len((await fetcher.fetch(url, policy)).redirects) == start
        assert up.hits["/page"] == 1
    else:
        with pytest.raises(TooManyRedirects):
            await fetcher.fetch(url, policy)
        assert (up.hits.total(), up.hits["/page"]) == (policy.max_redirects + 1, 0)


async def test_redirect_loop_is_detected_early(up: Upstream, fetcher: Fetcher) -> None:
    up.redirect("/a", "/b", status=301)
    up.redirect("/b", f"http://pub.test:{up.port}/a#again", status=308)
    with pytest.raises(TooManyRedirects, match="loop"):
        await fetcher.fetch(f"http://pub.test:{up.port}/a", FLEET)
    assert (up.hits["/a"], up.hits["/b"]) == (1, 1)


async def test_relative_and_cross_host_redirects(up: Upstream, fetcher: Fetcher) -> None:
    up.redirect("/rel", "page?from=rel", status=303)
    up.redirect("/abs", f"http://other.test:{up.port}/page", status=307)
    r1 = await fetcher.fetch(f"http://pub.test:{up.port}/rel", FLEET)
    r2 = await fetcher.fetch(f"http://pub.test:{up.port}/abs", FLEET)
    assert r1.final_url == f"http://pub.test:{up.port}/page?from=rel"
    assert r2.final_url == f"http://other.test:{up.port}/page"
    assert up.requests[-1].headers["host"] == f"other.test:{up.port}"


async def test_redirect_without_location_is_the_result(up: Upstream, fetcher: Fetcher) -> None:
    up.page("/nowhere", "moved", status=302)
    r = await fetcher.fetch(f"http://pub.test:{up.port}/nowhere", FLEET)
    assert (r.status, r.body, r.redirects) == (302, b"moved", ())


async def test_conditional_get(up: Upstream, fetcher: Fetcher) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        validators = {"ETag": '"v1"', "Last-Modified": "Sun, 30 Nov 2025 00:00:00 GMT"}
        if (
            request.headers.get("If-None-Match") == '"v1"'
            or request.headers.get("If-Modified-Since") == validators["Last-Modified"]
        ):
            return web.Response(status=304, headers=validators)
        return web.Response(text="body", headers=validators)

    up.route("/cond", handler)
    url = f"http://pub.test:{up.port}/cond"
    fresh = await fetcher.fetch(url, FLEET)
    assert (fresh.status, fresh.body, fresh.not_modified, fresh.etag) == (
        200,
        b"body",
        False,
        '"v1"',
    )
    same = await fetcher.fetch(url, FLEET, etag='"v1"')
    assert (same.status, same.body, same.not_modified, same.etag) == (304, b"", True, '"v1"')
    by_date = await fetcher.fetch(url, FLEET, last_modified=fresh.last_modified)
    assert (by_date.status, by_date.not_modified) == (304, True)
    assert by_date.last_modified == "Sun, 30 Nov 2025 00:00:00 GMT"
    changed = await fetcher.fetch(url, FLEET, etag='"v0"')
    assert (changed.status, changed.not_modified) == (200, False)
    assert up.requests[1].headers["if-none-match"] == '"v1"'


async def test_status_pages_are_results(up: Upstream, fetcher: Fetcher) -> None:
    for status in (404, 429, 500, 503):
        up.page(f"/s{status}", f"status {status}", status=status, content_type="text/plain")
        r = await fetcher.fetch(f"http://pub.test:{up.port}/s{status}", FLEET)
        assert (r.status, r.body) == (status, f"status {status}".encode())


async def test_dns_failure(fetcher: Fetcher) -> None:
    with pytest.raises(DnsFailure) as info:
        await fetcher.fetch("http://unknown.test/", FLEET)
    assert (info.value.code, info.value.status) == ("dns_failure", 502)


async def test_refused_connection(fetcher: Fetcher) -> None:
    with closed_port("127.0.1.1") as port, pytest.raises(ConnectFailed) as info:
        await fetcher.fetch(f"http://pub.test:{port}/", FLEET)
    assert (info.value.code, info.value.status) == ("connect_failed", 502)
    assert "127.0.1.1" not in info.value.message


async def test_next_vetted_address_is_tried_when_one_refuses(up: Upstream) -> None:
    names = {"multi.test": ["127.0.1.2", "127.0.1.1"]}
    async with make_fetcher(resolver=StaticResolver(names)) as f:
        r = await f.fetch(f"http://multi.test:{up.port}/page", restricted(up))
    assert r.status == 200


async def test_connect_timeout() -> None:
    hole = BlackholeListener("127.0.1.1")
    try:
        async with make_fetcher() as f:
            policy = FetchPolicy(allow_private=True, connect_timeout_s=0.2, timeout_s=10.0)
            with pytest.raises(UpstreamTimeout) as info:
                await f.fetch(f"http://pub.test:{hole.port}/", policy)
    finally:
        hole.close()
    assert (info.value.code, info.value.status) == ("upstream_timeout", 504)


@pytest.mark.parametrize(("script", "error", "code"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", UpstreamError, "upstream_error"),
    (b"this is not http\r\n\r\n", UpstreamError, "upstream_error"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", UpstreamError,
     "upstream_error"),
    (b"", ConnectFailed, "connect_failed"),
])  # fmt: skip
async def test_broken_responses(
    fetcher: Fetcher, script: bytes, error: type[SiftError], code: str
) -> None:
    async with RawUpstream(script, host="127.0.1.1") as raw:
        with pytest.raises(error) as info:
            await fetcher.fetch(raw.url("/"), FLEET)
    assert info.value.code == code


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(Path(tmp_path_factory.mktemp("ca")))


async def test_tls_verifies_the_hostname_over_the_ip_literal(ca: TestCA) -> None:
    async with Upstream("127.0.1.1", ssl_context=ca.server_context("pub.test")) as tls:
        tls.page("/", "secure")
        async with make_fetcher(ssl_context=ca.client_context()) as f:
            r = await f.fetch(f"https://pub.test:{tls.port}/", FLEET)
            assert (r.status, r.body, r.final_url) == (200, b"secure", tls.url("/", "pub.test"))
            assert tls.requests[0].headers["host"] == f"pub.test:{tls.port}"
            # The certificate names pub.test only: other.test (same IP) must fail ...
            with pytest.raises(TlsFailure):
                await f.fetch(f"https://other.test:{tls.port}/", FLEET)
            # ... and so must the bare IP, which the certificate does not name.
            with pytest.raises(TlsFailure):
                await f.fetch(f"https://127.0.1.1:{tls.port}/", FLEET)
        # A fetcher that does not trust the test CA refuses the same server.
        async with make_fetcher() as untrusting:
            with pytest.raises(TlsFailure) as info:
                await untrusting.fetch(f"https://pub.test:{tls.port}/", FLEET)
    assert (info.value.code, info.value.status) == ("tls_failure", 502)
    assert len(tls.requests) == 1


async def test_pools_are_separate_per_policy_and_reused_within(
    up: Upstream, fetcher: Fetcher
) -> None:
    url = f"http://pub.test:{up.port}/page"
    for _ in range(2):
        await fetcher.fetch(url, restricted(up))
        await fetcher.fetch(url, FLEET)
    assert len(up.requests) == 4
    assert len(up.peers) == 2  # one kept-alive connection per pool, never shared
    restricted_peer = up.requests[0].peer
    assert up.requests[2].peer == restricted_peer != up.requests[1].peer


async def test_socket_factory_refuses_even_if_vetting_were_bypassed(fetcher: Fetcher) -> None:
    canary = CanaryListener.on(["127.0.0.1"])
    port = canary._socks[0].getsockname()[1]
    policy = restricted_policy(frozenset({port}))
    try:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await send(
                fetcher.pools.session(policy),
                url=f"http://127.0.0.1:{port}/",
                headers={},
                server_hostname=None,
                policy=policy,
            )
        assert isinstance(translate(info.value), Blocked)
        assert canary.accepted() == 0
    finally:
        canary.close()


async def test_lifecycle() -> None:
    f = make_fetcher()
    with pytest.raises(SiftError):
        await f.fetch("http://pub.test/", FLEET)
    await f.start()
    await f.close()
    await f.close()
    with pytest.raises(SiftError):
        await f.fetch("http://pub.test/", FLEET)
    with pytest.raises(SiftError):
        await f.start()
