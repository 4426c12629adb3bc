"""``AsyncDB``: the database for asyncio code, without blocking the event loop.

Thread model. One ``DB`` has one ``sqlite3`` connection, and one thread uses it: the single
worker of the executor below. Every ``await adb.run(DB.method, *args)`` is queued to that
thread and runs to completion before the next, so each DB method is one atomic step whatever
the number of tasks awaiting: no second connection, no "database is locked", no lost update.

- In async code: always ``await adb.run(DB.some_method, ...)``.
- ``adb.db`` (the sync DB) is for start-up code before the event loop serves requests (e.g.
  ``mark_in_flight_failed`` in ``serve``) and for tests; never call it from a coroutine while
  ``run`` calls may be in flight.
- A cancelled ``await`` does not undo its call: the method still runs (or has run) to the end
  on the worker, so the database never sees half a method.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

from sift.dcache.codec import DEFAULT_LEVEL
from sift.dcache.db import DB
from sift.errors import StoreError

P = ParamSpec("P")
R = TypeVar("R")


class AsyncDB:
    """A DB driven from one dedicated worker thread."""

    def __init__(self, db: DB) -> None:
        """Take ownership of ``db``: from now on only the worker thread should use it."""
        self.db = db
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sift-dcache")
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = 1 << 30,
        compress_level: int = DEFAULT_LEVEL,
    ) -> AsyncDB:
        """``DB.open`` on a worker thread (opening migrates, which may take a moment)."""
        loop = asyncio.get_running_loop()
        opener = functools.partial(
            DB.open, path, max_bytes=max_bytes, compress_level=compress_level
        )
        self = cls.__new__(cls)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sift-dcache")
        self._closed = False
        try:
            self.db = await loop.run_in_executor(self._executor, opener)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        return self

    async def run(
        self, method: Callable[Concatenate[DB, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """``method(self.db, *args, **kwargs)`` on the worker thread; its result or exception.

        Raises StoreError once ``close()`` has begun.
        """
        if self._closed:
            raise StoreError(f"database {self.db.path} is closed")
        call = functools.partial(method, self.db, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def close(self) -> None:
        """Let queued calls finish, close the DB, stop the worker. Idempotent."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            # Queued behind every call already submitted, so those complete first.
            await loop.run_in_executor(self._executor, self.db.close)
        finally:
            self._executor.shutdown(wait=True)
