"""Stage 5, cap: the caller's slice of a snapshot, in the result envelope (DESIGN.md).

The content is cut to the caller's cap at a clean boundary (``sift.render.cap``: never inside
a UTF-8 sequence, preferably at a paragraph) from the requested offset, and the envelope says
where to continue. Title and links are held to the cap too (``render/extras.py``); the
snapshot keeps them whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sift.options import Effective, Engine, FetchOptions
from sift.render import cap
from sift.render.extras import cap_links, cap_title
from sift.service.cache import CacheState
from sift.snapshot import Snapshot


def envelope(
    snap: Snapshot,
    opts: FetchOptions,
    eff: Effective,
    state: CacheState,
    max_links: int,
    engine: Engine,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The result envelope; ``extra`` warnings come from the pipeline (``browser_failed``)."""
    piece = cap(snap.rendered.content, opts.offset, eff.max_bytes)
    title, title_cut = cap_title(snap.rendered.title, eff.max_bytes)
    extra_warnings = ["title_truncated"] if title_cut else []
    env: dict[str, Any] = {
        "url": opts.url,
        "final_url": snap.final_url,
        "status": snap.status,
        "content_type": snap.content_type,
        "title": title,
        "lang": snap.rendered.lang,
        "format": opts.format,
        "content": piece.content,
        "offset": piece.offset,
        "bytes": piece.bytes,
        "total_bytes": piece.total_bytes,
        "truncated": piece.truncated,
        "next_offset": piece.next_offset,
        "fetched_at": snap.fetched_at,
        "cache": state,
        "digest": snap.digest,
        "engine": engine,
        "page_type": snap.rendered.page_type,
        "metadata": snap.rendered.metadata,
    }
    if opts.links:
        env["links"], links_cut = cap_links(snap.rendered.links, max_links, eff.max_bytes)
        if links_cut:
            extra_warnings.append("links_truncated")
    if opts.screenshot is not None and snap.screenshot is not None:
        env["screenshot"] = shot_view(snap.screenshot)
        if snap.screenshot["height"] < snap.screenshot["page_height"]:
            extra_warnings.append("screenshot_cut")
    if snap.retry_after is not None:
        env["retry_after"] = snap.retry_after
    if opts.actions and snap.actions is not None:
        env["actions"] = snap.actions
    warnings = snap.rendered.warnings
    if engine == "browser":  # the browser ran the scripts: the shell warning is moot
        warnings = [w for w in warnings if w != "js_required_suspected"]
    env["warnings"] = [*eff.warnings, *warnings, *extra, *extra_warnings]
    return env


def shot_view(shot: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope's ``screenshot``: the image's digest, type, size in bytes and pixels,
    and the path that returns it (``GET``, the same key: api/screenshot_routes.py)."""
    return {
        "digest": shot["digest"],
        "type": shot["type"],
        "bytes": shot["bytes"],
        "width": shot["width"],
        "height": shot["height"],
        "url": f"/v1/screenshots/{shot['digest']}",
    }
