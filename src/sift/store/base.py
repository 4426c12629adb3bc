"""``BatchStore``: the one async interface over the batch job store, whatever holds it.

Two backends implement it:

- ``SqliteBatchStore`` (``sift.store.sqlite.store``): the embedded default, the batch SQL
  mixed into the node's SQLite database (``sift.dcache.DB``) run on its worker thread;
- ``PgBatchStore`` (``sift.store.postgres.store``): PostgreSQL, shared by several sift nodes.

This module also holds what both backends share: the row types (``BatchJob``,
``BatchTarget``), the closed status sets and their SQL spellings, and the column lists.

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
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args

from sift.errors import BadRequest, NotFound
from sift.store.watches import WatchStore

Backend = Literal["sqlite", "postgres"]

CLASS_FLEET: Final = "fleet"
CLASS_RESTRICTED: Final = "restricted"
CallerClass = Literal["fleet", "restricted"]

JobKind = Literal["batch", "crawl"]
JobStatus = Literal["queued", "running", "done", "partial", "failed", "cancelled"]
# The spec's target statuses plus "cancelled": a target that never ran because its job was
# cancelled. It is terminal and counts into targets_done like done and failed.
TargetStatus = Literal["pending", "running", "done", "failed", "cancelled"]

JOB_STATUSES: Final[frozenset[str]] = frozenset(get_args(JobStatus))
TARGET_STATUSES: Final[frozenset[str]] = frozenset(get_args(TargetStatus))
# SQL spellings of the status sets the queries filter on.
LIVE_SQL: Final = "('queued', 'running')"
TERMINAL_TARGET: Final[frozenset[str]] = frozenset({"done", "failed", "cancelled"})
# Rule 3: statuses an idempotent resubmission may land on; failed and cancelled start anew.
IDEM_REUSE_SQL: Final = "('queued', 'running', 'done', 'partial')"

JOB_COLS: Final = (
    "id, caller, caller_class, idem_key, status, error, targets_total, targets_done, "
    "created_at, lease, nbytes, kind, spec"
)
TARGET_COLS: Final = "job_id, idx, url, options, status, result, error, hint, depth, parent"


@dataclass(slots=True)
class BatchJob:
    """One ``batch_job`` row. ``lease`` and ``created_at`` are unix seconds set by the caller."""

    id: str
    caller: str
    caller_class: str
    idem_key: str
    status: JobStatus
    error: str
    targets_total: int
    targets_done: int
    created_at: int
    lease: int
    nbytes: int
    kind: JobKind = "batch"
    spec: str = ""  # a crawl's parameters as JSON (sift.crawl.spec); "" for a batch


@dataclass(slots=True)
class BatchTarget:
    """One ``batch_target`` row; ``result``/``error``/``hint`` are None until it finishes."""

    job_id: str
    idx: int
    url: str
    options: str
    status: TargetStatus
    result: str | None = None
    error: str | None = None
    hint: str | None = None
    depth: int = 0  # a crawl's link depth (0: the start page)
    parent: int | None = None  # a crawl target: the idx of the page that linked to it


def utf8_len(text: str | None) -> int:
    return 0 if text is None else len(text.encode("utf-8"))


def check_target_status(status: str) -> None:
    if status not in TARGET_STATUSES:
        raise BadRequest(f"unknown batch target status {status!r}")


def check_job_status(status: str) -> None:
    if status not in JOB_STATUSES:
        raise BadRequest(f"unknown batch job status {status!r}")


@dataclass(frozen=True, slots=True)
class NewTarget:
    """One validated target: its URL and the JSON of its merged options (url excluded)."""

    url: str
    options: str


def job_not_found(job_id: str) -> NotFound:
    """The one NotFound for a job that is missing or another caller's (same message)."""
    return NotFound(
        f"no batch job {job_id!r}",
        hint="Check the id; jobs expire when their lease runs out, and only the caller who "
        "submitted a job can see it.",
    )


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

    @property
    def watches(self) -> WatchStore:
        """The watch tables in the same database (``sift.store.watches``)."""
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

    # -- crawls: a job that grows (sift.store.sqlite.crawl has the contract) ----------------

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
