"""``BatchTables``: every batch method ``sift.dcache.DB`` carries, as one mixin.

The node's SQLite file holds the content cache and the batch store side by side; ``DB`` is
put together from ``ContentCacheMixin`` and this. The SQL is here, in the store room; the
connection it runs on is the content cache's (see ``host.SqliteHost``).
"""

from __future__ import annotations

from sift.store.sqlite.batch import BatchStoreMixin
from sift.store.sqlite.crawl import CrawlStoreMixin
from sift.store.sqlite.history import HistoryMixin
from sift.store.sqlite.watches import WatchTablesMixin


class BatchTables(BatchStoreMixin, CrawlStoreMixin, HistoryMixin, WatchTablesMixin):
    """The batch, crawl, change-history and watch tables' methods (spec/batchstore.md,
    docs/crawl.md, docs/watches.md)."""
