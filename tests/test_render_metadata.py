"""Page metadata: each source on a hand-made page, the order of trust, and the bounds."""

from __future__ import annotations

import json

from sift.render import RenderOptions, render
from sift.render.metadata import MAX_DESCRIPTION_CHARS, MAX_KEYWORDS, iso_date, plain

URL = "https://news.example/2024/story"


def meta(head: str, body: str = "<p>Body text.</p>", **kw: object) -> dict[str, object]:
    page = f'<html lang="en-GB"><head>{head}</head><body>{body}</body></html>'
    options = RenderOptions(format="text", **kw)  # type: ignore[arg-type]
    return render(page.encode(), content_type="text/html", url=URL, options=options).metadata


def ld(obj: object) -> str:
    return f'<script type="application/ld+json">{json.dumps(obj)}</script>'


def test_json_ld() -> None:
    article = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebSite", "name": "Example News", "description": "The site."},
            {
                "@type": "NewsArticle",
                "description": "A <b>story</b> &amp; more.",
                "author": [{"@type": "Person", "name": "Ann Lee"}, {"name": "Bo Chen"}],
                "datePublished": "2024-05-01T10:30:00Z",
                "dateModified": "2024-05-02T08:00:00+02:00",
                "image": {"@type": "ImageObject", "url": "/img/a.jpg"},
                "keywords": ["space", "rockets"],
                "publisher": {"@type": "Organization", "name": "Example News"},
            },
        ],
    }
    assert meta(ld(article)) == {
        "description": "A story & more.",
        "author": "Ann Lee, Bo Chen",
        "published": "2024-05-01T10:30:00+00:00",
        "modified": "2024-05-02T08:00:00+02:00",
        "site_name": "Example News",
        "image": "https://news.example/img/a.jpg",
        "lang": "en-gb",
        "keywords": ["space", "rockets"],
    }


def test_opengraph_and_twitter() -> None:
    head = (
        '<meta property="og:description" content="  OG  text ">'
        '<meta property="og:site_name" content="Example">'
        '<meta property="og:image" content="//cdn.example/i.png">'
        '<meta property="og:url" content="/2024/story?ref=og">'
        '<meta property="article:published_time" content="2024-03-04">'
        '<meta property="article:modified_time" content="not a date">'
        '<meta name="twitter:creator" content="@ann">'
    )
    assert meta(head) == {
        "description": "OG text",
        "author": "@ann",
        "published": "2024-03-04",
        "site_name": "Example",
        "canonical_url": "https://news.example/2024/story?ref=og",
        "image": "https://cdn.example/i.png",
        "lang": "en-gb",
    }


def test_plain_meta_and_canonical_link() -> None:
    head = (
        '<meta name="description" content="Plain description.">'
        '<meta name="author" content="Jo Park">'
        '<meta name="keywords" content="a, b,, c , a">'
        '<meta name="dc.date" content="2024/05/01">'
        '<link rel="canonical" href="/canonical">'
        '<meta property="og:url" content="https://news.example/og">'
    )
    assert meta(head) == {
        "description": "Plain description.",
        "author": "Jo Park",
        "published": "2024-05-01",
        "canonical_url": "https://news.example/canonical",
        "lang": "en-gb",
        "keywords": ["a", "b", "c"],
    }


def test_microdata() -> None:
    body = (
        '<div itemscope itemtype="https://schema.org/Article">'
        '<span itemprop="author">Max Mustermann</span>'
        '<meta itemprop="datePublished" content="2023-12-24T18:00:00">'
        '<p itemprop="description">An item description.</p>'
        '<img itemprop="image" src="pic.jpg"></div>'
    )
    assert meta("", body) == {
        "description": "An item description.",
        "author": "Max Mustermann",
        "published": "2023-12-24T18:00:00",
        "image": "https://news.example/2024/pic.jpg",
        "lang": "en-gb",
    }


def test_visible_byline_and_time() -> None:
    body = (
        '<article><div class="byline">By Jane Doe</div>'
        '<time datetime="2022-02-02T02:02:02-05:00">Feb 2</time><p>Text.</p></article>'
    )
    assert meta("", body) == {
        "author": "Jane Doe",
        "published": "2022-02-02T02:02:02-05:00",
        "lang": "en-gb",
    }


def test_json_ld_outranks_meta_and_meta_outranks_the_page() -> None:
    head = ld({"@type": "Article", "author": "LD Author"}) + (
        '<meta name="author" content="Meta Author">'
        '<meta name="description" content="Meta description.">'
    )
    body = '<span class="author">Page Author</span><time datetime="2020-01-01">x</time>'
    assert meta(head, body) == {
        "description": "Meta description.",
        "author": "LD Author",
        "published": "2020-01-01",
        "lang": "en-gb",
    }


def test_bounds_and_refusals() -> None:
    head = (
        f'<meta name="description" content="{"word " * 2000}">'
        f'<meta name="keywords" content="{", ".join(f"k{i}" for i in range(50))}">'
        '<meta property="og:image" content="javascript:alert(1)">'
        '<meta name="date" content="yesterday">'
    )
    got = meta(head)
    assert len(str(got["description"])) <= MAX_DESCRIPTION_CHARS
    assert str(got["description"]).endswith("word…")
    assert got["keywords"] == [f"k{i}" for i in range(MAX_KEYWORDS)]
    assert "image" not in got and "published" not in got


def test_metadata_with_a_selector_and_in_the_cache_form() -> None:
    head = '<meta name="description" content="D.">'
    assert meta(head, selector="p") == {"description": "D.", "lang": "en-gb"}
    page = f"<html><head>{head}</head><body><p>x</p></body></html>".encode()
    got = render(page, content_type="text/html", url=URL, options=RenderOptions())
    assert type(got).from_json(got.to_json()) == got


def test_dates_and_text() -> None:
    assert iso_date("2024-05-01T10:30:00.123Z") == "2024-05-01T10:30:00+00:00"
    assert iso_date("2024-05-01 10:30") == "2024-05-01T10:30:00"
    assert iso_date("Tue, 03 Jun 2008 11:05:30 GMT") == "2008-06-03T11:05:30+00:00"
    assert iso_date("March 5, 2021") == "2021-03-05"
    assert iso_date("5 March 2021") == "2021-03-05"
    assert iso_date("2024-13-01") is None
    assert iso_date("soon") is None
    assert plain("<p>a&nbsp;b</p>\n c") == "a b c"
