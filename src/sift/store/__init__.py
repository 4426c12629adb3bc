"""The batch store: one interface, two backends, and the one place that opens a store.

- ``base``: the ``BatchStore`` protocol, the row types and status sets both backends share;
- ``sqlite``: the embedded store, its SQL mixed into the node's SQLite database
  (``sift.dcache.DB``) and run on that database's worker thread;
- ``postgres``: the store shared by several nodes (psycopg, imported only when used);
- ``open``: ``open_store(settings, adb)``, which of the two a node uses.

The names below are the ones the rest of sift imports. Nothing heavy is imported here.
"""

from sift.store.base import (
    CLASS_FLEET,
    CLASS_RESTRICTED,
    Backend,
    BatchJob,
    BatchStore,
    BatchTarget,
    CallerClass,
    JobKind,
    JobStatus,
    NewTarget,
    TargetStatus,
)

__all__ = [
    "CLASS_FLEET",
    "CLASS_RESTRICTED",
    "Backend",
    "BatchJob",
    "BatchStore",
    "BatchTarget",
    "CallerClass",
    "JobKind",
    "JobStatus",
    "NewTarget",
    "TargetStatus",
]
