"""The page read in as few passes as it can be, with the same verdicts as one read per
question: what cleaning returns (every element's attributes), hidden elements judged from
them, chrome kinds and words judged once per value, the JavaScript detector reading
inline code only where the verdict needs it, bylines and microdata through the attribute
axis, valid UTF-8 handed to the parser as is, and the cycle collector paused during a
render (and given back as it was). Exact values on small crafted pages.
"""

from __future__ import annotations

import gc

from lxml import etree

from sift.render import RenderOptions, dom, jsshell, metadata, render
from sift.render.html import prepare
from sift.render.pagetree import PageTree
from sift.render.patterns import COMMENT, NOT_BOILER, STRONG, WEAK, boiler_kind, boiler_kinds

SENTENCE = "The council met on Tuesday and agreed the new budget for the harbour."
PROSE = " ".join([SENTENCE] * 4)


def _root(html: str) -> etree._Element:
    root = dom.parse_html(html.encode())
    assert root is not None
    return root


def test_clean_returns_every_elements_attributes_and_drops_the_hidden() -> None:
    root = _root(
        '<html lang="en"><body class="home"><div id="main" class="Wrap">'
        '<p class="lead" style="color: red">Kept</p>'
        '<span class="SR-Only">gone</span><span class="x d-none y">gone</span>'
        '<span style="DISPLAY : none">gone</span><span hidden>gone</span>'
        '<span aria-hidden="true">gone</span><span aria-hidden="false">kept</span>'
        '<span class="hidden-xs-up">kept</span></div></body></html>'
    )
    attrs = dom.clean(root)
    assert [(el.tag, items) for el, items in attrs.items()] == [
        ("html", [("lang", "en")]),
        ("body", [("class", "home")]),
        ("div", [("id", "main"), ("class", "Wrap")]),
        ("p", [("class", "lead"), ("style", "color: red")]),
        ("span", [("class", "SR-Only")]),
        ("span", [("class", "x d-none y")]),
        ("span", [("style", "DISPLAY : none")]),
        ("span", [("hidden", "")]),
        ("span", [("aria-hidden", "true")]),
        ("span", [("aria-hidden", "false")]),
        ("span", [("class", "hidden-xs-up")]),
    ]
    body = root.find("body")
    assert body is not None
    assert " ".join(body.itertext()) == "Kept kept kept"


def test_chars_counts_the_text_under_an_element_without_whitespace() -> None:
    root = _root("<body><div>a b\tc<p>d\ne</p>\r\n f<i> g </i></div>tail</body>")
    div = root.find(".//div")
    assert dom.chars(div) == 7  # a b c d e f g; not the div's tail


def test_text_len_stops_once_enough_is_counted() -> None:
    parts = ["  one  two ", None, "three", "", "four   five six"]
    assert dom.text_len(parts) == len("one two") + len("three") + len("four five six")
    assert dom.text_len(parts, 10) == 12  # stops after "three": 7 + 5
    assert dom.text_len(parts, 100) == 25


def test_chrome_kinds_and_words_from_the_attribute_lists() -> None:
    root = _root(
        "<body><header class='site'>h</header><nav>n</nav>"
        "<div class='relatedPosts'>r</div><div id='comments'>c</div>"
        "<div class='comment-body'>cb</div><div role='navigation' class='comments'>rn</div>"
        "<div class='post-meta' id='x'>m</div><div class='content'>t</div>"
        "<div class='commentary'>x</div><div class='widget promo'>w</div></body>"
    )
    body = root.find("body")
    tree = PageTree.of(body)
    kinds, words = boiler_kinds(tree.tags, tree.items)
    # the same verdicts as boiler_kind reads element by element
    assert kinds == [boiler_kind(el) for el in tree.els]
    assert list(zip(tree.tags, kinds, strict=True)) == [
        ("body", NOT_BOILER),
        ("header", WEAK),
        ("nav", STRONG),
        ("div", WEAK),
        ("div", COMMENT),
        ("div", WEAK),  # a content word makes a comment word doubtful
        ("div", STRONG),  # a chrome role outranks the class's comment verdict
        ("div", WEAK),
        ("div", NOT_BOILER),
        ("div", NOT_BOILER),  # "commentary" names content
        ("div", WEAK),
    ]
    assert {tree.tags[i] + str(i): w for i, w in words.items()} == {
        "div3": "related",
        "div4": "comments",
        "div5": "comment",
        "div6": "comments",
        "div7": "meta",
        "div10": "widget",
    }


def test_the_js_detector_reads_inline_code_only_on_a_page_with_little_text() -> None:
    writes = "<script>document.write('<p>built</p>'); window.__STATE__ = {};</script>"
    paragraphs = f"<p>{SENTENCE}</p>" * 10
    long_page = f"<html><head>{writes}</head><body>{paragraphs}</body></html>"
    root = _root(long_page)
    reader = jsshell.Reader(root)
    dom.clean(root)
    signals = reader.signals(root.find("body"))
    # counted up to what the verdict needs (three paragraphs of ten); the code was not read
    assert signals.visible_chars == 3 * len(SENTENCE) >= jsshell.LITTLE_TEXT_CHARS
    assert (signals.writes_markup, signals.hydration_data) == (False, False)
    assert jsshell.verdict(signals) is None
    empty = _root(f"<html><head>{writes}</head><body><div>Loading</div></body></html>")
    reader = jsshell.Reader(empty)
    dom.clean(empty)
    signals = reader.signals(empty.find("body"))
    assert signals.visible_chars == len("Loading")
    assert (signals.writes_markup, signals.hydration_data) == (True, True)
    assert jsshell.verdict(signals) == "hydration_data"


def test_bylines_and_microdata_at_most_so_many_per_parent() -> None:
    bylines = "".join('<span class="author">' + "x" * 90 + "</span>" for _ in range(50))
    root = _root(
        f'<html><body><div>{bylines}<span class="author">Too Late</span></div>'
        '<div><a rel="author" href="/me">By Ann Lee</a></div></body></html>'
    )
    # the 51st byline of one parent is not read; the next parent's is
    assert metadata.read(root, prepare(b"<p>x</p>", url="").info, base_url="", lang=None) == {
        "author": "Ann Lee"
    }


def test_valid_utf8_and_a_page_with_a_replacement_character_render_alike() -> None:
    html = f"<html><body><article><p>Caf\u00e9 {PROSE}</p><p>\ufffd end</p></article></body></html>"
    options = RenderOptions(format="text")
    as_utf8 = render(html.encode(), content_type="text/html", url="", options=options)
    labelled = render(
        html.encode(), content_type="text/html; charset=utf-8", url="", options=options
    )
    assert as_utf8.content == labelled.content == f"Caf\u00e9 {PROSE}\n\n\ufffd end"


def test_the_cycle_collector_is_given_back_as_it_was() -> None:
    html = f"<html><body><p>{PROSE}</p></body></html>".encode()
    options = RenderOptions(format="text")
    assert gc.isenabled()
    render(html, content_type="text/html", url="", options=options)
    assert gc.isenabled()
    gc.disable()
    try:
        render(html, content_type="text/html", url="", options=options)
        assert not gc.isenabled()
    finally:
        gc.enable()
