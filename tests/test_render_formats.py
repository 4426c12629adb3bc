"""Content types, options, main-content selection, warnings and the Rendered round trip."""

from __future__ import annotations

import io
import json

import pytest
from pypdf import PdfWriter

from sift.errors import BadRequest, UnsupportedContentType
from sift.render import RENDER_VERSION, Rendered, RenderOptions, render

URL = "https://news.example.com/2024/story"

ARTICLE = """<html lang="en"><head><title>Big Story</title></head><body>
<header><nav><a href="/">Home</a> <a href="/world">World</a> <a href="/tech">Tech</a></nav></header>
<div class="cookie-banner"><p>We use cookies to improve your experience on this website.</p></div>
<main><article>
<h1>Big Story</h1>
<div class="byline">By A. Writer, 1 May 2024</div>
<p>The first paragraph of the story explains what happened in plenty of words, enough to count.</p>
<p>The second paragraph adds more detail about the events, the people and the consequences.</p>
<div class="share-bar"><a href="/s/fb">Share on Facebook</a> <a href="/s/x">Share on X</a></div>
<p>The third paragraph closes the story with a quote and a look at what comes next for all.</p>
</article>
<section class="comments">
<p>Comment: I disagree with every single word of this fine article here.</p></section>
</main>
<aside><h3>Related</h3>
<ul><li><a href="/a">Another story</a></li><li><a href="/b">More</a></li></ul></aside>
<footer><p>Copyright 2024 Example News. All rights reserved. Contact us at the address.</p></footer>
</body></html>"""


def r(body: bytes | str, ctype: str = "text/html", **kw: object) -> Rendered:
    data = body.encode() if isinstance(body, str) else body
    return render(data, content_type=ctype, url=URL, options=RenderOptions(**kw))  # type: ignore[arg-type]


def test_main_content_keeps_the_article_only() -> None:
    out = r(ARTICLE)
    # Markdown opens with the article's h1 (docs/rendering.md, "The h1"); text leaves it out.
    assert out.content == (
        "# Big Story\n\nThe first paragraph of the story explains what happened in plenty of "
        "words, enough to count.\n\nThe second paragraph adds more detail about the events, the "
        "people and the consequences.\n\nThe third paragraph closes the story with a quote and "
        "a look at what comes next for all."
    )
    assert (out.title, out.lang, out.warnings, out.extractor) == ("Big Story", "en", [], "sift")


def test_main_content_false_keeps_the_whole_visible_page() -> None:
    out = r(ARTICLE, main_content=False, format="text")
    assert out.content.startswith("Home World Tech\n\nWe use cookies")
    assert out.content.endswith("Contact us at the address.")
    assert "Comment: I disagree" in out.content


def test_selector_and_exclude() -> None:
    out = r(ARTICLE, selector="article", exclude=("p:nth-of-type(2)", ".byline"), format="text")
    assert out.content.split("\n\n")[:2] == [
        "Big Story",
        "The first paragraph of the story explains what happened in plenty of words, "
        "enough to count.",
    ]
    assert "second paragraph" not in out.content
    assert r(ARTICLE, selector="table.none").warnings == ["selector_no_match"]


def test_invalid_selector_is_a_bad_request_with_hint() -> None:
    with pytest.raises(BadRequest) as info:
        r(ARTICLE, selector="div[[")
    assert "CSS" in info.value.hint
    with pytest.raises(BadRequest):
        RenderOptions(format="pdf")  # type: ignore[arg-type]


def test_thin_content_falls_back_to_the_page() -> None:
    html = (
        "<body><p>Tiny.</p>"
        + "<div class='menu'>"
        + "<a href='/x'>link text here</a> " * 60
        + "</div></body>"
    )
    out = r(html, format="text")
    assert out.warnings == ["thin_content"]
    assert out.extractor == "sift-page"
    assert out.content.startswith("Tiny.\n\nlink text here link text here")


def test_js_shell_is_flagged() -> None:
    html = "<html><body><div id='app'></div><script>" + "x=1;" * 2000 + "</script></body></html>"
    out = r(html)
    assert out.content == ""
    assert "js_required_suspected" in out.warnings


def test_plain_text_and_markdown_pass_through() -> None:
    assert r("a  *b*\n\n# c\n", "text/plain").content == "a  *b*\n\n# c\n"
    assert r("# T\n\n- x\n", "text/markdown; charset=utf-8").content == "# T\n\n- x\n"


def test_json_is_pretty_printed() -> None:
    assert r('{"a":[1,{"b":"é"}]}', "application/json").content == (
        '{\n  "a": [\n    1,\n    {\n      "b": "é"\n    }\n  ]\n}'
    )
    assert r("{nope", "application/json").content == "{nope"


def test_rss_becomes_items_with_titles_and_links() -> None:
    rss = (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>Feed</title>'
        "<item><title>One</title><link>https://e.com/1</link>"
        "<description>&lt;p&gt;First &lt;b&gt;item&lt;/b&gt;&lt;/p&gt;</description></item>"
        "<item><title>Two</title><link>https://e.com/2</link></item></channel></rss>"
    )
    out = r(rss, "application/rss+xml")
    assert out.title == "Feed"
    assert out.content == (
        "# Feed\n\n## [One](https://e.com/1)\n\nFirst item\n\n## [Two](https://e.com/2)"
    )


def test_atom_feed() -> None:
    atom = (
        '<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>'
        '<entry><title>E1</title><link href="https://e.com/e1"/><updated>2024-01-01</updated>'
        "<summary>Sum</summary></entry></feed>"
    )
    assert r(atom, "application/atom+xml").content == (
        "# A\n\n## [E1](https://e.com/e1)\n\n2024-01-01\n\nSum"
    )


def test_plain_xml_becomes_text() -> None:
    assert r("<a><b>one</b><c>two <d>three</d></c></a>", "text/xml").content == "one\ntwo\nthree"


def _pdf_bytes() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.add_blank_page(width=200, height=200)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def test_pdf_has_page_markers() -> None:
    out = r(_pdf_bytes(), "application/pdf")
    assert out.content == "--- page 1 ---\n\n--- page 2 ---"
    assert out.extractor == "pypdf"


def test_other_binaries_are_unsupported() -> None:
    with pytest.raises(UnsupportedContentType) as info:
        r(b"\x89PNG\r\n\x1a\n\x00\x00", "image/png")
    assert info.value.code == "unsupported_content_type"
    assert info.value.hint


def test_raw_format_is_the_decoded_body() -> None:
    assert r("<p>caf\u00e9</p>", format="raw").content == "<p>caf\u00e9</p>"


def test_charset_from_meta_and_argument() -> None:
    body = '<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251")
    assert r(body, format="text").content == "Привет"
    latin = "<p>café</p>".encode("latin-1")
    out = render(
        latin,
        content_type="text/html",
        url=URL,
        options=RenderOptions(format="text"),
        charset="iso-8859-1",
    )
    assert out.content == "café"


def test_bytes_to_bytes_codecs_are_never_used() -> None:
    body = b'<meta charset="base64"><p>aGVsbG8=</p>'
    assert r(body, format="text").content == "aGVsbG8="
    out = render(
        body,
        content_type="text/html",
        url=URL,
        options=RenderOptions(format="text"),
        charset="zlib",
    )
    assert out.content == "aGVsbG8="


def test_cache_key_is_stable_and_versioned() -> None:
    a = RenderOptions(exclude=("nav",))
    assert a.cache_key() == RenderOptions(exclude=["nav"]).cache_key()  # type: ignore[arg-type]
    assert a.cache_key() == f'r{RENDER_VERSION}:["markdown",true,null,["nav"],false]'
    assert a.cache_key() != RenderOptions(links=True).cache_key()


def test_rendered_json_round_trip() -> None:
    out = r(ARTICLE, links=True)
    again = Rendered.from_json(out.to_json())
    assert again == out
    assert json.loads(out.to_json())["content"] == out.content
    with pytest.raises(ValueError):
        Rendered.from_json(b"[1]")
