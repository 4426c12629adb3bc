"""``DBWorker``: what the embedded stores need of the node's ``sift.dcache.AsyncDB``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from sift.store.sqlite.tables import BatchTables as DB

P = ParamSpec("P")
R = TypeVar("R")


class DBWorker(Protocol):
    """What the store needs of the node's ``sift.dcache.AsyncDB``: run a method of the
    database (a ``DB``, which carries ``BatchTables``) on its worker thread. Declared here
    so that the store room does not import the content cache."""

    async def run(
        self, method: Callable[Concatenate[DB, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R: ...
