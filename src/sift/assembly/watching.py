"""Build a node's watches: ``Watches`` (the operations) over the store and, unless
``[watch] enabled`` is false, the ``Scheduler`` that runs due checks here.

This sits above ``sift.watch`` (which stands on the service, the batch politeness and the
store), so every front end, fixture and benchmark gets its watches the same way."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping

from sift.config import Settings
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchStore
from sift.watch.scheduler import Scheduler
from sift.watch.watches import Watches


def make_watches(
    settings: Settings,
    store: BatchStore,
    service: Service,
    *,
    principals: Mapping[str, Principal] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
    scheduler: bool | None = None,
) -> Watches:
    """``Watches`` with its scheduler (built, not started) when ``scheduler`` — by default
    ``settings.watch.enabled`` — is true. ``principals``: who a caller's checks run as
    (else ``Principal(caller, caller_class)``)."""
    with_scheduler = settings.watch.enabled if scheduler is None else scheduler
    sched = (
        Scheduler(settings, store, service, principals=principals, clock=clock, sleep=sleep)
        if with_scheduler
        else None
    )
    return Watches(settings, store, service, sched, rng=rng)
