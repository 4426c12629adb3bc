"""The FastAPI application: wiring in one place.

``create_app(settings, db)`` builds the app; its lifespan starts the database worker
thread and closes it at shutdown. Nothing here runs at import time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import Response

from sift import __version__
from sift.api.errors import install_error_handlers
from sift.config import Settings
from sift.dcache import DB, AsyncDB
from sift.jsonio import dumps


def create_app(settings: Settings, db: DB) -> FastAPI:
    """Build the ASGI app over an opened ``db``; the app owns and closes it at shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        adb = AsyncDB(db)
        app.state.adb = adb
        try:
            yield
        finally:
            await adb.close()

    app = FastAPI(
        title="sift",
        version=__version__,
        lifespan=lifespan,
        description="Clean, capped, cacheable web content for programs.",
    )
    app.state.settings = settings
    install_error_handlers(app)

    @app.get("/healthz", tags=["ops"], summary="Liveness and database check")
    async def healthz() -> Response:
        adb: AsyncDB = app.state.adb
        await adb.run(DB.check)
        return Response(dumps({"ok": True, "version": __version__}), media_type="application/json")

    return app
