"""The connection holder every part of ``DB`` builds on: transactions, error translation, close.

One ``sqlite3.Connection`` per ``DB``. The intended concurrency model is "one thread owns it"
(see ``aio.AsyncDB``); the re-entrant lock here is only a guard so that misuse from a second
thread blocks instead of interleaving two transactions on one connection.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from sift.errors import StoreError


def _attempt(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return call(), None
    except BaseException as exc:  # noqa: BLE001 - handed back to the caller that sent it
        return None, exc


class StoreBase:
    """Owns the connection; subclasses add the tables' methods."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn: sqlite3.Connection | None = conn
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0  # > 0 inside a write transaction (``transaction()`` nests writes)
        # In-process counters (hits, misses, evictions, …); reset on open, read by stats().
        self._counters: dict[str, int] = {}

    def _count(self, name: str, n: int = 1) -> None:
        self._counters[name] = self._counters.get(name, 0) + n

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(
                "database is closed",
                hint="This is a bug in sift: the store was used after shutdown.",
            )
        return self._conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Run statements outside a write transaction; translate sqlite3 errors.

        Translated messages never name the database file: they can reach a remote caller
        in an error envelope, and the file system layout is the operator's business."""
        with self._lock:
            conn = self._live()
            try:
                yield conn
            except sqlite3.Error as exc:
                raise StoreError(f"database error: {exc}") from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed if the block returns, rolled back if it raises.

        BEGIN IMMEDIATE takes the write lock up front, so a transaction never fails half-way
        on a lock upgrade when another process (the CLI) has the file open. Inside
        ``transaction()`` it joins the outer transaction instead of starting its own.
        """
        with self._lock:
            conn = self._live()
            if self._depth:
                yield conn
                return
            self._depth += 1
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._on_write(conn)
                    yield conn
                except BaseException:
                    self._rollback(conn)
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise StoreError(f"database error: {exc}") from exc
            finally:
                self._depth -= 1

    def _rollback(self, conn: sqlite3.Connection, savepoint: str | None = None) -> None:
        if savepoint is not None:
            conn.execute(f"ROLLBACK TO {savepoint}")
            conn.execute(f"RELEASE {savepoint}")
        elif conn.in_transaction:
            conn.execute("ROLLBACK")
        self._on_rollback(conn)

    def run_group(self, calls: list[Callable[[], Any]]) -> list[tuple[Any, BaseException | None]]:
        """Run ``calls`` in order inside one write transaction: one commit for all of them.

        Each call gets a savepoint, so one that raises is undone alone and gets its
        exception back; the others still commit. If the commit itself fails, every call
        gets that error. This is group commit for the worker thread (aio.py): under load a
        dozen writes share one commit instead of paying one each.
        """
        outcomes: list[tuple[Any, BaseException | None]] = []
        with self._lock:
            conn = self._live()
            if self._depth:  # already inside a transaction: just run them
                return [_attempt(call) for call in calls]
            self._depth += 1
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._on_write(conn)
                for call in calls:
                    conn.execute("SAVEPOINT sift_call")
                    value, exc = _attempt(call)
                    if exc is None:
                        conn.execute("RELEASE sift_call")
                    else:
                        self._rollback(conn, "sift_call")
                        if isinstance(exc, sqlite3.Error):
                            exc = StoreError(f"database error: {exc}")
                    outcomes.append((value, exc))
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                failed = StoreError(f"database error: {exc}")
                return [(None, failed) for _ in calls]
            finally:
                self._depth -= 1
        return outcomes

    def _on_rollback(self, conn: sqlite3.Connection) -> None:
        """Hook run after a rollback: resynchronise in-memory state kept beside the tables
        (the content cache's byte counter). Overrides call super(); so does this one, for
        the store mixins after it (``sift.store.sqlite.host.SqliteHost``)."""
        after = getattr(super(), "_on_rollback", None)
        if after is not None:
            after(conn)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several write methods into one transaction (one commit, all or nothing).

        Every write method called inside joins it; reads see its uncommitted writes.
        """
        with self._write():
            yield

    def _on_write(self, conn: sqlite3.Connection) -> None:
        """Hook run at the start of every write transaction (the content cache writes the
        recency it has kept in memory). Overrides call super()."""

    def close(self) -> None:
        """Close the connection. Idempotent; every other method raises StoreError afterwards."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                # Best effort (closing must succeed even on a broken file): write what the
                # _on_write hook holds, then the statistics upkeep SQLite recommends.
                with suppress(sqlite3.Error):
                    conn.execute("BEGIN IMMEDIATE")
                    self._on_write(conn)
                    conn.execute("COMMIT")
                with suppress(sqlite3.Error):
                    conn.execute("PRAGMA optimize")
            finally:
                conn.close()

    def check(self) -> None:
        """A cheap real query for /healthz; raises StoreError when the database is unusable."""
        with self._read() as conn:
            conn.execute("SELECT count(*) FROM (SELECT 1 FROM batch_job LIMIT 1)").fetchone()
            conn.execute("SELECT count(*) FROM (SELECT 1 FROM body LIMIT 1)").fetchone()

    def integrity_check(self) -> str:
        """``PRAGMA integrity_check`` joined into one string: ``"ok"`` when the file is sound.

        Reads every page of the file: for operators and tests, not for /healthz.
        """
        with self._read() as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        return "\n".join(str(r[0]) for r in rows)
