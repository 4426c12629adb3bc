"""``BatchStore``: the one async interface over the batch job store, whatever holds it.

Two backends implement it:

- ``SqliteBatchStore`` (``sift.batch.sqlitestore``): the embedded default, today's
  ``dcache`` SQLite code run on the database's worker thread, unchanged;
- ``PgBatchStore`` (``sift.batch.pgstore``): PostgreSQL, shared by several sift nodes.

The first fourteen methods are the spec's (``spec/batchstore.md``, rules 1–9), with the same
arguments, results and errors on both backends; the conformance tests run over both. Then
come the helpers the runner and the API read with, and the composite operations that must
be atomic (a submission's idempotency lookup, quotas and insert; a cancellation; a job's
final status): each backend runs each of them as one step — the SQLite one on its single
worker thread, the PostgreSQL one in one transaction.

Time is a parameter everywhere (``now``, unix seconds); the store never reads the clock for
the spec methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sift.dcache import BatchJob, BatchTarget, JobStatus, TargetStatus

if TYPE_CHECKING:
    from sift.batch.submit import NewTarget

Backend = Literal["sqlite", "postgres"]


class BatchStore(Protocol):
    """The batch job store. See the module docstring; every method may raise ``StoreError``
    (``StoreUnavailable`` when the database cannot be reached)."""

    @property
    def backend(self) -> Backend:
        """Which database holds the jobs."""
        ...

    @property
    def shared(self) -> bool:
        """True when several sift nodes share this store: a node starting up must then leave
        live jobs alone (no restart reconciliation; leases recover lost work instead)."""
        ...

    # -- the spec's fourteen methods -------------------------------------------------------

    async def create_batch_job(self, job: BatchJob) -> None: ...
    async def batch_job(self, id: str) -> BatchJob | None: ...
    async def batch_job_by_idem(
        self, caller: str, idem_key: str, now: int, ttl_s: float
    ) -> str | None: ...
    async def live_batch_jobs(self, caller: str) -> int: ...
    async def live_batch_jobs_total(self) -> int: ...
    async def put_batch_targets(self, job_id: str, targets: Sequence[BatchTarget]) -> None: ...
    async def batch_targets(self, job_id: str) -> list[BatchTarget] | None: ...
    async def update_batch_target(
        self,
        job_id: str,
        idx: int,
        now: int,
        status: TargetStatus,
        result: str | None = None,
        error: str | None = None,
        hint: str | None = None,
    ) -> None: ...
    async def set_batch_job_status(
        self, id: str, status: JobStatus, error: str, now: int
    ) -> None: ...
    async def touch_batch_job(self, id: str, now: int) -> None: ...
    async def sweep_batch(self, now: int, ttl_s: float) -> int: ...
    async def evict_batch_oldest(self, max_bytes: int, *, caller: str | None = None) -> int: ...
    async def mark_in_flight_failed(
        self, reason: str, now: int, *, targets_status: TargetStatus | None = None
    ) -> int: ...
    async def batch_nbytes(self) -> int: ...

    # -- reads and writes the runner and the API use ----------------------------------------

    async def queued_jobs(self) -> list[BatchJob]: ...
    async def jobs_of(self, caller: str, limit: int) -> list[BatchJob]:
        """``caller``'s jobs, newest first (created_at, then submission order), at most
        ``limit``. Never writes: listing moves no lease."""
        ...

    async def batch_targets_page(
        self, job_id: str, offset: int, limit: int
    ) -> list[BatchTarget] | None: ...
    async def next_pending_targets(self, job_id: str, limit: int) -> list[BatchTarget]: ...
    async def batch_target_counts(self, job_id: str) -> dict[str, int] | None: ...
    async def finish_pending_targets(
        self, job_id: str, status: TargetStatus, error: str, hint: str | None, now: int
    ) -> int: ...

    # -- composite operations, each atomic ---------------------------------------------------

    async def submit_job(
        self,
        job: BatchJob,
        targets: Sequence[NewTarget],
        *,
        ttl_s: float,
        live_jobs: int,
        live_jobs_total: int,
    ) -> tuple[str, bool]:
        """``(id, created)``: the live job of ``(job.caller, job.idem_key)`` (rule 3), or
        ``job`` stored with its targets after the quotas are checked (``QuotaExceeded``,
        ``ServiceBusy``). Two concurrent calls with one key never both create a job."""
        ...

    async def owned_job(self, job_id: str, caller: str) -> BatchJob:
        """The job if ``caller`` submitted it, else ``NotFound`` (the same for a missing one)."""
        ...

    async def touch_owned(self, job_id: str, caller: str, now: int) -> BatchJob:
        """``owned_job`` then ``touch_batch_job``."""
        ...

    async def status_view(
        self, job_id: str, caller: str, now: int, ttl_s: int, running: int = 0
    ) -> dict[str, Any]:
        """The caller's status view of the job, after touching it. ``running``: targets this
        process fetches that the store still shows pending (the embedded runner's way)."""
        ...

    async def cancel_job(self, job_id: str, caller: str, now: int, ttl_s: int) -> dict[str, Any]:
        """Cancel a live job (its unfinished targets become cancelled); the status view."""
        ...

    async def begin_job(self, job_id: str, now: int) -> None:
        """A queued job's first target starts: the job becomes running. NotFound if gone."""
        ...

    async def store_outcome(
        self,
        job_id: str,
        idx: int,
        now: int,
        status: TargetStatus,
        result: str | None,
        error: str | None,
        hint: str | None,
        max_bytes: int,
        caller: str | None = None,
    ) -> None:
        """``update_batch_target``, then evict finished jobs past ``max_bytes`` (``caller``'s
        own first, spec rule 6 as sift applies it)."""
        ...

    async def finish_job(
        self, job_id: str, now: int, max_bytes: int, caller: str | None = None
    ) -> JobStatus | None:
        """Give a job whose targets all have an outcome its final status; None if gone."""
        ...

    # -- crawls: a job that grows (sift.dcache.crawl has the contract) ------------------------

    async def put_crawl_seen(self, job_id: str, urls: Sequence[str]) -> None:
        """Mark ``urls`` seen for the crawl ``job_id`` without enqueuing them."""
        ...

    async def append_crawl_targets(
        self,
        job_id: str,
        urls: Sequence[str],
        *,
        options: str,
        depth: int,
        parent: int,
        max_total: int,
        now: int,
        seen: Sequence[str] = (),
    ) -> tuple[int, int]:
        """Enqueue the unseen ``urls`` in order as pending targets until the job holds
        ``max_total``; only while it is live. ``(added, targets_total)``. Atomic: concurrent
        appends to one job (several nodes) never enqueue a URL twice or reuse an idx."""
        ...

    # -- operations ----------------------------------------------------------------------------

    async def batch_stats(self) -> dict[str, int]:
        """``batch_jobs``, ``batch_bytes`` and this process's miss and eviction counters."""
        ...

    async def check(self) -> None:
        """Raise ``StoreError`` unless the store answers a query."""
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...
