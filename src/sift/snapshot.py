"""Rendered snapshots: a page rendered at one body digest, and how a body becomes one.

A ``Snapshot`` is what the render cache stores and what every slice of a page is cut from;
it is immutable for its (digest, render options, page) key, which is what lets the
in-process caches keep it without invalidation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sift.jsonio import dumps, loads
from sift.render import Rendered, RenderOptions, render
from sift.render.decode import text_codec


@dataclass(frozen=True)
class Snapshot:
    """A page rendered at one body digest: what the render cache stores and slices serve."""

    url: str
    final_url: str
    status: int
    content_type: str
    fetched_at: int
    digest: str
    rendered: Rendered
    content_bytes: bytes  # rendered.content as UTF-8, encoded once
    # Seconds after fetched_at the upstream asked to wait (429/503 with Retry-After only).
    # Taken from the page entry, never stored in the render cache.
    retry_after: int | None = None
    # The page actions' outcomes, for a browser load with actions (from the page entry).
    actions: list[dict[str, Any]] | None = None
    # The screenshot of the load this snapshot was read from (format "screenshot"): digest,
    # type, bytes, width, height, page_height. From the page entry, like retry_after.
    screenshot: Mapping[str, Any] | None = None

    def to_payload(self) -> bytes:
        meta = {
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "content_type": self.content_type,
            "fetched_at": self.fetched_at,
            "digest": self.digest,
        }
        if self.actions is not None:
            meta["actions"] = self.actions
        return dumps(meta) + b"\n" + self.rendered.to_json()

    @classmethod
    def from_payload(cls, payload: bytes) -> Snapshot:
        head, _, body = payload.partition(b"\n")
        meta = loads(head)
        rendered = Rendered.from_json(body)
        return cls(rendered=rendered, content_bytes=rendered.content.encode(), **meta)


# Plain text this small, in a known charset, is decoded and wrapped in place: linear C work
# of microseconds, cheaper than a trip to the render pool. Everything else (HTML, PDF, XML,
# JSON, selectors, charset detection) is caller- or upstream-shaped work and runs in the
# pool, under its time and memory limits, never on the event loop.
INLINE_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
INLINE_TEXT_MAX_BYTES = 64 << 10
# The render time limit when the options carry none (library use; the service always sets one).
DEFAULT_RENDER_TIMEOUT_S = 30.0


def renders_inline(content_type: str, body: bytes, charset: str | None) -> bool:
    """True for small plain text whose charset needs no detection."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in INLINE_TEXT_TYPES or len(body) > INLINE_TEXT_MAX_BYTES:
        return False
    if charset and text_codec(charset):
        return True
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False  # needs charset detection: not trivial
    return True


def render_call(
    body: bytes, content_type: str, url: str, options: RenderOptions, charset: str | None
) -> Rendered:
    """Module-level so the render pool can pickle it."""
    return render(body, content_type=content_type, url=url, options=options, charset=charset)
