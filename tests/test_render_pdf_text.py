"""A PDF's text keeps its line and paragraph breaks (issue 21 #15).

pypdf's plain extraction kept lines but no paragraphs, so a page came out as one run of
lines, which markdown readers join into one paragraph. Each PDF here is built in the test,
the ways common generators place text (TeX: one text object moved by ``Td``; word
processors: one text object per line placed by ``Tm``; ``T*`` with a leading; two columns;
a rotated page), and the exact text is asserted.
"""

from __future__ import annotations

import io

import pytest

from sift.render.nonhtml import render_pdf
from sift.render.options import RenderOptions
from sift.render.render import render


def text_pdf(*pages: bytes) -> bytes:
    """A PDF of one page per content stream, Helvetica as /F1, US Letter."""
    n_pages = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n_pages)).encode()
    objs: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % n_pages,
        99: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    for i, content in enumerate(pages):
        page, stream = 3 + 2 * i, 4 + 2 * i
        objs[page] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 99 0 R >> >> >>" % stream
        )
        objs[stream] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content)
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = {}
    for n in sorted(objs):
        offsets[n] = out.tell()
        out.write(b"%d 0 obj\n" % n + objs[n] + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (max(objs) + 1))
    for n in range(1, max(objs) + 1):
        out.write(b"%010d 00000 n \n" % offsets[n] if n in offsets else b"0000000000 65535 f \n")
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (max(objs) + 1, xref)
    )
    return out.getvalue()


def line_at(x: int, y: int, text: str, size: int = 12) -> bytes:
    """One line as a word processor draws it: its own text object, placed by Tm."""
    return b"BT /F1 %d Tf 1 0 0 1 %d %d Tm (%s) Tj ET\n" % (size, x, y, text.encode())


def text_of(pdf: bytes) -> str:
    _, content, over = render_pdf(pdf)
    assert over is False
    return content


TWO_PARAGRAPHS = (
    "--- page 1 ---\n"
    "First line of the first paragraph,\nits second line.\n\n"
    "A second paragraph,\nits second line,\nits last line."
)


def test_tex_style_one_text_object_moved_by_td() -> None:
    content = (
        b"BT /F1 12 Tf 72 720 Td (First line of the first paragraph,) Tj 0 -14 Td "
        b"(its second line.) Tj 0 -28 Td [(A second) -250 (paragraph,)] TJ 0 -14 Td "
        b"(its second line,) Tj 0 -14 Td (its last line.) Tj ET"
    )
    assert text_of(text_pdf(content)) == TWO_PARAGRAPHS


def test_lines_by_t_star_and_a_leading() -> None:
    content = (
        b"BT /F1 12 Tf 14 TL 72 720 Td (First line of the first paragraph,) Tj T* "
        b"(its second line.) Tj T* T* (A second paragraph,) Tj T* (its second line,) Tj "
        b"T* (its last line.) Tj ET"
    )
    assert text_of(text_pdf(content)) == TWO_PARAGRAPHS


def test_word_processor_style_heading_and_space_after_paragraphs() -> None:
    """A larger heading, then paragraphs set apart by 6 pt of space (not a blank line):
    the usual step is the most common one (14 pt), so 20 pt starts a paragraph."""
    content = b"".join(
        [
            line_at(72, 740, "Field notes", size=18),
            line_at(72, 712, "A cache earns its bytes when the same"),
            line_at(72, 698, "pages are asked for again."),
            line_at(72, 678, "Freshness is a promise with a date"),
            line_at(72, 664, "on it."),
            line_at(72, 644, "- one item"),
            line_at(72, 630, "- another item"),
        ]
    )
    assert text_of(text_pdf(content)) == (
        "--- page 1 ---\nField notes\n\n"
        "A cache earns its bytes when the same\npages are asked for again.\n\n"
        "Freshness is a promise with a date\non it.\n\n"
        "- one item\n- another item"
    )


def test_a_new_column_starts_a_paragraph() -> None:
    content = b"".join(
        [
            line_at(72, 720, "Left column, line one,"),
            line_at(72, 706, "line two,"),
            line_at(72, 692, "line three."),
            line_at(320, 720, "Right column, line one,"),
            line_at(320, 706, "line two."),
        ]
    )
    assert text_of(text_pdf(content)) == (
        "--- page 1 ---\nLeft column, line one,\nline two,\nline three.\n\n"
        "Right column, line one,\nline two."
    )


def test_a_rotated_page() -> None:
    """Text turned 90 degrees (a landscape page drawn on a portrait one): steps are measured
    along the text's own up direction."""
    content = (
        b"q 0 1 -1 0 612 0 cm BT /F1 12 Tf 72 500 Td (Turned, line one,) Tj 0 -14 Td "
        b"(line two.) Tj 0 -28 Td (Second paragraph,) Tj 0 -14 Td (line two,) Tj 0 -14 Td "
        b"(line three.) Tj ET Q"
    )
    assert text_of(text_pdf(content)) == (
        "--- page 1 ---\nTurned, line one,\nline two.\n\nSecond paragraph,\nline two,\nline three."
    )


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (14, "--- page 1 ---\nTitle line\nnext line"),
        (28, "--- page 1 ---\nTitle line\n\nnext line"),
    ],
)
def test_two_lines_alone_use_the_font_height(step: int, expected: str) -> None:
    """Too few lines to learn the page's usual step: a step past 1.3 x 1.2 x the font size
    (18.7 pt at 12 pt) starts a paragraph."""
    content = line_at(72, 720, "Title line") + line_at(72, 720 - step, "next line")
    assert text_of(text_pdf(content)) == expected


def test_the_breaks_reach_every_format() -> None:
    """Through the renderer as a fetch uses it: markdown and text carry the same text, and
    html wraps it in <pre>; pages follow each other under their markers."""
    page2 = line_at(72, 720, "Page two, line one,") + line_at(72, 706, "line two.")
    page1 = (
        line_at(72, 720, "One,")
        + line_at(72, 706, "two.")
        + line_at(72, 678, "Three,")
        + line_at(72, 664, "four.")
    )
    body = text_pdf(page1, page2)
    expected = (
        "--- page 1 ---\nOne,\ntwo.\n\nThree,\nfour.\n\n"  # the page ends with a paragraph
        "--- page 2 ---\nPage two, line one,\nline two."
    )
    for fmt in ("markdown", "text"):
        out = render(
            body,
            content_type="application/pdf",
            url="http://docs.test/a.pdf",
            options=RenderOptions(format=fmt),
        )
        assert out.content == expected, fmt
    out = render(
        body,
        content_type="application/pdf",
        url="http://docs.test/a.pdf",
        options=RenderOptions(format="html"),
    )
    assert out.content == f"<pre>{expected}</pre>"
