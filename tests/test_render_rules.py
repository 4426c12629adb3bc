"""Generic main-content rules, one small hand-written page per rule."""

from __future__ import annotations

from sift.render import RenderOptions, render

NAV = '<nav><a href="/">Home</a> <a href="/about">About</a> <a href="/help">Help</a></nav>'


def text(html: str) -> str:
    """The rules alone (``model=None``): the learned model on top is tested in
    test_render_model.py and measured by bench/extract.py."""
    options = RenderOptions(format="text")
    return render(
        html.encode(),
        content_type="text/html",
        url="https://e.example/",
        options=options,
        model=None,
    ).content


def _para(n: int) -> str:
    return (
        f"Block {n} of the page explains one thing in plain sentences, long enough to read "
        f"as prose: what it is, why it matters and how to start with it today."
    )


def test_a_weak_word_naming_every_block_of_the_page_is_not_chrome() -> None:
    # Page builders put one class word on every block ("widget"); blocks that hold the
    # page's text under that word are its content.
    blocks = "".join(
        f'<div class="builder-widget builder-widget-text"><p>{_para(n)}</p></div>'
        for n in range(1, 5)
    )
    page = f"<html><body>{NAV}<main>{blocks}</main><footer>Imprint</footer></body></html>"
    assert text(page) == "\n\n".join(_para(n) for n in range(1, 5))


def test_sidebar_widgets_beside_an_article_are_still_chrome() -> None:
    article = "".join(f"<p>{_para(n)}</p>" for n in range(1, 7))
    widgets = "".join(
        f'<div class="widget"><p>Widget {n}: a small box of text beside the article.</p></div>'
        for n in range(1, 4)
    )
    page = f"<html><body>{NAV}<article>{article}</article><div>{widgets}</div></body></html>"
    assert text(page) == "\n\n".join(_para(n) for n in range(1, 7))


def test_a_paragraph_is_not_the_article_when_comments_share_its_container() -> None:
    # The post's paragraphs and a long comment thread sit in one container: the thread
    # (chrome) outweighs the post, so the best subtree was a single paragraph.
    comments = "".join(
        f'<div class="comment"><p>Comment {n}: {_para(n)} {_para(n)}</p></div>' for n in range(1, 9)
    )
    post = "".join(f"<p>{_para(n)}</p>" for n in range(1, 4))
    page = f'<html><body>{NAV}<div class="postarea">{post}{comments}</div></body></html>'
    assert text(page) == "\n\n".join(_para(n) for n in range(1, 4))


def _article(*parts: str) -> str:
    return f"<html><body>{NAV}<main>{''.join(parts)}</main></body></html>"


def test_inline_elements_in_running_prose_are_never_pruned() -> None:
    sentence = (
        '<p>The council met on <a class="popup" href="/tuesday">Tuesday</a> and '
        '<span class="share-count">voted</span> to approve the budget for next year.</p>'
    )
    page = _article(f"<p>{_para(1)}</p>", sentence, f"<p>{_para(2)}</p>")
    assert text(page) == "\n\n".join(
        [
            _para(1),
            "The council met on Tuesday and voted to approve the budget for next year.",
            _para(2),
        ]
    )


def test_a_weak_word_cannot_remove_a_thousand_characters_of_paragraphs() -> None:
    # A post's own container carries a tag slug; it holds under half of the page's text,
    # but 1,000 characters of paragraphs are never chrome for a weak word.
    tagged = "".join(f"<p>{_para(n)}</p>" for n in range(1, 11))  # ~1,250 characters
    intro = "".join(f"<p>{_para(n)}</p>" for n in range(11, 23))
    page = _article(f"<div>{intro}</div>", f'<div class="tag-science">{tagged}</div>')
    assert text(page) == "\n\n".join(
        [*(_para(n) for n in range(11, 23)), *(_para(n) for n in range(1, 11))]
    )


def test_section_headings_are_content_whatever_their_class() -> None:
    page = _article(
        f"<p>{_para(1)}</p>", '<h2 class="widget-title">Results</h2>', f"<p>{_para(2)}</p>"
    )
    assert text(page) == f"{_para(1)}\n\nResults\n\n{_para(2)}"


def test_a_list_of_links_to_other_sites_is_kept_and_a_site_list_dropped() -> None:
    refs = "".join(
        f'<li><a href="https://source{n}.example/paper">Source {n}, the paper</a></li>'
        for n in range(1, 4)
    )
    site = "".join(f'<li><a href="/topics/{n}">Topic {n}</a></li>' for n in range(1, 4))
    page = _article(
        f"<p>{_para(1)}</p><p>{_para(2)}</p>",
        f"<h2>References</h2><ul>{refs}</ul>",
        f"<ul>{site}</ul>",
    )
    expected = [_para(1), _para(2), "References"]
    expected += [f"- Source {n}, the paper" for n in range(1, 4)]
    assert text(page) == "\n\n".join(expected[:3]) + "\n\n" + "\n".join(expected[3:])


def test_text_format_writes_no_numbers_for_ordered_items() -> None:
    page = _article(f"<p>{_para(1)}</p>", "<ol><li>Preheat the oven.</li><li>Bake it.</li></ol>")
    assert text(page) == f"{_para(1)}\n\n- Preheat the oven.\n- Bake it."
