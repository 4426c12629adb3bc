"""Bounds of the browser: what one page may spend, and how many pages may be open at once.

Every bound has a guard in code: the page deadline (``loader.py``, one ``asyncio.timeout``
around queueing, navigation, waiting and extraction), the proxy budgets (``proxy.py``), the
DOM size cap (checked in the page before the HTML leaves it), the JavaScript heap (a
Chromium flag: a page over it crashes its own tab) and the open-page slots here.
"""

from __future__ import annotations

import asyncio
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
    """Pages open at once: at most ``total`` overall and ``per_caller`` for each caller.

    A request waits for a slot (its deadline bounds the wait). The caller's slot is taken
    first, so one caller queueing many pages never holds overall slots it cannot use.
    """

    def __init__(self, total: int) -> None:
        self._total = asyncio.Semaphore(total)
        self._callers: dict[tuple[str, int], tuple[asyncio.Semaphore, int]] = {}
        self.open = 0

    @asynccontextmanager
    async def take(self, caller: str, per_caller: int) -> AsyncIterator[None]:
        key = (caller, per_caller)
        sem, users = self._callers.get(key, (asyncio.Semaphore(per_caller), 0))
        self._callers[key] = (sem, users + 1)
        try:
            async with sem, self._total:
                self.open += 1
                try:
                    yield
                finally:
                    self.open -= 1
        finally:
            sem, users = self._callers[key]
            if users <= 1:
                del self._callers[key]
            else:
                self._callers[key] = (sem, users - 1)
