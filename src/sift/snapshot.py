"""Rendered snapshots: a page rendered at one body digest, and how a body becomes one.

A ``Snapshot`` is what the render cache stores and what every slice of a page is cut from;
it is immutable for its (digest, render options, page) key, which is what lets the
in-process caches keep it without invalidation.
"""

from __future__ import annotations

from dataclasses import dataclass

from sift.jsonio import dumps, loads
from sift.render import Rendered, RenderOptions, render


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

    def to_payload(self) -> bytes:
        meta = {
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "content_type": self.content_type,
            "fetched_at": self.fetched_at,
            "digest": self.digest,
        }
        return dumps(meta) + b"\n" + self.rendered.to_json()

    @classmethod
    def from_payload(cls, payload: bytes) -> Snapshot:
        head, _, body = payload.partition(b"\n")
        meta = loads(head)
        rendered = Rendered.from_json(body)
        return cls(rendered=rendered, content_bytes=rendered.content.encode(), **meta)


# Bodies this small, or of these pass-through types, render in well under a millisecond.
INLINE_RENDER_MAX_BYTES = 4 << 10
INLINE_RENDER_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
INLINE_RENDER_TYPE_MAX_BYTES = 256 << 10


def cheap_to_render(content_type: str, nbytes: int) -> bool:
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type in INLINE_RENDER_TYPES:
        return nbytes <= INLINE_RENDER_TYPE_MAX_BYTES
    return nbytes <= INLINE_RENDER_MAX_BYTES


def render_call(
    body: bytes, content_type: str, url: str, options: RenderOptions, charset: str | None
) -> Rendered:
    """Module-level so a process pool can pickle it."""
    return render(body, content_type=content_type, url=url, options=options, charset=charset)
