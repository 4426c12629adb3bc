"""A batch runner over real parts (SQLite, fetcher, service, local upstreams) with fake time.

``FakeClock`` is both the clock and the sleep of the runner and the service: sleeping
advances it instantly and records how long was asked, so tests assert exact waits.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from apphelpers import fetcher_for, make_settings
from sift.assembly import assemble
from sift.batch.jobs import BatchJobs
from sift.batch.runner import Runner
from sift.config import BatchSettings, Settings
from sift.dcache import DB, AsyncDB
from sift.principal import Principal
from sift.service import Service
from sift.workers import RenderPool
from upstream import Handler, Upstream

INDEXER = Principal("indexer", "fleet")
CRAWLER = Principal("crawler", "fleet")
T0 = 1_000_000


@dataclass
class FakeClock:
    now: float = float(T0)
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@dataclass
class Rig:
    settings: Settings
    adb: AsyncDB
    service: Service
    runner: Runner
    jobs: BatchJobs
    clock: FakeClock

    async def submit(
        self, principal: Principal, key: str, targets: list[Any], **options: Any
    ) -> str:
        body: dict[str, Any] = {"targets": targets}
        if options:
            body["options"] = options
        view, created = await self.jobs.submit(principal, key, body, int(self.clock()))
        assert created
        return str(view["id"])

    async def status(self, principal: Principal, job_id: str) -> dict[str, Any]:
        return await self.jobs.status(principal, job_id, int(self.clock()))


@asynccontextmanager
async def batch_rig(
    tmp_path: Path, *, settings: Settings | None = None, **batch: Any
) -> AsyncIterator[Rig]:
    """``settings``: instead of ``make_settings(tmp_path)`` (its batch part is replaced)."""
    settings = settings or make_settings(tmp_path)
    settings = dataclasses.replace(settings, batch=BatchSettings(**batch))
    clock = FakeClock()
    async with assemble(
        settings,
        db=DB.open(tmp_path / "sift.db"),
        fetcher=fetcher_for(settings),
        render_pool=RenderPool(1),
        with_browser=False,
        principals={},
        clock=clock,
        sleep=clock.sleep,
    ) as parts:
        assert parts.runner is not None and parts.jobs is not None
        yield Rig(settings, parts.adb, parts.service, parts.runner, parts.jobs, clock)


def logging_route(up: Upstream, path: str, log: list[str], tag: str, text: str = "ok") -> None:
    """``path`` answers ``text`` and appends ``tag + path`` to ``log`` on every request."""

    async def handler(request: web.Request) -> web.StreamResponse:
        log.append(tag + path)
        return web.Response(text=text, content_type="text/plain")

    up.route(path, handler)


def scripted(
    answers: list[tuple[int, dict[str, str], str]], log: list[str] | None = None, tag: str = ""
) -> Handler:
    """Answers ``(status, headers, text)`` in order, then the last one again and again."""
    remaining = list(answers)

    async def handler(request: web.Request) -> web.StreamResponse:
        if log is not None:
            log.append(tag + request.path)
        status, headers, text = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        return web.Response(status=status, headers=headers, text=text, content_type="text/plain")

    return handler
