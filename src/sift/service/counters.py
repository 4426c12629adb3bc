"""The persistent counters (``sift stats``): counted in memory, written every few seconds."""

from __future__ import annotations

import asyncio
import time

from sift.dcache import DB, AsyncDB

COUNTER_FLUSH_S = 5.0


class Counters:
    """Counts by name, added to the database's counters at most every ``COUNTER_FLUSH_S``."""

    def __init__(self, adb: AsyncDB) -> None:
        self.adb = adb
        self._pending: dict[str, int] = {}
        self._flushed_at = time.monotonic()
        self._flush_task: asyncio.Future[None] | None = None

    def count(self, name: str, n: int = 1) -> None:
        """Count into the persistent counters (``sift stats``), written every few seconds."""
        self._pending[name] = self._pending.get(name, 0) + n
        now = time.monotonic()
        if now - self._flushed_at >= COUNTER_FLUSH_S and self._flush_task is None:
            self._flushed_at = now
            self._flush_task = asyncio.ensure_future(self._flush())

    async def totals(self) -> dict[str, int]:
        """Every counter as written plus what is still pending: the figures as of now."""
        written = await self.adb.run(DB.counters)
        return {n: written.get(n, 0) + self._pending.get(n, 0) for n in {*written, *self._pending}}

    async def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        try:
            if pending:
                await self.adb.run(DB.add_counters, pending)
        finally:
            self._flush_task = None

    async def close(self) -> None:
        """Write the counters still pending. Call before closing the database."""
        if self._flush_task is not None:
            await self._flush_task
        await self._flush()
