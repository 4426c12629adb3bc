"""The console's routes: its page and assets, two small helpers, and offline ``/docs``.

- ``GET /`` — the console (one HTML page; ``console/static/``), ``GET /console/{asset}``;
- ``GET /console/whoami`` — who the request's key is (name, class, anonymous), so the page
  can say so; the key is checked exactly as the API checks it;
- ``POST /console/render`` — ``{"markdown", "base_url"?}`` → ``{"html"}``, sanitised
  (``console/markdown.py``), for showing fetched markdown as HTML; rendered in the render
  pool under a time limit (``504 render_timeout`` past it), counted against the caller's
  ``max_inflight`` and queued in its turn like a fetch's render;
- ``GET /docs`` — Swagger UI from the ``fastapi-offline`` package's copy
  (``/docs/assets/…``), never a CDN. (ReDoc is not served: its bundle reaches for a logo
  on its vendor's CDN, and one offline API browser is enough.)

Everything else the console shows comes from the public API (``/v1/fetch``,
``/v1/batch…``, ``/v1/crawl``, ``/v1/map``, ``/v1/stats``, ``/healthz``), called by the page
with the caller's key. Assets are read from the package once, when the app is built, and
served from memory.
"""

from __future__ import annotations

import asyncio
import mimetypes
from importlib import resources
from pathlib import PurePosixPath
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.responses import Response

from sift.api.auth import authenticate
from sift.api.disconnect import cancel_on_disconnect
from sift.api.fetch_routes import read_json
from sift.console.markdown import render_markdown
from sift.console.security import console_headers, docs_headers
from sift.errors import BadRequest, NotFound
from sift.jsonio import dumps
from sift.principal import ANONYMOUS

# The render helper's request body: the largest slice any class may be handed (1 MiB by
# default) with room for JSON escaping. Markdown parsing is superlinear on hostile input (a
# megabyte of "[" takes markdown-it-py tens of seconds), so the render also runs in the
# render pool's killable workers, at most RENDER_TIMEOUT_S (or the class's render time
# limit, if lower).
RENDER_MAX_BYTES: Final = 4 << 20
RENDER_TIMEOUT_S: Final = 5.0
# The files of fastapi-offline's ``static`` folder that /docs uses.
DOCS_ASSETS: Final = ("swagger-ui-bundle.js", "swagger-ui.css")

_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def _content_type(name: str) -> str:
    suffix = PurePosixPath(name).suffix
    return _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def _load(package: str, folder: str, names: tuple[str, ...] | None = None) -> dict[str, bytes]:
    root = resources.files(package).joinpath(folder)
    if names is None:
        names = tuple(p.name for p in root.iterdir() if p.is_file())
    return {name: root.joinpath(name).read_bytes() for name in names}


def _asset(files: dict[str, bytes], name: str, headers: dict[str, str]) -> Response:
    data = files.get(name)
    if data is None:
        raise NotFound(f"no console asset {name!r}", hint="Open the console at /.")
    return Response(data, media_type=_content_type(name), headers=headers)


def _json(body: Any) -> Response:
    return Response(dumps(body), media_type="application/json", headers=console_headers())


def install_console(app: FastAPI) -> None:
    """Add the console's routes to ``app`` (built with ``docs_url=None, redoc_url=None``)."""
    static = _load("sift.console", "static")
    vendored = _load("fastapi_offline", "static", DOCS_ASSETS)
    page_headers = console_headers()
    doc_headers = docs_headers()

    async def index() -> Response:
        return _asset(static, "index.html", page_headers)

    async def asset(name: str) -> Response:
        if name.endswith(".html"):  # pages are served at their own paths, not here
            raise NotFound(f"no console asset {name!r}", hint="Open the console at /.")
        return _asset(static, name, page_headers)

    async def whoami(request: Request) -> Response:
        keys = request.app.state.keys
        principal = authenticate(keys, request.headers.get("authorization"))
        return _json(
            {
                "caller": principal.name,
                "class": principal.caller_class,
                "anonymous": principal == ANONYMOUS,
                "anonymous_mode": keys.anonymous,
            }
        )

    async def render(request: Request) -> Response:
        principal = authenticate(request.app.state.keys, request.headers.get("authorization"))
        body = await read_json(request, RENDER_MAX_BYTES)
        text = body.get("markdown") if isinstance(body, dict) else None
        base = body.get("base_url") if isinstance(body, dict) else None
        if not isinstance(text, str) or not (base is None or isinstance(base, str)):
            raise BadRequest(
                'send {"markdown": string, "base_url"?: string}',
                hint="The console sends the content of a fetch envelope here.",
            )
        limits = request.app.state.settings.classes.get(principal.caller_class)
        timeout_s = min(RENDER_TIMEOUT_S, limits.render_timeout_s)
        service = request.app.state.service
        # Like a fetch: counted against the caller's max_inflight, in the caller's turn at
        # the render workers, dropped if still queued past the class's timeout_s, and
        # stopped when the client hangs up.
        deadline = asyncio.get_running_loop().time() + limits.timeout_s
        with service.inflight.hold(principal):
            async with cancel_on_disconnect(request.receive):
                html = await service.render_pool.run(
                    render_markdown,
                    text,
                    base,
                    timeout_s=timeout_s,
                    caller=principal.name,
                    deadline=deadline,
                )
        return _json({"html": html})

    async def swagger() -> Response:
        return _asset(static, "docs.html", doc_headers)

    async def docs_asset(name: str) -> Response:
        return _asset(vendored, name, doc_headers)

    hidden: dict[str, Any] = {"include_in_schema": False}
    app.add_api_route("/", index, methods=["GET"], **hidden)
    app.add_api_route("/console/whoami", whoami, methods=["GET"], **hidden)
    app.add_api_route("/console/render", render, methods=["POST"], **hidden)
    app.add_api_route("/console/{name}", asset, methods=["GET"], **hidden)
    app.add_api_route("/docs", swagger, methods=["GET"], **hidden)
    app.add_api_route("/docs/assets/{name}", docs_asset, methods=["GET"], **hidden)
