"""URL rules and the normal form: no I/O at all."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.errors import Blocked, InvalidUrl
from sift.fetch.egress import BLOCKED_MESSAGE
from sift.fetch.policy import FetchPolicy, restricted_policy
from sift.fetch.url import normalize_url, validate_url


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("http://Example.COM", "http://example.com/"),
        ("HTTPS://example.com:443/a?b=c#frag", "https://example.com/a?b=c"),
        ("http://example.com:80/", "http://example.com/"),
        ("http://example.com:8080", "http://example.com:8080/"),
        ("http://example.com:0080/", "http://example.com/"),
        ("http://example.com:/x", "http://example.com/x"),
        ("  http://example.com/a b\t", "http://example.com/a%20b"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/..", "http://example.com/"),
        ("http://example.com?q=1", "http://example.com/?q=1"),
        ("http://example.com/%7e%zz", "http://example.com/%7e%25zz"),
        ("http://example.com/ü?ä=ö", "http://example.com/%C3%BC?%C3%A4=%C3%B6"),
        ("http://example.com/a\\b", "http://example.com/a%5Cb"),
        ("http://bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://ＥＸＡＭＰＬＥ.com/", "http://example.com/"),
        ("http://example.com./", "http://example.com/"),
        ("http://my_host.example.com/", "http://my_host.example.com/"),
        ("http://127.1/", "http://127.0.0.1/"),
        ("http://0x7f000001/", "http://127.0.0.1/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.1/", "http://127.0.0.1/"),
        ("http://127.000.000.001/", "http://127.0.0.1/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://0/", "http://0.0.0.0/"),
        ("http://１２７。０。０。１/", "http://127.0.0.1/"),
        ("http://[::FFFF:127.0.0.1]:8080/", "http://[::ffff:7f00:1]:8080/"),
        ("http://[0:0::1]/", "http://[::1]/"),
    ],
)
def test_normal_form(url: str, normal: str) -> None:
    assert normalize_url(url) == normal


def test_target_fields() -> None:
    t = validate_url("https://[::1]:8443/p?q")
    assert (t.scheme, t.host, t.port, t.target, t.ip) == ("https", "::1", 8443, "/p?q", "::1")
    assert (t.netloc, t.origin) == ("[::1]:8443", "https://[::1]:8443")
    t = validate_url("http://pub.test/")
    assert (t.host, t.ip, t.netloc) == ("pub.test", None, "pub.test")


@pytest.mark.parametrize(
    "url",
    [
        "",
        "example.com",
        "//example.com/",
        "ftp://example.com/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/_x",
        "javascript:alert(1)",
        "data:text/html,hi",
        "http:/example.com/",
        "http:\\\\example.com\\",
        "http://",
        "http:///path",
        "http://user@example.com/",
        "http://user:pw@example.com/",
        "http://example.com\\@127.0.0.1/",
        "http://127.0.0.1:80\\@example.com/",
        "http://exa mple.com/",
        "http://example.com\u3000/",
        "http://exa\tmple.com/",
        "http://exa\nmple.com/",
        "http://exa\x00mple.com/",
        "http://example.com/\x7f",
        "http://%31%32%37.0.0.1/",
        "http://example%2ecom/",
        "http://[::1%25lo]/",
        "http://[::1/",
        "http://[::1]x/",
        "http://[1.2.3.4]/",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:-1/",
        "http://example.com:８０/",
        "http://example.com:123456/",
        "http://example.com:80:80/",
        "http://1.2.3.4.5/",
        "http://256.0.0.1/",
        "http://4294967296/",
        "http://0x100000000/",
        "http://09.0.0.1/",
        "http://foo.123/",
        "http://a..b/",
        "http://.example.com/",
        "http://-bad-.example.com/",
        "http://exa!mple.com/",
        "http://xn--zz.example/",
        "http://☃☃☃\u0378.example/",
        "http://" + "a" * 64 + ".example/",
        "http://" + "a." * 127 + "example/",
        "http://example.com/" + "a" * 8192,
        "http://" + "9" * 5000 + "/",
    ],
)
def test_invalid_urls(url: str) -> None:
    with pytest.raises(InvalidUrl):
        validate_url(url)


RESTRICTED = restricted_policy()


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/",
        "http://LOCALHOST./",
        "http://ｌｏｃａｌｈｏｓｔ/",
        "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/",
        "http://local\u00adhost/",
        "http://foo.localhost/",
        "http://metadata.google.internal/",
        "http://anything.internal/",
        "http://printer.local/",
        "http://router.home.arpa/",
        "http://1.0.0.127.in-addr.arpa/",
        "http://intranet/",
        "http://example.com:8080/",
        "https://example.com:22/",
    ],
)
def test_restricted_refuses_by_name_and_port_before_io(url: str) -> None:
    with pytest.raises(Blocked) as info:
        validate_url(url, RESTRICTED)
    assert info.value.message == BLOCKED_MESSAGE
    assert info.value.code == "blocked_address"
    assert info.value.status == 403


def test_names_are_allowed_for_a_private_policy_and_ports_for_fleet() -> None:
    fleet = FetchPolicy(allow_private=True)
    assert validate_url("http://localhost:8080/", fleet).host == "localhost"
    assert validate_url("http://metadata.google.internal/", fleet).port == 80
    assert validate_url("http://example.com:8080/", FetchPolicy(allow_private=False)).port == 8080


def test_restricted_extra_ports() -> None:
    assert (
        validate_url("http://example.com:8080/", restricted_policy(frozenset({8080}))).port == 8080
    )


_URL_PARTS = st.sampled_from(
    ["http://", "https://", "HTTP://", "h", ":", "//", "/", "?", "#", "@", "\\", "%", "%41",
     ".", "..", "[", "]", "::1", "127", "0x7f", "0177", "1", "localhost", "ｌ", "。", "\u00ad",
     "xn--", "bücher", "a", "Z", "-", "_", " ", "\t", ":80", ":8080", ":0", "=", "&", "ü"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_URL_PARTS, max_size=12).map("".join))
def test_parser_is_total_and_normal_form_is_a_fixed_point(url: str) -> None:
    try:
        target = validate_url(url)
    except InvalidUrl:
        return
    again = validate_url(target.url)
    assert again == target
    assert again.url == target.url
    assert target.scheme in ("http", "https") and 1 <= target.port <= 65535
    assert target.target.startswith("/") and "#" not in target.url
    assert (target.ip is not None) == (ipaddress_or_none(target.host) is not None)


def ipaddress_or_none(host: str) -> object:
    import ipaddress

    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
