"""Run the real app over real HTTP (uvicorn on 127.0.0.1, random port) for API tests.

Test settings: a fleet caller allowed to reach private addresses, a second fleet caller, a
restricted caller, and the lab egress settings — ``127.0.1.0/24`` counts as public and the
name ``pub.test`` resolves to ``127.0.1.1`` — so restricted callers can be tested against a
local upstream without weakening the guard. The fetcher's resolver knows no other name:
nothing a test does can reach real DNS.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import types
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from sift.assembly import build_fetcher
from sift.config import (
    Caller,
    ClassesSettings,
    ClassSettings,
    EgressSettings,
    Settings,
)
from sift.dcache import DB
from sift.fetch import Fetcher, StaticResolver
from sift.server.app import create_app

FLEET_KEY = "test-fleet-key"
FLEET2_KEY = "test-fleet2-key"
RESTRICTED_KEY = "test-restricted-key"
PUBLIC_HOST = "127.0.1.1"  # inside extra_public_cidrs: "public" for the guard
PUBLIC_NAME = "pub.test"


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def make_settings(tmp_path: Path, *, upstream_port: int = 0, **changes: Any) -> Settings:
    fleet = dataclasses.replace(ClassesSettings().fleet, allow_private=True)
    restricted = ClassSettings(extra_ports=(upstream_port,) if upstream_port else ())
    base = Settings(
        data_dir=str(tmp_path),
        access_log=False,
        callers=(
            Caller("indexer", "fleet", _sha(FLEET_KEY)),
            Caller("crawler", "fleet", _sha(FLEET2_KEY)),
            Caller("agent", "restricted", _sha(RESTRICTED_KEY)),
        ),
        classes=ClassesSettings(fleet=fleet, restricted=restricted),
        egress=EgressSettings(
            extra_public_cidrs=("127.0.1.0/24",),
            resolve=types.MappingProxyType({PUBLIC_NAME: (PUBLIC_HOST,)}),
        ),
    )
    return dataclasses.replace(base, **changes)


def fetcher_for(settings: Settings) -> Fetcher:
    """The app's fetcher as ``sift serve`` builds it, with a resolver that knows no name."""
    return build_fetcher(settings, resolver=StaticResolver({}))


@asynccontextmanager
async def running_app(
    settings: Settings,
    *,
    customize: Callable[[FastAPI], None] | None = None,
    fetcher: Fetcher | None = None,
) -> AsyncIterator[str]:
    """Serve the real app on 127.0.0.1:<random>; yields its base URL.

    ``customize`` may add test-only routes before the server starts (or keep the app);
    ``fetcher`` replaces ``fetcher_for(settings)`` (a test with a resolver of its own).
    """
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    db = DB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    app = create_app(settings, db, fetcher or fetcher_for(settings))
    if customize is not None:
        customize(app)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, lifespan="on", log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # startup failed: raise its error
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
