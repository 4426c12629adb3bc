"""Markdown and text fidelity on small exact-value fixtures (whole-page mode)."""

from __future__ import annotations

from sift.render import Rendered, RenderOptions, render

URL = "https://example.com/dir/page.html"


def md(html: str, **kw: object) -> str:
    opts = RenderOptions(main_content=False, **kw)  # type: ignore[arg-type]
    return render(html.encode(), content_type="text/html", url=URL, options=opts).content


def doc(html: str, **kw: object) -> Rendered:
    opts = RenderOptions(**kw)  # type: ignore[arg-type]
    return render(html.encode(), content_type="text/html", url=URL, options=opts)


def test_atx_headings() -> None:
    assert (
        md("<h1>One</h1><h2>Two <em>x</em></h2><h6>Six</h6>") == "# One\n\n## Two *x*\n\n###### Six"
    )


def test_paragraphs_and_whitespace_are_normalised() -> None:
    html = "<p>  a\n\n   b  </p>\n\n\n<p>c</p><div>  </div><p></p><p>d</p>"
    assert md(html) == "a b\n\nc\n\nd"


def test_emphasis_and_strong_use_asterisks() -> None:
    assert md("<p><em>e</em> <i>i</i> <strong>s</strong> <b> b </b></p>") == "*e* *i* **s** **b**"


def test_links_are_absolute_against_url() -> None:
    html = '<p><a href="../x?q=1">rel</a> <a href="/abs">abs</a> <a href="#top">frag</a></p>'
    assert md(html) == ("[rel](https://example.com/x?q=1) [abs](https://example.com/abs) frag")


def test_links_resolve_against_base_href() -> None:
    html = (
        '<html><head><base href="https://cdn.example.org/b/"></head><body><p><a href="y">t</a></p>'
    )
    assert md(html) == "[t](https://cdn.example.org/b/y)"


def test_images_keep_alt_and_drop_data_uris() -> None:
    html = '<p><img src="i.png" alt="pic"> <img src="data:image/png;base64,AAAA" alt="d"></p>'
    assert md(html) == "![pic](https://example.com/dir/i.png)"


def test_nested_lists() -> None:
    html = "<ul><li>a<ul><li>b<ol><li>c</li><li>d</li></ol></li></ul></li><li>e</li></ul>"
    assert md(html) == "- a\n  - b\n    1. c\n    2. d\n- e"


def test_ordered_list_start() -> None:
    assert md('<ol start="3"><li>x</li><li>y</li></ol>') == "3. x\n4. y"


def test_fenced_code_keeps_language_and_whitespace() -> None:
    html = '<pre><code class="language-python">def f():\n    return 1\n</code></pre>'
    assert md(html) == "```python\ndef f():\n    return 1\n```"


def test_code_fence_longer_than_backticks_inside() -> None:
    assert md("<pre>a ``` b</pre>") == "````\na ``` b\n````"


def test_inline_code() -> None:
    assert md("<p>run <code>ls -l</code> now</p>") == "run `ls -l` now"


def test_gfm_table() -> None:
    html = (
        "<table><thead><tr><th>h1</th><th>h|2</th></tr></thead>"
        "<tbody><tr><td>a</td><td><b>b</b></td></tr><tr><td>c</td></tr></tbody></table>"
    )
    assert md(html) == "| h1 | h\\|2 |\n| --- | --- |\n| a | **b** |\n| c |  |"


def test_layout_table_renders_as_blocks() -> None:
    html = "<table><tr><td><p>one</p><p>two</p></td></tr></table>"
    assert md(html) == "one\n\ntwo"


def test_blockquote() -> None:
    assert md("<blockquote><p>q1</p><p>q2</p></blockquote>") == "> q1\n>\n> q2"


def test_script_style_template_hidden_never_leak() -> None:
    html = (
        "<p>keep</p><script>var x=1</script><style>p{}</style><template><p>t</p></template>"
        '<p hidden>h</p><p style="display: none">n</p><p class="sr-only">s</p>'
        '<p aria-hidden="true">a</p><noscript>ns</noscript>'
    )
    assert md(html) == "keep"


def test_line_breaks_and_special_characters() -> None:
    assert md("<p>a<br>b</p><p>2 * 3 [x]</p>") == "a\nb\n\n2 \\* 3 \\[x\\]"


def test_paragraph_that_looks_like_markup_is_escaped() -> None:
    assert md("<p># not a heading</p>") == "\\# not a heading"


def test_text_format_has_no_markup() -> None:
    html = (
        '<h2>T</h2><p><em>e</em> <a href="/l">link</a> <img src="i.png" alt="x"></p>'
        "<ul><li>a</li></ul><table><tr><td>1</td><td>2</td></tr></table>"
    )
    assert md(html, format="text") == "T\n\ne link\n\n- a\n\n1\t2"


def test_html_format_is_clean_and_absolute() -> None:
    html = (
        '<div class="x" onclick="evil()"><p style="c">Hi <a href="/a" target="_b">a</a></p></div>'
    )
    assert (
        md(html, format="html")
        == '<body><div><p>Hi <a href="https://example.com/a">a</a></p></div></body>'
    )


def test_links_collected_when_asked() -> None:
    r = doc(
        '<p><a href="/a">A</a> and <a href="https://o.org/">O</a></p>',
        links=True,
        main_content=False,
    )
    assert r.links == [
        {"text": "A", "url": "https://example.com/a"},
        {"text": "O", "url": "https://o.org/"},
    ]
    assert doc('<p><a href="/a">A</a></p>', main_content=False).links == []


def test_title_and_lang() -> None:
    r = doc(
        '<html lang="en-GB"><head><title> The  Title </title></head><body><p>x</p></body></html>'
    )
    assert (r.title, r.lang) == ("The Title", "en-gb")


# ---- main-content mode: what an agent needs survives extraction (issue 19, item 6) ----------

_PROSE = "Rivers carve their valleys slowly, grain by grain, over many thousands of years. " * 4
_ARTICLE = (
    "<html><head><title>How Rivers Shape Valleys | Example News</title></head><body>"
    '<header><nav><a href="/">Home</a> <a href="/about">About</a></nav></header>'
    '<main><article><header class="entry-header"><h1>How <em>Rivers</em> Shape Valleys</h1>'
    '</header><div class="entry-content">'
    f"<p>{_PROSE}</p><h2>Erosion</h2>"
    "<table><tr><th>River</th><th>Length</th></tr><tr><td>Nile</td><td>6650 km</td></tr>"
    "</table>"
    '<pre><code class="language-python">def f():\n    return 1\n</code></pre>'
    '<pre data-lang="Bash">ls  -l</pre>'
    "<ul><li>one<ul><li>two<ol><li>three</li></ol></li></ul></li><li>four</li></ul>"
    '<p><img src="/v.png" alt="A river valley"></p>'
    f"<p>{_PROSE}</p></div></article></main>"
    "<footer><p>Copyright Example News</p></footer></body></html>"
)
_BODY = (
    f"{_PROSE.strip()}\n\n## Erosion\n\n"
    "| River | Length |\n| --- | --- |\n| Nile | 6650 km |\n\n"
    "```python\ndef f():\n    return 1\n```\n\n"
    "```bash\nls  -l\n```\n\n"
    "- one\n  - two\n    1. three\n- four\n\n"
    "![A river valley](https://example.com/v.png)\n\n"
    f"{_PROSE.strip()}"
)


def extracted(html: str, fmt: str = "markdown") -> str:
    opts = RenderOptions(format=fmt)  # type: ignore[arg-type]
    page = render(html.encode(), content_type="text/html", url=URL, options=opts, model=None)
    return page.content


def test_main_content_keeps_heading_table_code_lists_and_alt_text() -> None:
    """The article's h1 (above its body, named like the document) opens the markdown; the
    table stays a pipe table, code keeps its language (class and data-lang) verbatim, the
    nested lists their depth, the image its alt text; nav and footer stay out."""
    assert extracted(_ARTICLE) == f"# How Rivers Shape Valleys\n\n{_BODY}"


def test_text_format_leaves_the_title_heading_to_title() -> None:
    out = extracted(_ARTICLE, "text")
    assert out.startswith(_PROSE.strip()) and "How Rivers Shape Valleys" not in out


def test_h1_that_is_not_the_documents_heading_is_not_added() -> None:
    """An h1 that does not name the document (a site logo) is not promoted, and neither is
    a title-like h1 after the content (it heads something else)."""
    logo = _ARTICLE.replace("How <em>Rivers</em> Shape Valleys", "Example")
    assert extracted(logo) == _BODY
    after = logo.replace("<footer><p>", "<footer><h1>How Rivers Shape Valleys</h1><p>")
    assert extracted(after) == _BODY
