"""Bounds of the browser: what one page may spend, and how many pages may be open at once.

Every bound has a guard in code: the page deadline (``loader.py``, one ``asyncio.timeout``
around queueing, navigation, waiting and extraction), the proxy budgets (``proxy.py``), the
DOM size cap (checked in the page before the HTML leaves it), the JavaScript heap (a
Chromium flag: a page over it crashes its own tab) and the open-page slots here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sift.config import BrowserSettings


@dataclass(frozen=True)
class PageLimits:
    """What one page may spend (from ``[browser]``; the deadline comes per request)."""

    max_subresources: int
    max_page_bytes: int
    max_dom_bytes: int
    network_quiet_s: float
    block_media: bool

    @classmethod
    def from_settings(cls, s: BrowserSettings) -> PageLimits:
        return cls(
            max_subresources=s.max_subresources,
            max_page_bytes=s.max_page_bytes,
            max_dom_bytes=s.max_dom_bytes,
            network_quiet_s=s.network_quiet_s,
            block_media=s.block_media,
        )


class PageSlots:
    """Pages open at once: at most ``total`` overall, ``per_class`` for each caller class
    and ``per_caller`` for each caller.

    A request waits for a slot (its deadline bounds the wait). The narrowest slot is taken
    first, so one caller queueing many pages never holds class or overall slots it cannot
    use yet.
    """

    def __init__(self, total: int) -> None:
        self._total = asyncio.Semaphore(total)
        self._groups: dict[tuple[str, int], tuple[asyncio.Semaphore, int]] = {}
        self.open = 0

    @asynccontextmanager
    async def take(
        self, caller: str, per_caller: int, caller_class: str = "", per_class: int = 0
    ) -> AsyncIterator[None]:
        """Hold one page slot; ``per_class=0`` means no class bound beyond ``total``."""
        keys = [("caller:" + caller, per_caller)]
        if per_class:
            keys.append(("class:" + caller_class, per_class))
        sems = [self._join(key) for key in keys]
        try:
            async with contextlib.AsyncExitStack() as stack:
                for sem in [*sems, self._total]:
                    await stack.enter_async_context(sem)
                self.open += 1
                try:
                    yield
                finally:
                    self.open -= 1
        finally:
            for key in keys:
                self._leave(key)

    def _join(self, key: tuple[str, int]) -> asyncio.Semaphore:
        sem, users = self._groups.get(key, (asyncio.Semaphore(key[1]), 0))
        self._groups[key] = (sem, users + 1)
        return sem

    def _leave(self, key: tuple[str, int]) -> None:
        sem, users = self._groups[key]
        if users <= 1:
            del self._groups[key]
        else:
            self._groups[key] = (sem, users - 1)
