"""Page types: what the main content is on pages that are not articles.

Each fixture is a small hand-written page with the one structure the rule is about.
"""

from __future__ import annotations

import json

from sift.render import RenderOptions, render

PROSE = (
    "This paragraph is the article: it runs long enough to be the main content of the page, "
    "with several sentences of plain prose and no links at all inside it."
)
NAV = '<nav><a href="/">Home</a> <a href="/forum">Forum</a> <a href="/help">Help</a></nav>'


def text(html: str, fmt: str = "text") -> str:
    """The rules alone (``model=None``): the learned model on top is tested in
    test_render_model.py and measured by bench/extract.py."""
    options = RenderOptions(format=fmt)  # type: ignore[arg-type]
    return render(
        html.encode(),
        content_type="text/html",
        url="https://e.example/",
        options=options,
        model=None,
    ).content


def _post(n: int) -> str:
    return (
        f'<div class="comment" id="comment-{n}"><span class="author">user{n}</span>'
        f"<p>Post {n}: {PROSE}</p></div>"
    )


def test_thread_posts_marked_as_comments_are_the_content() -> None:
    ld = json.dumps({"@context": "https://schema.org", "@type": "DiscussionForumPosting"})
    page = (
        f'<html><head><script type="application/ld+json">{ld}</script></head><body>{NAV}'
        f"<div class=thread><h2>Which telescope first?</h2>"
        + "".join(_post(n) for n in range(1, 4))
        + "</div><footer>Forum rules apply.</footer></body></html>"
    )
    assert text(page) == "\n\n".join(
        ["Which telescope first?", *(f"Post {n}: {PROSE}" for n in range(1, 4))]
    )


def test_reader_comments_under_an_article_are_still_dropped() -> None:
    page = (
        f"<html><body>{NAV}<article><p>{PROSE}</p><p>{PROSE}</p><p>{PROSE}</p></article>"
        f'<section class="comments">{_post(1)}</section></body></html>'
    )
    assert text(page) == f"{PROSE}\n\n{PROSE}\n\n{PROSE}"


def test_declared_discussion_page_keeps_a_short_thread() -> None:
    # One reply under a long question: the markup alone would call the reply a comment.
    ld = json.dumps({"@context": "https://schema.org", "@type": "QAPage"})
    page = (
        f'<html><head><script type="application/ld+json">{ld}</script></head><body>{NAV}'
        f"<div class=question><p>{PROSE}</p><p>{PROSE}</p></div>"
        f'<div class="replies"><p>Answer: use a small refractor.</p></div></body></html>'
    )
    assert text(page) == f"{PROSE}\n\n{PROSE}\n\nAnswer: use a small refractor."


def test_product_facts_only_in_json_ld_are_added() -> None:
    ld = json.dumps(
        {
            "@context": "https://schema.org",
            "@type": "Product",
            "name": "Trail Shoe 2",
            "brand": {"@type": "Brand", "name": "Acme"},
            "description": "A light trail shoe with a grippy sole.",
            "offers": {"@type": "Offer", "price": "89.00", "priceCurrency": "EUR"},
        }
    )
    page = (
        f'<html><head><script type="application/ld+json">{ld}</script></head><body>{NAV}'
        f"<main><h2>Trail Shoe 2</h2><p>{PROSE}</p></main></body></html>"
    )
    # The visible name is not repeated; brand, price and description are added.
    assert text(page) == (
        f"Trail Shoe 2\n\n{PROSE}\n\nAcme\n\n89.00 EUR\n\nA light trail shoe with a grippy sole."
    )


def test_a_page_without_visible_text_gives_its_description() -> None:
    page = (
        '<html><head><meta name="description" content="How to pick a *first* telescope.">'
        '</head><body><div id="app"></div></body></html>'
    )
    assert text(page) == "How to pick a *first* telescope."
    assert text(page, "markdown") == "How to pick a \\*first\\* telescope."


def _card(n: int) -> str:
    return (
        f'<article class="card"><h3><a href="/items/{n}">Item number {n}</a></h3>'
        f"<p>A short blurb about item {n}, two lines at most.</p></article>"
    )


def test_listing_keeps_every_card_and_its_intro() -> None:
    # Teaser cards around an article are chrome; a grid of them that is the page is content.
    page = (
        f"<html><body>{NAV}<main><p>Everything we make, in one place.</p>"
        '<div class="grid">' + "".join(_card(n) for n in range(1, 13)) + "</div></main>"
        "<footer>Shop rules apply.</footer></body></html>"
    )
    expected = ["Everything we make, in one place."]
    for n in range(1, 13):
        expected += [f"Item number {n}", f"A short blurb about item {n}, two lines at most."]
    assert text(page) == "\n\n".join(expected)


def test_teaser_cards_beside_an_article_are_still_dropped() -> None:
    page = (
        f"<html><body>{NAV}<article><p>{PROSE}</p><p>{PROSE}</p><p>{PROSE}</p></article>"
        '<div class="grid">' + "".join(_card(n) for n in range(1, 4)) + "</div></body></html>"
    )
    assert text(page) == f"{PROSE}\n\n{PROSE}\n\n{PROSE}"


def test_landing_page_sections_are_gathered() -> None:
    sections = [
        ("Ship faster", "Our tool builds, tests and ships your code while you sleep, every night."),
        ("Features", "Parallel builds, cached steps and clear logs make every run short and calm."),
        ("Pricing", "One flat price per team, no seats to count and no surprise bills later on."),
        ("Questions", "Can I cancel at any time? Yes: stop paying and your data stays yours."),
    ]
    body = "".join(
        f'<section><h2>{h}</h2><p>{p}</p><a href="/signup">Start free</a></section>'
        for h, p in sections
    )
    # A wall of links (integrations, logos) weighs the parent down below any one section.
    logos = "".join(f'<a href="/integrations/{n}">Integration {n}</a> ' for n in range(40))
    body += f"<section><div>{logos}</div></section>"
    page = f"<html><body>{NAV}<main>{body}</main><footer>Terms</footer></body></html>"
    expected = []
    for h, p in sections:
        expected += [h, p, "Start free"]
    assert text(page) == "\n\n".join(expected)
