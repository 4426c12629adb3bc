"""What the webhook tests share: a receiver (aiohttp on loopback) that records every POST
and answers from a script, the test settings, and the running app's deliverer."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from fastapi import FastAPI

from apphelpers import make_settings
from sift.config import Settings, WatchSettings, WebhooksSettings
from sift.webhooks.deliverer import Deliverer
from upstream import Upstream

# Fast test settings: turns every 50 ms, retries after 50-100 ms, three attempts.
FAST = WebhooksSettings(
    poll_s=0.05, backoff_s=0.05, max_backoff_s=0.1, timeout_s=5.0, lease_s=10.0, max_attempts=3
)


@dataclass
class Received:
    headers: dict[str, str]  # names lowercased
    body: bytes
    at: float


@dataclass
class Receiver:
    """Routes on an ``Upstream``: each records what it got and answers the next status of
    its script (then 200); ``hang`` never answers (until the server stops)."""

    up: Upstream
    got: dict[str, list[Received]] = field(default_factory=dict)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def hook(
        self,
        path: str,
        statuses: tuple[int, ...] = (),
        *,
        hang: bool = False,
        headers: dict[str, str] | None = None,
    ) -> str:
        script = list(statuses)
        self.got[path] = []

        async def handler(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            got = Received({k.lower(): v for k, v in request.headers.items()}, body, time.time())
            async with self._changed:
                self.got[path].append(got)
                self._changed.notify_all()
            if hang:
                await asyncio.Event().wait()
            status = script.pop(0) if script else 200
            return web.Response(status=status, text="ok\n", headers=headers)

        self.up.route(path, handler)
        return self.up.url(path)

    async def wait(self, path: str, n: int, timeout_s: float = 30.0) -> list[Received]:
        """The first ``n`` requests ``path`` got (waits for them)."""
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: len(self.got[path]) >= n)
        return self.got[path][:n]


def settings_for(tmp_path: Path, webhooks: WebhooksSettings = FAST, **changes: Any) -> Settings:
    """Fast webhook settings; watches are stored but never checked (no events of their own:
    the tests enqueue every event they count)."""
    changes.setdefault("watch", WatchSettings(enabled=False))
    return make_settings(tmp_path, webhooks=webhooks, **changes)


def deliverer_of(apps: list[FastAPI]) -> Deliverer:
    (app,) = apps
    deliverer = app.state.deliverer
    assert isinstance(deliverer, Deliverer)
    return deliverer


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 30.0) -> None:
    """Poll ``check`` (a store read: no event to await) every 20 ms until it holds."""
    async with asyncio.timeout(timeout_s):
        while not await check():
            await asyncio.sleep(0.02)


def replace_webhooks(settings: Settings, **changes: Any) -> Settings:
    return dataclasses.replace(settings, webhooks=dataclasses.replace(settings.webhooks, **changes))
