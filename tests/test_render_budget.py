"""Render output and work are bounded: budgets, nesting, tables, JSON, PDF, selector limits."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from pdfbomb import xobject_bomb
from sift.render import RenderOptions, render
from sift.render.nonhtml import render_pdf
from sift.render.selector import check_selectors, selector_problems

URL = "http://example.test/"


def html(body: str | bytes, **kw: Any) -> Any:
    data = body.encode() if isinstance(body, str) else body
    return render(data, content_type="text/html", url=URL, options=RenderOptions(**kw))


def test_nested_lists_indent_eight_levels_then_go_flat() -> None:
    out = html("<ul><li>x" * 12 + "</ul>" * 12, main_content=False).content
    assert out == "\n".join([*(" " * (2 * i) + "- x" for i in range(8)), *[" " * 16 + "x"] * 4])
    # 300 levels: output linear in the input (it was quadratic: every level re-indented).
    deep = "<ul><li>x" * 300 + "</ul>" * 300
    assert len(html(deep, main_content=False).content) < 20 * len(deep)


def test_nested_blockquotes_prefix_eight_levels_at_most() -> None:
    out = html("<blockquote>q" * 12 + "</blockquote>" * 12, main_content=False).content
    assert max(line.count(">") for line in out.split("\n")) == 8


def test_a_wide_row_over_short_rows_is_not_padded_but_normal_tables_are() -> None:
    wide = "<table><tr>" + "<td>a" * 5 + "</tr>" + "<tr><td>b" * 20 + "</table>"
    out = html(wide, main_content=False).content
    assert out == "\n".join(
        ["| a | a | a | a | a |", "| --- | --- | --- | --- | --- |"] + ["| b |"] * 20
    )
    ragged = "<table><tr><td>h1<td>h2<td>h3<tr><td>a<td>b<tr><td>c</table>"
    assert html(ragged, main_content=False).content == (
        "| h1 | h2 | h3 |\n| --- | --- | --- |\n| a | b |  |\n| c |  |  |"
    )


def test_output_stops_at_the_budget_with_a_warning() -> None:
    page = "<html><body>" + "<p>" + "word " * 50 + "</p>" * 1 + "<p>more text</p>" * 5000
    full = html(page, main_content=False)
    assert full.warnings == [] and len(full.content) > 50_000
    cut = html(page, main_content=False, max_bytes=10_000)
    assert cut.warnings == ["render_budget_exceeded"]
    assert 9_000 <= len(cut.content.encode()) <= 10_000
    assert full.content.startswith(cut.content)


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_relative_links_under_a_long_base_stay_within_the_budget(fmt: str) -> None:
    base = "http://example.test/" + "b" * 8000 + "/"
    page = f'<html><head><base href="{base}"></head><body><p>' + "<a href=a>x</a> " * 5000
    out = html(page, main_content=False, format=fmt, max_bytes=100_000)
    assert out.warnings == ["render_budget_exceeded"]
    assert len(out.content.encode()) <= 100_000
    # Text mode writes no URLs: nothing grows.
    text = html(page, main_content=False, format="text", max_bytes=100_000)
    assert (text.content, text.warnings) == (" ".join(["x"] * 5000), [])


def test_selector_matches_are_rendered_once_each_in_document_order() -> None:
    page = "<div class=a><p>1</p><div class=a><p>2</p></div></div><div class=a><p>3</p></div>"
    assert html(page, selector=".a", format="text").content == "1\n\n2\n\n3"


def test_deep_json_pretty_printing_stops_at_the_budget() -> None:
    deep = ("[" * 900 + "]" * 900).encode()
    out = render(deep, content_type="application/json", url=URL, options=RenderOptions())
    assert len(out.content) > 700_000  # indentation is quadratic in depth
    cut = render(
        deep, content_type="application/json", url=URL, options=RenderOptions(max_bytes=50_000)
    )
    assert cut.warnings == ["render_budget_exceeded"]
    assert len(cut.content.encode()) <= 50_000
    assert out.content.startswith(cut.content)


def test_raw_and_text_bodies_are_cut_at_the_budget() -> None:
    body = ("line\n" * 10_000).encode()
    for fmt in ("raw", "text"):
        out = render(
            body,
            content_type="text/plain",
            url=URL,
            options=RenderOptions(format=fmt, max_bytes=1000),  # type: ignore[arg-type]
        )
        assert (out.content, out.warnings) == ("line\n" * 200, ["render_budget_exceeded"])


def test_pdf_text_extraction_stops_past_its_time_budget() -> None:
    ticks = itertools.count()

    def clock() -> float:
        return next(ticks) * 0.01  # every reading is 10 ms later: deterministic

    title, content, over = render_pdf(xobject_bomb(levels=6), time_budget_s=1.0, clock=clock)
    assert (title, content, over) == (
        None,
        "--- page 1: stopped, the PDF took too long to read ---",
        True,
    )
    # A small, normal budget is not hit by a small document.
    title, content, over = render_pdf(xobject_bomb(levels=1), time_budget_s=60.0)
    assert (content, over) == ("--- page 1 ---\n" + "\n".join(["a"] * 10), False)


@pytest.mark.parametrize(
    ("selector", "problems", "has"),
    [
        ("article", [], 0),
        ("div.content > p a[href^='http']", [], 0),
        ("div:has(> p):not(.ad)", [], 1),
        ("a b c d e f g h i j", ["9 combinators (at most 8)"], 0),
        ("a,b,c,d,e,f,g,h,i", ["9 comma-separated selectors (at most 8)"], 0),
        (":not(.a):not(.b):not(.c):not(.d):not(.e)", ["5 pseudo-classes (at most 4)"], 0),
        (
            "div:has(p:has(a))",
            [":has() inside :has() (its cost grows as a power of the page size)"],
            2,
        ),
        ("li:nth-child(2)", ["looks at siblings"], 0),
        ("h1 ~ p", ["looks at siblings"], 0),
        ("div:has(+ p)", ["looks at siblings"], 1),
        ("a[[", ["not a valid CSS selector"], 0),
        ("p" * 1025, ["longer than 1024 characters"], 0),
    ],
)
def test_selector_limits(selector: str, problems: list[str], has: int) -> None:
    found, n_has = selector_problems(selector)
    assert [p[: len(want)] for p, want in zip(found, problems, strict=True)] == problems
    assert n_has == has


def test_selector_and_exclude_are_limited_together() -> None:
    assert check_selectors("div:has(p)", ["nav", "footer"]) == []
    assert check_selectors("div:has(p)", ["nav:has(a)"]) == [
        "selector and exclude: 2 :has() in all (at most 1; each one searches below every "
        "candidate element)"
    ]
    assert check_selectors("x" * 1000, ["y" * 1000, "z" * 49]) == [
        "selector and exclude: 2049 characters together (at most 2048)"
    ]
    assert check_selectors(None, ["a ~ b"])[0].startswith("exclude[0]: looks at siblings")
