"""sift's SQLite database: the content cache and robots.txt cache, and the file the embedded
batch store lives in.

``DB`` is the synchronous database (one connection); ``AsyncDB`` runs it on one dedicated
thread for asyncio code. The batch tables' methods ``DB`` carries are the store room's
(``sift.store.sqlite``); their row types are ``sift.store``'s. See docs/dcache.md.
"""

from sift.dcache.aio import AsyncDB
from sift.dcache.content import PageEntry, body_digest
from sift.dcache.db import DB, StoredShot

__all__ = ["DB", "AsyncDB", "PageEntry", "StoredShot", "body_digest"]
