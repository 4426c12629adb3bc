"""``SqliteHost``: what the batch SQL needs from the SQLite database it is mixed into.

The batch tables live in the node's one SQLite file, beside the content cache, on one
connection: ``sift.dcache.DB`` is built from the content cache's mixin and the batch store's
(``BatchTables``). The connection, its transactions and its counters belong to
``sift.dcache.store.StoreBase``; this class only declares them, so the store room never
imports the content cache (the arrow points one way: ``dcache`` imports ``store``).
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING


class SqliteHost:
    """The connection holder's surface the batch mixins use (see ``StoreBase``)."""

    def _on_rollback(self, conn: sqlite3.Connection) -> None:
        """After a rollback (``StoreBase._on_rollback`` chains here): a mixin that keeps
        state beside its tables (the history's byte count) counts it again. Overrides call
        super()."""

    if TYPE_CHECKING:

        def _read(self) -> AbstractContextManager[sqlite3.Connection]:
            """Statements outside a write transaction; sqlite3 errors translated."""
            ...

        def _write(self) -> AbstractContextManager[sqlite3.Connection]:
            """One write transaction (or the enclosing one)."""
            ...

        def _count(self, name: str, n: int = 1) -> None:
            """Add to an in-process counter that ``stats()`` reports."""
            ...

        def transaction(self) -> AbstractContextManager[None]:
            """Group several write methods into one transaction."""
            ...

        def stats(self) -> dict[str, int]:
            """The whole file's counters and gauges (batch_jobs, batch_bytes among them)."""
            ...

        def check(self) -> None:
            """A cheap real query; StoreError when the database is unusable."""
            ...
