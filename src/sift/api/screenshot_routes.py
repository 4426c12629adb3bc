"""``GET /v1/screenshots/{digest}``: the image a fetch with ``format: "screenshot"`` returned.

Per caller, not public by digest: the image is served only to a caller a fetch result
carrying it was given to (a grant, written each time: ``dcache/shots.py``), under the same
bearer key as every route. A digest is a SHA-256 of the image, hard to guess, but it travels
— in logs, batch results, links pasted into chats — and a screenshot can show what only its
caller could see (a page fetched with the caller's own headers or cookies). Any other caller,
and any digest not stored, gets the same 404, so the route never says whether someone else
has the image. Fetching the same page again gives a caller its own grant (from the cache, if
it is still fresh there).
"""

from __future__ import annotations

import re
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.responses import Response

from sift.api.auth import authenticate
from sift.api.observe import OBSERVE_KEY
from sift.api.schema import ERROR_RESPONSES, keyed
from sift.browser.shot import MEDIA_TYPES
from sift.errors import NotFound
from sift.service import Service

_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}")
# An image never changes under its digest; it stays private to the callers granted it.
_CACHE_CONTROL: Final = "private, max-age=86400, immutable"


async def get_screenshot(request: Request, digest: str) -> Response:
    principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
    request.scope[OBSERVE_KEY] = {
        "route": "/v1/screenshots",
        "caller": principal.name,
        "class": principal.caller_class,
        "host": "-",
    }
    service: Service = request.app.state.service
    shot = None
    if _DIGEST_RE.fullmatch(digest):
        shot = await service.screenshot(principal, digest)
    if shot is None:
        raise NotFound(
            "no such screenshot for this caller",
            hint="A screenshot is returned to the caller whose fetch took it (or was given "
            "it from the cache), while the content cache keeps it; fetch the page again "
            'with format "screenshot".',
        )
    return Response(
        shot.data,
        media_type=MEDIA_TYPES[shot.type],
        headers={
            "Cache-Control": _CACHE_CONTROL,
            "ETag": f'"{digest}"',
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
        },
    )


def install_screenshot_routes(app: FastAPI) -> None:
    """Register ``GET /v1/screenshots/{digest}``."""
    image = {"schema": {"type": "string", "format": "binary"}}
    responses: dict[int | str, dict[str, Any]] = {
        200: {
            "description": "The image, as the fetch's screenshot.type says",
            "content": {media: image for media in MEDIA_TYPES.values()},
        },
        **ERROR_RESPONSES,
    }
    app.add_api_route(
        "/v1/screenshots/{digest}",
        get_screenshot,
        methods=["GET"],
        summary="A screenshot a fetch returned to this caller (format screenshot)",
        tags=["fetch"],
        response_model=None,
        response_class=Response,
        responses=responses,
        openapi_extra=keyed(),
    )
