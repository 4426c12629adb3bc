"""The page-type features: the URL path's shape and words (never its host), the controls
a page serves, repeated structures and paragraph lengths, the words and pronouns of its
text, and what its metadata names. Exact values on crafted pages and addresses."""

from __future__ import annotations

import math

from sift.render import pagekind
from sift.render.extract import select
from sift.render.html import prepare
from sift.render.pagekind import PAGE_FEATURES, page_features


def _named(row: list[float], prefix: str) -> dict[str, float]:
    return {n: round(v, 4) for n, v in zip(PAGE_FEATURES, row, strict=True) if n.startswith(prefix)}


def test_the_url_path_shape_and_words() -> None:
    row = pagekind._path_features("https://docs.example.com/en/2024/05/how-to-bake-bread.html?x=1")
    names = [n for n in PAGE_FEATURES if n.startswith(("path_", "slug_", "url_"))]
    got = dict(zip(names, (round(v, 4) for v in row), strict=True))
    assert got == {
        "path_depth": round(math.log1p(4), 4),
        "path_root": 0.0,
        "path_date": 1.0,
        "path_number": 1.0,
        "path_ext": 1.0,
        "path_query": 1.0,
        "slug_words": round(math.log1p(5), 4),  # how to bake bread html
        "url_docs": 0.0,  # the host ("docs.") is never read
        "url_product": 0.0,
        "url_list": 0.0,
        "url_forum": 0.0,
        "url_article": 0.0,
        "url_service": 0.0,
    }
    assert pagekind._path_features("https://x.test/")[:2] == [0.0, 1.0]
    forum = pagekind._path_features("https://x.test/forum/t/question-about-rust/123")
    assert dict(zip(names, forum, strict=True))["url_forum"] == math.log1p(3)


def test_controls_structure_text_and_metadata() -> None:
    cards = "".join(f"<li><a href='/p{i}'>Card {i}</a></li>" for i in range(5))
    html = (
        "<html><head><title>Our services</title></head><body>"
        "<form><input name='q'><select><option>a</option></select><button>Go</button></form>"
        f"<ul>{cards}</ul><h2>What we offer</h2>"
        "<p>We help you grow. Our team of experts builds what you need! Contact us today.</p>"
        "<p>Short.</p></body></html>"
    )
    page = prepare(html.encode(), url="https://agency.test/services/")
    assert page is not None
    assert (page.info.forms, page.info.inputs, page.info.buttons) == (1, 2, 1)
    sel = select(page.body, title=page.title, attrs=page.attrs)
    row = page_features(page.body, page.info, sel, "https://agency.test/services/", {"author": "A"})
    assert _named(row, "meta_") == {"meta_published": 0.0, "meta_modified": 0.0, "meta_author": 1.0}
    assert _named(row, "forms")["forms"] == round(math.log1p(1), 4)
    assert _named(row, "repeat_")["repeat_max"] == round(math.log1p(5), 4)  # five <li>
    # one parent with four or more children of one tag: the <ul> (each <a> has its own <li>)
    assert _named(row, "repeat_")["repeat_runs"] == round(math.log1p(1), 4)
    # The body's text nodes joined as they are (string()): "...offer" + "We help" is one
    # word, "offerwe"; digits are not letters. 23 words: card x5, what we offerwe help you
    # grow our team of experts builds what you need contact us today short.
    assert _named(row, "voice_") == {
        "voice_we": round(1000 * 3 / 23, 4),  # we, our, us
        "voice_you": round(1000 * 2 / 23, 4),
        "voice_i": 0.0,
    }
    assert _named(row, "text_service")["text_service"] == round(math.log1p(3), 4)
