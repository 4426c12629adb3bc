"""The response headers of every page and asset the console and ``/docs`` serve.

The console's own pages run no inline code at all, so their policy is the strictest a
working page can have: scripts, styles and requests only from this origin, no plugins, no
forms posting elsewhere, no framing, no ``<base>`` tricks. ``/docs`` runs the vendored
Swagger UI, which sets inline styles: its policy allows exactly that more; scripts stay
same-origin there too.
"""

from __future__ import annotations

from typing import Final

_COMMON: Final = {
    "X-Content-Type-Options": "nosniff",
    # The console's URLs carry no secret (the key travels only in a header), but a fetched
    # page's link opened from the console must not learn the console's address either.
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # frame-ancestors for browsers that predate it
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}

CONSOLE_CSP: Final = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)

DOCS_CSP: Final = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)


def console_headers() -> dict[str, str]:
    return {**_COMMON, "Content-Security-Policy": CONSOLE_CSP}


def docs_headers() -> dict[str, str]:
    return {**_COMMON, "Content-Security-Policy": DOCS_CSP}
