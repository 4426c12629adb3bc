"""Watches over real parts (SQLite or PostgreSQL, fetcher, service, loopback upstreams) with
fake time: ``watch_rig`` assembles a node and its ``Watches`` with a scheduler that is not
started; tests move ``clock.now`` and call ``scheduler.run_due()``."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apphelpers import fetcher_for, make_settings
from batchrig import FakeClock
from sift.assembly import assemble
from sift.assembly.watching import make_watches
from sift.config import ClassesSettings, Settings, StoreSettings, WatchSettings
from sift.principal import Principal
from sift.watch.scheduler import Scheduler
from sift.watch.watches import Watches
from sift.workers import RenderPool

INDEXER = Principal("indexer", "fleet")
CRAWLER = Principal("crawler", "fleet")
AGENT = Principal("agent", "restricted")


def watch_settings(
    tmp_path: Path,
    *,
    min_interval_s: float = 1.0,
    max_watches: int = 1000,
    store_url: str = "",
    upstream_port: int = 0,
    **watch: Any,
) -> Settings:
    """Test settings: a short minimum interval for both classes, no jitter unless asked."""
    base = make_settings(tmp_path, upstream_port=upstream_port)
    classes = ClassesSettings(
        fleet=dataclasses.replace(
            base.classes.fleet, min_interval_s=min_interval_s, max_watches=max_watches
        ),
        restricted=dataclasses.replace(
            base.classes.restricted, min_interval_s=min_interval_s, max_watches=max_watches
        ),
    )
    return dataclasses.replace(
        base,
        classes=classes,
        watch=WatchSettings(**{"jitter_s": 0.0, **watch}),
        store=StoreSettings(url=store_url),
    )


@dataclass
class WatchRig:
    settings: Settings
    watches: Watches
    scheduler: Scheduler
    clock: FakeClock

    async def create(self, principal: Principal, body: dict[str, Any]) -> dict[str, Any]:
        return await self.watches.create(principal, body, self.clock())


@asynccontextmanager
async def watch_rig(
    settings: Settings, clock: FakeClock | None = None, *, data_dir: Path | None = None
) -> AsyncIterator[WatchRig]:
    clock = clock or FakeClock()
    if data_dir is not None:
        settings = dataclasses.replace(settings, data_dir=str(data_dir))
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    async with assemble(
        settings,
        fetcher=fetcher_for(settings),
        render_pool=RenderPool(1),
        with_browser=False,
        store=True,
        clock=clock,
        sleep=clock.sleep,
    ) as parts:
        assert parts.store is not None
        watches = make_watches(
            settings,
            parts.store,
            parts.service,
            clock=clock,
            sleep=clock.sleep,
            rng=random.Random(7),
            scheduler=True,
        )
        assert watches.scheduler is not None
        try:
            yield WatchRig(settings, watches, watches.scheduler, clock)
        finally:
            await watches.scheduler.stop(5.0)
