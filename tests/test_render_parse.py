"""Tree building and visibility: the page a browser shows is the page sift reads.

Each fixture is a small hand-written page with the one structure the rule is about.
"""

from __future__ import annotations

from sift.render import RenderOptions, render

PROSE = (
    "This paragraph is the article: it runs long enough to be the main content of the page, "
    "with several sentences of plain prose and no links at all inside it."
)


def text(html: str, *, main_content: bool = True) -> str:
    options = RenderOptions(format="text", main_content=main_content)
    return render(
        html.encode(), content_type="text/html", url="https://e.example/", options=options
    ).content


def test_content_after_an_early_body_or_html_end_tag_is_kept() -> None:
    # A browser keeps everything after </body></html> in the body; libxml2 drops it.
    page = f"<html><body><p>Intro words.</p></body></html><p>{PROSE}</p><p>Last words.</p>"
    assert text(page, main_content=False) == f"Intro words.\n\n{PROSE}\n\nLast words."


def test_an_unclosed_svg_icon_does_not_swallow_the_article() -> None:
    # HTML5 closes foreign content at the first HTML block element (<p>, <div> …).
    page = (
        '<html><body><div class="logo"><svg viewBox="0 0 4 4"><path d="M0 0h4v4z">'
        f"<div class=story><p>{PROSE}</p><p>Second <b>bold</b> part.</p></div> tail</div>"
        "</body></html>"
    )
    assert text(page, main_content=False) == f"{PROSE}\n\nSecond bold part.\n\ntail"


def test_svg_text_and_foreign_object_are_still_not_rendered() -> None:
    page = (
        f"<html><body><svg><title>Icon</title><text>label</text></svg><p>{PROSE}</p></body></html>"
    )
    assert text(page, main_content=False) == PROSE


def test_image_tag_is_an_img_not_a_container() -> None:
    page = f'<html><body><image src="/a.png"><p>{PROSE}</p></body></html>'
    assert text(page) == PROSE


def test_an_unclosed_button_in_the_header_keeps_the_article() -> None:
    page = (
        "<html><body><header><button class=menu>Menu<div class=page>"
        f"<p>{PROSE}</p><p>{PROSE}</p></div></header></body></html>"
    )
    # The button's own label is visible text too; what matters is that nothing is lost.
    assert text(page) == f"Menu\n\n{PROSE}\n\n{PROSE}"


def test_small_buttons_are_still_dropped() -> None:
    page = f"<html><body><p>{PROSE}</p><button>Subscribe now</button></body></html>"
    assert text(page, main_content=False) == PROSE


def test_hidden_wrapper_holding_the_page_is_content() -> None:
    # Pre-JavaScript wrappers: a script removes the class once the page has loaded.
    for attr in ('class="hide"', "hidden", 'style="visibility:hidden"', 'aria-hidden="true"'):
        page = (
            f'<html><body><nav><a href="/">Home</a></nav><div {attr}><h2>Heading</h2>'
            f"<p>{PROSE}</p></div><div hidden>Modal text</div></body></html>"
        )
        assert text(page) == f"Heading\n\n{PROSE}", attr


def test_small_hidden_elements_stay_hidden() -> None:
    page = (
        f'<html><body><p>{PROSE}<span class="sr-only">Opens in a new tab</span></p>'
        "<div hidden><p>Cookie settings and a long modal dialog text.</p></div></body></html>"
    )
    assert text(page, main_content=False) == PROSE


def test_noscript_holding_the_page_is_rendered() -> None:
    page = (
        '<html><body><div id="app">Loading…</div><noscript><div class="topic">'
        f"<h2>Thread title here</h2><p>{PROSE}</p><p>Reply: {PROSE}</p></div></noscript>"
        "</body></html>"
    )
    assert text(page) == f"Loading…\n\nThread title here\n\n{PROSE}\n\nReply: {PROSE}"


def test_small_noscript_fallbacks_are_not_rendered() -> None:
    page = (
        f"<html><body><p>{PROSE}</p><noscript><p>Please enable JavaScript to view the "
        "comments.</p></noscript></body></html>"
    )
    assert text(page, main_content=False) == PROSE


# ---- decoding ----------------------------------------------------------------------------


def decoded(body: bytes, content_type: str = "text/html") -> str:
    options = RenderOptions(format="text", main_content=False)
    return render(
        body, content_type=content_type, url="https://e.example/", options=options
    ).content


def test_charset_parameter_of_the_content_type_is_honoured() -> None:
    body = "<p>Привет, мир</p>".encode("koi8-r")
    assert decoded(body, "text/html; charset=KOI8-R") == "Привет, мир"


def test_valid_utf8_beats_a_stale_meta() -> None:
    body = '<meta charset="iso-8859-1"><p>très élégant — ça</p>'.encode()
    assert decoded(body) == "très élégant — ça"


def test_unlabelled_accented_latin_is_windows_1252() -> None:
    body = "<p>Il était très content de son café, où l’on parle français.</p>".encode("cp1252")
    assert decoded(body) == "Il était très content de son café, où l’on parle français."


def test_unlabelled_cyrillic_is_still_detected() -> None:
    text = "Съешь же ещё этих мягких французских булок, да выпей чаю. " * 4
    assert decoded(f"<p>{text}</p>".encode("cp1251")) == text.strip()


# ---- smaller misses ------------------------------------------------------------------------


def test_a_directory_page_is_not_one_link() -> None:
    items = "".join(f'<li><a href="/dir/{i}">Section {i} of the site</a></li>' for i in range(4))
    page = f"<html><body><ul>{items}</ul></body></html>"
    for fmt in ("markdown", "text"):
        options = RenderOptions(format=fmt)  # type: ignore[arg-type]
        out = render(
            page.encode(), content_type="text/html", url="https://e.example/", options=options
        )
        assert out.warnings == ["thin_content"]
        assert out.extractor == "sift-page"
        assert out.content.count("Section") == 4


def test_links_true_returns_every_link_of_the_page() -> None:
    page = (
        f'<html><body><nav><a href="/home">Home</a><a href="/home">Home</a></nav>'
        f'<article><p>{PROSE} <a href="/ref">a reference</a></p><p>{PROSE}</p></article>'
        '<footer><a href="https://o.example/x" aria-label="Other"><img src="/i.png"></a>'
        '<a href="#top">Top</a><a href="javascript:void(0)">JS</a></footer></body></html>'
    )
    options = RenderOptions(format="markdown", links=True)
    out = render(page.encode(), content_type="text/html", url="https://e.example/", options=options)
    assert "Home" not in out.content
    assert out.links == [
        {"text": "Home", "url": "https://e.example/home"},
        {"text": "a reference", "url": "https://e.example/ref"},
        {"text": "Other", "url": "https://o.example/x"},
    ]


def test_generic_xml_keeps_text_after_a_child_element() -> None:
    body = b"<?xml version='1.0'?><doc><a>Why <b>x</b> are great</a><c>next</c></doc>"
    assert decoded(body, "application/xml") == "Why x are great\nnext"
