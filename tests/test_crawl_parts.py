"""The crawl's pure parts, exact values: globs, scope, traps, links, sitemaps."""

from __future__ import annotations

import gzip

import pytest

from sift.crawl.globs import GlobError, compile_glob
from sift.crawl.links import page_links
from sift.crawl.scope import ScopeRule
from sift.crawl.sitemap import parse_sitemap
from sift.crawl.trap import is_trap
from sift.fetch import validate_url


@pytest.mark.parametrize(
    ("glob", "path", "match"),
    [
        ("/docs/*", "/docs/a", True),
        ("/docs/*", "/docs/a/b", False),
        ("/docs/**", "/docs/a/b", True),
        ("/docs/**", "/doc", False),
        ("*.html", "/a/b/c.html", True),
        ("*.html", "/a/b/c.htm", False),
        ("/p/[0-9]", "/p/7", True),
        ("/p/[!0-9]", "/p/7", False),
        ("/p/?", "/p/x", True),
        ("/p/?", "/p/xy", False),
    ],
)
def test_globs(glob: str, path: str, match: bool) -> None:
    assert bool(compile_glob(glob).match(path)) is match


@pytest.mark.parametrize(("glob", "why"), [("/a/[b", "unclosed '[' at 3"), ("", "empty glob")])
def test_bad_globs(glob: str, why: str) -> None:
    with pytest.raises(GlobError, match=why.replace("[", r"\[")):
        compile_glob(glob)


def test_scopes() -> None:
    def allows(start: str, scope: str, url: str) -> bool:
        return ScopeRule(validate_url(start), scope).allows(validate_url(url))  # type: ignore[arg-type]

    assert allows("http://a.test/docs/", "prefix", "http://a.test/docs/x/y")
    assert allows("http://a.test/docs", "prefix", "http://A.TEST:80/docs")
    assert not allows("http://a.test/docs", "prefix", "http://a.test/docs-old/")
    assert allows("http://a.test/docs/index.html", "prefix", "http://a.test/docs/other.html")
    assert not allows("http://a.test/docs/", "prefix", "http://a.test/")
    assert allows("http://a.test/docs/", "host", "https://a.test/")  # 80 and 443: one host
    assert not allows("http://a.test/", "host", "http://a.test:8080/")
    assert not allows("http://a.test/", "host", "http://b.a.test/")
    assert allows("http://www.a.test/", "domain", "http://docs.a.test:81/x")
    assert not allows("http://a.test/", "domain", "http://xa.test/")


def test_traps() -> None:
    assert not is_trap("/trap/x/x/")
    assert is_trap("/trap/x/x/x/")
    assert is_trap("/a/b/a/b/a/b")
    assert is_trap("/" + "/".join(f"s{i}" for i in range(33)))
    assert not is_trap("/2024/01/01/post")


def test_links_skip_nofollow_non_html_and_other_schemes() -> None:
    body = (
        b'<html><head><base href="/x/"></head><body>'
        b'<a href="a.html#f">a</a><a rel="external nofollow" href="/n">n</a>'
        b'<a href="/d.PDF">d</a><a href="mailto:x@y.test">m</a><a href="/dl" download>dl</a>'
        b'<area href="https://o.test/p?q=1#z"><a href="a.html">again</a>'
        b'<a href="javascript:void(0)">js</a><a href="../up/">up</a></body></html>'
    )
    assert page_links(body, "http://s.test:81/p/q", 100) == [
        "http://s.test:81/x/a.html",
        "https://o.test/p?q=1",
        "http://s.test:81/up/",
    ]
    nofollow = b'<meta name="robots" content="noindex,nofollow"><a href="/a">a</a>'
    assert page_links(nofollow, "http://s.test/", 100) == []
    many = b"".join(b'<a href="/%d">x</a>' % i for i in range(50))
    assert len(page_links(many, "http://s.test/", 10)) == 10


def test_sitemaps_plain_gzip_index_and_no_entities() -> None:
    ns = b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    urlset = (
        b"<urlset "
        + ns
        + b"><url><loc> http://a.test/1 </loc></url><url><loc>http://a.test/2</loc></url></urlset>"
    )
    assert parse_sitemap(urlset, 1 << 20) == (["http://a.test/1", "http://a.test/2"], [])
    assert parse_sitemap(gzip.compress(urlset), 1 << 20) == (
        ["http://a.test/1", "http://a.test/2"],
        [],
    )
    assert parse_sitemap(gzip.compress(urlset), 20) == ([], [])  # inflates past the bound
    index = (
        b"<sitemapindex "
        + ns
        + b"><sitemap><loc>http://a.test/s.xml</loc></sitemap></sitemapindex>"
    )
    assert parse_sitemap(index, 1 << 20) == ([], ["http://a.test/s.xml"])
    xxe = (
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY e SYSTEM "file:///etc/hostname">]>'
        b"<urlset " + ns + b"><url><loc>http://a.test/&e;</loc></url></urlset>"
    )
    assert parse_sitemap(xxe, 1 << 20) == (["http://a.test/"], [])  # the entity stays unread
    assert parse_sitemap(b"<html>not a sitemap</html>", 1 << 20) == ([], [])
