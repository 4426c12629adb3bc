"""The PostgreSQL store's connection pool and its one way into a transaction.

``PgConn.tx()`` is the only place psycopg's exceptions are caught: a connection problem
becomes ``StoreUnavailable`` (503 ``store_unavailable``), any other database error
``StoreError``. The store and the claims (``claims.PgWork``) both take a ``PgConn``, so
neither needs the other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncCursor
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from sift.config import StoreSettings
from sift.errors import SiftError, StoreError, StoreUnavailable

Cursor = AsyncCursor[tuple[Any, ...]]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class PgConn:
    """A pool of connections to the store's database; ``tx()`` runs one transaction."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool
        self._closed = False

    @classmethod
    async def open(cls, settings: StoreSettings) -> PgConn:
        """Open the pool (connections are made in the background)."""
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            settings.url,
            min_size=1,
            max_size=settings.pool_size,
            timeout=settings.connect_timeout_s,
            kwargs={"autocommit": True, "prepare_threshold": None},
            open=False,
            name="sift-batch",
        )
        await pool.open(wait=False)
        return cls(pool)

    @asynccontextmanager
    async def tx(self) -> AsyncIterator[Cursor]:
        """One transaction; psycopg's exceptions become sift's here and nowhere else."""
        if self._closed:
            raise StoreError("the batch store is closed")
        try:
            async with self._pool.connection() as conn, conn.transaction():
                yield conn.cursor()
        except SiftError:
            raise
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreUnavailable(
                f"the batch store (PostgreSQL) is unreachable: {first_line(exc)}"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"batch store error: {first_line(exc)}") from exc

    async def close(self) -> None:
        """Close the pool. Idempotent; ``tx()`` raises StoreError afterwards."""
        if self._closed:
            return
        self._closed = True
        await self._pool.close()
