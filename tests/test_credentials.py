"""Caller headers and cookies, the parts without I/O: what is refused and why (never quoting
a value), the bounds, the class switch, the origin they are scoped to, the cache tag, the
crawl's per-origin options and the CLI's -H / --cookie."""

from __future__ import annotations

import dataclasses

import pytest

from sift.browser.credentials import origin_pattern
from sift.cli import build_parser
from sift.cli.fetch import _credentials, _fetch_options, _Usage
from sift.config import ClassesSettings
from sift.crawl.spec import CrawlSpec, parse_crawl
from sift.errors import BadRequest
from sift.fetch.credentials import (
    MAX_COOKIES,
    MAX_HEADERS,
    MAX_TOTAL_BYTES,
    MAX_VALUE_BYTES,
    REFUSED_HEADERS,
    Credentials,
    origin_of,
)
from sift.options import FetchOptions, apply_class, parse_options

SECRET = "s3cr3t-Zq9v"
CLASSES = ClassesSettings()
URL = "https://pub.test/account"


def refusal(**options: object) -> str:
    with pytest.raises(BadRequest) as info:
        parse_options({"url": URL, **options})
    assert info.value.status == 422
    assert SECRET not in info.value.message and SECRET not in info.value.hint
    return info.value.message


def test_headers_and_cookies_are_parsed_in_order() -> None:
    opts = parse_options(
        {
            "url": URL,
            "headers": {"Authorization": f"Bearer {SECRET}", "X-Tenant": " blue\t"},
            "cookies": {"session": SECRET, "lang": '"en"'},
        }
    )
    assert opts.headers == (("Authorization", f"Bearer {SECRET}"), ("X-Tenant", "blue"))
    assert opts.cookies == (("session", SECRET), ("lang", '"en"'))
    assert opts.credentials == Credentials(opts.headers, opts.cookies)
    assert opts.credentials.request_headers() == {
        "Authorization": f"Bearer {SECRET}",
        "X-Tenant": "blue",
        "Cookie": f'session={SECRET}; lang="en"',
    }
    assert parse_options({"url": URL}).credentials == Credentials()
    assert not Credentials()


def test_no_value_in_a_repr() -> None:
    opts = parse_options(
        {"url": URL, "headers": {"Authorization": SECRET}, "cookies": {"sid": SECRET}}
    )
    assert SECRET not in repr(opts) and SECRET not in str(opts)
    assert repr(opts.credentials) == "Credentials(headers=[Authorization], cookies=1)"


def test_the_page_cookies_are_kept_and_the_callers_win() -> None:
    creds = Credentials(cookies=(("sid", SECRET), ("theme", "dark")))
    assert creds.cookie_header("csrf=abc; sid=old; x") == f"csrf=abc; x; sid={SECRET}; theme=dark"
    assert creds.cookie_header(None) == f"sid={SECRET}; theme=dark"
    assert Credentials(headers=(("A", "1"),)).request_headers("k=v") == {"A": "1", "Cookie": "k=v"}


@pytest.mark.parametrize(
    "name",
    [
        "Host",
        "connection",
        "Keep-Alive",
        "Transfer-Encoding",
        "TE",
        "Trailer",
        "Upgrade",
        "Proxy-Authorization",
        "proxy-connection",
        "Content-Length",
        "Expect",
        "User-Agent",
        "Accept-Encoding",
        "If-None-Match",
        "If-Modified-Since",
        "Range",
        "Origin",
        "Sec-Fetch-Site",
        "X-Forwarded-For",
        "Forwarded",
        "Cookie",
    ],
)
def test_hop_by_hop_framing_and_sifts_own_fields_are_refused(name: str) -> None:
    message = refusal(headers={name: SECRET})
    assert message.startswith(f"invalid options: headers: {name} is not allowed (")


def test_the_refused_list_and_its_reasons() -> None:
    assert {"connection", "host", "content-length", "cookie", "user-agent"} <= REFUSED_HEADERS
    assert refusal(headers={"Cookie": "a=b"}) == (
        "invalid options: headers: Cookie is not allowed (send cookies with the cookies option)"
    )
    assert refusal(headers={"Connection": "x"}) == (
        "invalid options: headers: Connection is not allowed (a hop-by-hop field)"
    )
    assert refusal(headers={"Host": "x"}) == (
        "invalid options: headers: Host is not allowed (sift frames the request itself)"
    )
    assert refusal(headers={"User-Agent": "x"}) == (
        "invalid options: headers: User-Agent is not allowed (sift sets it itself)"
    )


def test_bad_names_are_refused_without_quoting_them() -> None:
    for bad in (f"Authorization: Bearer {SECRET}", "", "X\nY", "Ünï", "a" * 129, "X Y"):
        assert refusal(headers={bad: "v"}) == (
            "invalid options: headers: name #1 is not a valid field name (1-128 of the "
            "characters A-Z a-z 0-9 !#$%&'*+-.^_`|~)"
        )
    assert refusal(cookies={"ok": "1", f"s={SECRET}": "v"}).startswith(
        "invalid options: cookies: name #2 is not a valid field name"
    )


def test_values_with_cr_lf_or_controls_are_refused() -> None:
    for bad in (f"{SECRET}\r\nX-Evil: 1", f"{SECRET}\n", f"a\x00{SECRET}", f"é{SECRET}"):
        assert refusal(headers={"X-Key": bad}) == (
            "invalid options: headers: the value of X-Key may hold only printable ASCII and "
            "tabs (CR, LF and other control characters are refused)"
        )
    for bad in (f"{SECRET};admin=1", f"a b{SECRET}", f"{SECRET}\r\n", 'x"y'):
        assert refusal(cookies={"sid": bad}) == (
            "invalid options: cookies: the value of sid may hold only RFC 6265 cookie "
            "characters (printable ASCII without space, double quote, comma, semicolon, "
            "backslash)"
        )
    assert refusal(headers={"X-Key": 5}) == (
        "invalid options: headers: the value of X-Key must be a string"
    )
    assert refusal(headers=["Authorization", SECRET]) == (
        "invalid options: headers: expected an object of names to string values"
    )


def test_duplicates_differing_in_case_are_refused() -> None:
    assert refusal(headers={"X-Key": SECRET, "x-key": SECRET}) == (
        "invalid options: headers: x-key is given twice"
    )


def test_bounds_each_refused_one_past_the_limit() -> None:
    at_limit = {f"X-H{i}": "v" for i in range(MAX_HEADERS)}
    assert len(parse_options({"url": URL, "headers": at_limit}).headers) == MAX_HEADERS
    assert refusal(headers={**at_limit, "X-One-More": SECRET}) == (
        f"invalid options: headers: at most {MAX_HEADERS} headers"
    )
    cookies = {f"c{i}": "v" for i in range(MAX_COOKIES + 1)}
    assert refusal(cookies=cookies) == f"invalid options: cookies: at most {MAX_COOKIES} cookies"
    assert refusal(headers={"X-Big": SECRET + "a" * MAX_VALUE_BYTES}) == (
        f"invalid options: headers: the value of X-Big is longer than {MAX_VALUE_BYTES} bytes"
    )
    assert refusal(cookies={"big": "a" * (MAX_VALUE_BYTES + 1)}) == (
        f"invalid options: cookies: the value of big is longer than {MAX_VALUE_BYTES} bytes"
    )
    half = "a" * (MAX_TOTAL_BYTES // 2)
    assert refusal(headers={"X-A": half[:8000]}, cookies={"b": half[:8000], "c": "a" * 400}) == (
        f"invalid options: headers, cookies: over {MAX_TOTAL_BYTES} bytes of names and values "
        "together"
    )


def test_never_in_a_query_string() -> None:
    for name in ("headers", "cookies"):
        with pytest.raises(BadRequest) as info:
            parse_options({"url": URL, name: SECRET}, from_query=True)
        assert info.value.message == (
            f"invalid options: {name}: not accepted in a query string (URLs end up in logs); "
            "send it in the JSON body of POST /v1/fetch"
        )


def test_restricted_may_not_by_default_and_may_when_configured() -> None:
    opts = parse_options({"url": URL, "cookies": {"sid": SECRET}})
    assert CLASSES.fleet.credentials and not CLASSES.restricted.credentials
    apply_class(opts, "fleet", CLASSES.fleet)  # allowed
    with pytest.raises(BadRequest) as info:
        apply_class(opts, "restricted", CLASSES.restricted)
    assert info.value.status == 422
    assert info.value.message == (
        "headers, cookies: the restricted class may not send its own headers or cookies"
    )
    assert info.value.hint == (
        "Drop headers and cookies, or ask the operator to set "
        "classes.restricted.credentials = true."
    )
    allowed = dataclasses.replace(CLASSES.restricted, credentials=True)
    apply_class(opts, "restricted", allowed)
    apply_class(FetchOptions(url=URL), "restricted", CLASSES.restricted)  # none: no refusal


def test_origin_is_scheme_host_and_port() -> None:
    assert origin_of("https://Pub.Test/a?b") == ("https", "pub.test", 443)
    assert origin_of("https://pub.test:443/") == origin_of("https://pub.test/")
    assert origin_of("http://pub.test/") != origin_of("https://pub.test/")
    assert origin_of("https://pub.test:8443/") != origin_of("https://pub.test/")
    assert origin_of("http://[::1]:8080/x") == ("http", "::1", 8080)
    assert origin_of("data:text/html,x") is None
    assert origin_of("http://pub.test:99999/") is None


def test_the_browser_pattern_names_the_origin_only() -> None:
    assert origin_pattern("https://pub.test/account?x=1") == "https://pub.test/*"
    assert origin_pattern("http://pub.test:8080/a") == "http://pub.test:8080/*"
    assert origin_pattern("http://[::1]:8080/") == "http://[::1]:8080/*"
    assert origin_pattern("wss://pub.test/") is None
    assert origin_pattern("about:blank") is None


def test_the_cache_tag_is_per_caller_and_per_credentials() -> None:
    key = b"k" * 32
    a = Credentials(headers=(("Authorization", SECRET),))
    assert a.tag(key, "fleet:indexer") == Credentials((("authorization", SECRET),)).tag(
        key, "fleet:indexer"
    )
    tags = {
        a.tag(key, "fleet:indexer"),
        a.tag(key, "fleet:crawler"),
        a.tag(b"j" * 32, "fleet:indexer"),
        Credentials(headers=(("Authorization", SECRET + "x"),)).tag(key, "fleet:indexer"),
        Credentials(cookies=(("Authorization", SECRET),)).tag(key, "fleet:indexer"),
    }
    assert len(tags) == 5
    assert all(len(t) == 32 and SECRET not in t for t in tags)


def test_a_crawl_keeps_them_for_its_start_origin_only() -> None:
    spec = parse_crawl(
        {
            "url": "http://pub.test:8080/docs/",
            "scope": "domain",
            "options": {"headers": {"X-Key": SECRET}, "format": "text"},
        },
        "fleet",
        CLASSES.fleet,
    )
    mine = '{"format":"text","headers":{"X-Key":"' + SECRET + '"}}'
    assert spec.options_json() == mine
    assert spec.options_json("http://pub.test:8080/docs/b") == mine
    for other in ("http://pub.test/docs/", "https://pub.test:8080/", "http://www.pub.test:8080/"):
        assert spec.options_json(other) == '{"format":"text"}'
    assert CrawlSpec.from_json(spec.to_json()) == spec
    assert "options" not in spec.view()
    with pytest.raises(BadRequest) as info:
        parse_crawl(
            {"url": "http://pub.test/", "options": {"cookies": {"sid": SECRET}}},
            "restricted",
            CLASSES.restricted,
        )
    assert "the restricted class may not send its own headers or cookies" in info.value.message


def test_cli_header_and_cookie_flags() -> None:
    assert _credentials(
        [f"Authorization: Bearer {SECRET}", "X-Empty:", f"Cookie: a=1; sid={SECRET}"],
        ["lang=en"],
    ) == {
        "headers": {"Authorization": f"Bearer {SECRET}", "X-Empty": ""},
        "cookies": {"lang": "en", "a": "1", "sid": SECRET},
    }
    assert _credentials([], []) == {"headers": None, "cookies": None}
    for header, cookie, message in (
        ([f"Authorization {SECRET}"], [], "-H #1 is not 'Name: value'"),
        ([], ["ok=1", SECRET], "cookie #2 is not 'name=value'"),
    ):
        with pytest.raises(_Usage) as info:
            _credentials(header, cookie)
        assert str(info.value) == message
    # Through the real parser: every flag of `sift fetch` at its default but -H.
    args = build_parser().parse_args(["fetch", "https://site.test/", "-H", "X-Key: v"])
    assert _fetch_options(args) == {"headers": {"X-Key": "v"}}
