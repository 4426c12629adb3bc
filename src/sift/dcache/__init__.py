"""sift's SQLite store: the content cache, robots.txt cache and the batch job store.

``DB`` is the synchronous store (one connection); ``AsyncDB`` runs it on one dedicated thread
for asyncio code. See docs/dcache.md.
"""

from sift.dcache.aio import AsyncDB
from sift.dcache.batch import (
    CLASS_FLEET,
    CLASS_RESTRICTED,
    BatchJob,
    BatchTarget,
    CallerClass,
    JobKind,
    JobStatus,
    TargetStatus,
)
from sift.dcache.content import PageEntry, body_digest
from sift.dcache.db import DB

__all__ = [
    "CLASS_FLEET",
    "CLASS_RESTRICTED",
    "DB",
    "AsyncDB",
    "BatchJob",
    "BatchTarget",
    "CallerClass",
    "JobKind",
    "JobStatus",
    "PageEntry",
    "TargetStatus",
    "body_digest",
]
