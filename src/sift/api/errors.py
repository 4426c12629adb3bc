"""The one error envelope: every failure on every route becomes ``{"error": {...}}``.

FastAPI's own ``{"detail": ...}`` shapes (validation errors, unknown routes, wrong methods)
are replaced here, and any exception that is not a ``SiftError`` is logged with its
traceback and answered as a bare ``internal_error``.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from sift.errors import BadRequest, NotFound, SiftError
from sift.jsonio import dumps

log = logging.getLogger("sift.api")

_STATUS_CODES = {
    400: ("invalid_request", "Fix the request as the message says and send it again."),
    404: ("not_found", "Check the path; the API lives under /v1 (see /docs)."),
    405: ("method_not_allowed", "Use a method this route supports (see /docs)."),
    413: ("request_too_large", "Send a smaller request body."),
}


def error_response(err: SiftError) -> Response:
    headers = dict(err.headers)
    return Response(
        dumps(err.to_dict()), status_code=err.status, headers=headers, media_type="application/json"
    )


def install_error_handlers(app: FastAPI) -> None:
    async def on_sift_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SiftError)
        if exc.status >= 500 and exc.code == "internal_error":
            log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(exc)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = []
        for e in exc.errors()[:10]:
            loc = ".".join(str(p) for p in e.get("loc", ()) if p not in ("body", "query"))
            problems.append(f"{loc or 'request'}: {e.get('msg', 'invalid')}")
        return error_response(BadRequest("invalid request: " + "; ".join(problems)))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code, hint = _STATUS_CODES.get(exc.status_code, ("invalid_request", "See /docs."))
        if exc.status_code == 404:
            err: SiftError = NotFound(f"no route {request.method} {request.url.path}", hint=hint)
        else:
            err = BadRequest(str(exc.detail), hint=hint)
        body = {"error": {"code": code, "message": err.message, "hint": hint}}
        return Response(
            dumps(body),
            status_code=exc.status_code,
            media_type="application/json",
            headers=dict(exc.headers or {}),
        )

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(SiftError("sift failed while handling this request"))

    app.add_exception_handler(SiftError, on_sift_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
