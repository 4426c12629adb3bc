"""Hostile and broken bodies: each gives a result or a clean sift error, quickly."""

from __future__ import annotations

import random

import pytest

from sift.errors import SiftError, UnsupportedContentType
from sift.render import Rendered, RenderOptions, render
from sift.render.decode import decode, utf8_of

URL = "https://example.com/"


def r(body: bytes, ctype: str = "text/html", **kw: object) -> Rendered:
    return render(body, content_type=ctype, url=URL, options=RenderOptions(**kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["markdown", "text", "html", "raw"])
def test_empty_body(fmt: str) -> None:
    out = r(b"", format=fmt)
    assert (out.content, out.title) == ("", None)


@pytest.mark.parametrize("fmt", ["markdown", "text", "html"])
def test_100000_deep_nesting(fmt: str) -> None:
    body = b"<p>top</p>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000 + b"<p>end</p>"
    out = r(body, format=fmt, main_content=False)
    # libxml2 caps nesting at 2048 levels; what it keeps renders, the rest is dropped.
    assert "top" in out.content


def test_100000_deep_inline_nesting_with_text() -> None:
    body = b"<body>" + b"<span>a " * 100_000 + b"</span>" * 100_000
    out = r(body, format="text")
    # Deeper than Python's stack: rendered as flat text, one line per text node, 2048 kept.
    assert out.content == "\n".join(["a"] * 2046)


def test_100000_deep_json_and_xml() -> None:
    out = r(b"[" * 100_000 + b"]" * 100_000, "application/json")
    assert out.warnings == ["invalid_json"]
    assert len(out.content) == 200_000
    assert r(b"<a>" * 100_000 + b"</a>" * 100_000, "application/xml").content == ""


def test_50_mb_single_line() -> None:
    body = b"<html><body><p>" + b"x" * (50 * 1024 * 1024) + b"</p></body></html>"
    out = r(body, format="text")
    assert len(out.content) == 50 * 1024 * 1024


def test_broken_utf8_is_replaced_not_fatal() -> None:
    body = (
        b"<html><head><meta charset='utf-8'></head><body><p>caf\xc3 ok \xff\xfe</p></body></html>"
    )
    assert r(body, format="text").content == "caf\ufffd ok \ufffd\ufffd"


def test_unknown_declared_charset_falls_back() -> None:
    body = b"<meta charset='x-no-such-codec'><p>plain</p>"
    assert r(body, format="text").content == "plain"


def test_binary_garbage_labelled_html_is_a_clean_error() -> None:
    garbage = random.Random(7).randbytes(200_000)
    with pytest.raises(UnsupportedContentType):
        r(garbage)


def test_garbage_without_nul_still_renders_or_errors_cleanly() -> None:
    rng = random.Random(11)
    garbage = bytes(rng.choice(range(32, 256)) for _ in range(50_000))
    try:
        out = r(garbage)
    except SiftError:
        return
    assert isinstance(out.content, str)


def test_damaged_pdf_is_a_clean_error() -> None:
    with pytest.raises(UnsupportedContentType):
        r(b"%PDF-1.7\n" + b"\x00garbage" * 100, "application/pdf")


def test_unclosed_tags_and_stray_markup() -> None:
    body = b"<p>one<p>two<li>three<table><td>four</b></i></div></span><p>five"
    assert (
        r(body, format="text", main_content=False).content == "one\n\ntwo\n\nthree\n\nfour\n\nfive"
    )


def test_the_parser_gets_the_decoded_text_as_utf8_and_valid_utf8_as_is() -> None:
    """``utf8_of`` (what ``render`` hands the HTML parser) is ``decode`` re-encoded, and a
    body that is already valid UTF-8 is passed on as the same object (no copy)."""
    cases = {
        "ascii": b"<p>plain &amp; simple</p>",
        "utf-8": "<p>caf\u00e9 \u2014 \ufffd literal</p>".encode(),
        "broken": b"<meta charset='utf-8'><p>caf\xc3 ok \xff\xfe</p>",
        "bom": b"\xef\xbb\xbf<p>caf\xc3\xa9</p>",
        "cp1252": b"<meta charset='windows-1252'><p>caf\xe9 \x93quoted\x94</p>",
        "cp1252 unlabelled": b"<p>tr\xe8s bien, d\xe9j\xe0 vu</p>",
    }
    for name, body in cases.items():
        for declared in (None, "utf-8", "iso-8859-1"):
            text, _codec = decode(body, declared)
            assert utf8_of(body, declared) == text.encode("utf-8", errors="replace"), name
    for name in ("ascii", "utf-8"):
        assert utf8_of(cases[name]) is cases[name]
    assert utf8_of(cases["broken"]) == b"<meta charset='utf-8'><p>caf\xef\xbf\xbd ok " + (
        b"\xef\xbf\xbd" * 2 + b"</p>"
    )
