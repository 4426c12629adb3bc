"""The JavaScript-shell detector (``render/jsshell.py``), rule by rule, through ``prepare``
exactly as a render runs it. Each reason has a page that fires it; each near miss (text in
the HTML, whatever the scripts) has a page that must not. The real framework builds are in
``tests/test_js_auto.py``; the false-positive rate on 1,657 real pages in bench/auto_fp.py.
"""

from __future__ import annotations

import pytest

from sift.render import RenderOptions, jsshell, render
from sift.render.html import prepare

PROSE = " ".join(["The council met on Tuesday and agreed the new budget for the harbour."] * 6)
BUNDLE = '<script type="module" src="/assets/index-3f9a.js"></script>'


def verdict(html: str) -> str | None:
    page = prepare(html.encode(), url="http://example.test/")
    assert page is not None
    return page.js_shell


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        # A mount point of any name, a module bundle, no text.
        (
            f"<html><head>{BUNDLE}</head><body><div id='mount-here'></div></body></html>",
            "empty_mount",
        ),
        (f"<body><my-app></my-app>{BUNDLE}</body>", "empty_mount"),
        ("<body><div id='x'></div><script src='/app.js'></script></body>", "empty_mount"),
        # An empty mount with a little footer text still needs the bundle.
        (
            "<body><section id='app'></section><footer>© 2026 Example Ltd. Terms. Privacy. "
            f"Contact.</footer>{BUNDLE}</body>",
            "empty_mount",
        ),
        # The only text is a plea in <noscript>.
        (
            "<body><div>Loading…</div><noscript>You need to enable JavaScript to run this app."
            "</noscript><script src='/main.js'></script></body>",
            "noscript_only",
        ),
        # State for a client-side render and no rendered text.
        (
            "<body><main></main><script id='state' type='application/json'>{\"a\": 1}</script>"
            "<script src='/r.js'></script></body>",
            "hydration_data",
        ),
        (
            "<body><p> </p><script>window.__INITIAL__ = {a: 1}; boot();</script></body>",
            "hydration_data",
        ),
        # Markup written by an inline script.
        ("<body><script>document.write('<h1>Hi</h1>')</script></body>", "script_written"),
        (
            "<body><p></p><script>document.body.innerHTML = '<p>x</p>'</script></body>",
            "script_written",
        ),
        # Inline code dwarfing the little text there is.
        (
            "<body><p>Please wait while we load</p><script>" + "f();" * 600 + "</script></body>",
            "script_heavy",
        ),
        # Scripts and no text at all.
        ("<body><script src='/a.js'></script></body>", "scripts_only"),
    ],
)
def test_each_reason(html: str, reason: str) -> None:
    assert reason in jsshell.REASONS
    assert verdict(html) == reason


@pytest.mark.parametrize(
    "html",
    [
        # Text in the HTML: no rule fires, whatever the scripts and empty elements.
        f"<body><div id='fb-root'></div><article><p>{PROSE}</p></article>{BUNDLE}"
        "<script>document.write('ad')</script><script>window.__STATE__={}</script></body>",
        # A hidden wrapper holding the page, revealed by script: cleaning keeps it.
        f"<body><div style='display:none' id='page'><p>{PROSE}</p></div>{BUNDLE}</body>",
        # The page's text lives in <noscript> (forum software): the HTTP render has it.
        f"<body><div id='app'></div><noscript><p>{PROSE}</p></noscript>{BUNDLE}</body>",
        # No script that would run: an empty page is just empty.
        "<body><div id='root'></div></body>",
        "<body><div id='root'></div><script type='application/ld+json'>{}</script></body>",
        # A short page with a bit of inline code: no mount, no writes, some text.
        "<body><p>Moved to the new address, see the link below.</p><script>ga('x')</script></body>",
    ],
)
def test_pages_whose_text_is_in_the_html(html: str) -> None:
    assert verdict(html) is None


@pytest.mark.parametrize(
    "drawn",
    [
        # An icon's shape with an id, drawn by the browser, not filled by a script.
        "<svg viewBox='0 0 8 8'><defs><path id='logo-shape' d='M0 0h8v8z'/></defs>"
        "<use href='#logo-shape'/></svg>",
        # A template's placeholder: cloned by a script, never shown where it stands.
        "<template><div id='row-slot'></div></template>",
        "<canvas id='chart'></canvas>",
    ],
)
def test_what_cleaning_drops_holds_no_mount_point(drawn: str) -> None:
    """A short page (a sign-in form's heading) with a bundle and no empty element of its
    own is not a shell: the empty elements inside an <svg>, <template> or <canvas> are not
    where an app mounts. The same page with a real mount point is one."""
    page = f"<body><h1>{drawn}Sign in to continue to your account.</h1>{BUNDLE}</body>"
    assert verdict(page) is None
    mounted = page.replace("</h1>", "</h1><div id='app'></div>")
    assert verdict(mounted) == "empty_mount"


def test_the_render_says_so_and_keeps_the_reason() -> None:
    html = f"<html><head>{BUNDLE}</head><body><div id='root'></div></body></html>"
    out = render(
        html.encode(), content_type="text/html", url="http://example.test/", options=RenderOptions()
    )
    assert (out.content, out.warnings, out.js_shell) == (
        "",
        ["js_required_suspected"],
        "empty_mount",
    )
    # The verdict is the page's, not the render's: a selector or `exclude` does not change it.
    narrowed = RenderOptions(selector="p", exclude=("div",))
    out = render(
        html.encode(), content_type="text/html", url="http://example.test/", options=narrowed
    )
    assert (out.js_shell, "js_required_suspected" in out.warnings) == ("empty_mount", True)
    # And it survives the render cache.
    assert type(out).from_json(out.to_json()) == out
