"""The embedded batch store on the node's SQLite database.

- ``host``: what the batch SQL needs from the database it is mixed into;
- ``batch``, ``crawl``: the batch and crawl tables' SQL (spec/batchstore.md, docs/crawl.md),
  put together as ``tables.BatchTables`` and mixed into ``sift.dcache.DB``;
- ``steps``: composite operations, each one call on the database's worker thread;
- ``store``: ``SqliteBatchStore``, the ``BatchStore`` over the node's ``AsyncDB``.

Import from the modules: this package imports nothing, so ``sift.dcache`` can import
``tables`` without loading the rest.
"""
