"""Generic main-content rules, one small hand-written page per rule."""

from __future__ import annotations

from sift.render import RenderOptions, render

NAV = '<nav><a href="/">Home</a> <a href="/about">About</a> <a href="/help">Help</a></nav>'


def text(html: str) -> str:
    options = RenderOptions(format="text")
    return render(
        html.encode(), content_type="text/html", url="https://e.example/", options=options
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
