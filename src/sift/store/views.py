"""What callers see of a stored job: the status view, one JSON line per target, and the two
refusals every backend gives a submission (live-job quota, server full).

A target's ``error`` column holds ``"<code>: <message>"`` (the runner writes it so; the
restart and cancel reasons are written in the same form), and its ``hint`` column the hint,
so the error object rebuilt here is the one ``/v1/fetch`` would have answered. The
``result`` column holds the envelope exactly as ``jsonio.dumps`` wrote it, so it is spliced
into responses as bytes, never parsed and re-encoded.
"""

from __future__ import annotations

import re
from typing import Any, Final

from sift.errors import QuotaExceeded, ServiceBusy, SiftError
from sift.jsonio import dumps, loads
from sift.store import BatchJob, BatchTarget, JobStatus

# Target-level codes besides the error tree's: a target that never ran to completion.
CANCELLED_REASON: Final = "cancelled: the job was cancelled before this target finished"
RESTART_REASON: Final = "interrupted: sift restarted; resubmit the job"
_HINTS: Final = {
    "cancelled": "The job was cancelled; submit a new job to fetch this URL.",
    "interrupted": "sift restarted while the job ran; resubmit it (the same Idempotency-Key "
    "starts a new job).",
}
_CODE_RE: Final = re.compile(r"([a-z][a-z_]*): (.*)", re.S)
# Retry-After of a submission refused at a live-job quota, or when the server is full.
QUOTA_RETRY_AFTER_S: Final = 30
BUSY_RETRY_AFTER_S: Final = 10
TERMINAL_TARGET: Final = frozenset({"done", "failed", "cancelled"})


def error_text(err: SiftError) -> str:
    """The ``error`` column for ``err``."""
    return f"{err.code}: {err.message}"


def error_object(error: str | None, hint: str | None) -> dict[str, str]:
    """``{"code", "message", "hint"}`` from a target's error and hint columns."""
    text = error or "internal_error: the target failed without a recorded reason"
    m = _CODE_RE.fullmatch(text)
    code, message = (m.group(1), m.group(2)) if m else ("internal_error", text)
    return {
        "code": code,
        "message": message,
        "hint": hint or _HINTS.get(code, SiftError.default_hint),
    }


def job_view(job: BatchJob, counts: dict[str, int], ttl_s: int) -> dict[str, Any]:
    """``GET /v1/batch/{id}``: status and counts, no results. A crawl also shows its
    parameters (``crawl``: url, scope, max_pages, max_depth, include, exclude, sitemap)."""
    view: dict[str, Any] = {
        "id": job.id,
        "kind": job.kind,
        "status": job.status,
        "error": job.error,
        "targets_total": job.targets_total,
        "targets_done": job.targets_done,
        "counts": {
            k: counts.get(k, 0) for k in ("pending", "running", "done", "failed", "cancelled")
        },
        "created_at": job.created_at,
        "lease": job.lease,
        "expires_at": job.lease + ttl_s,
    }
    if job.kind == "crawl" and job.spec:
        crawl = loads(job.spec)
        crawl.pop("options", None)
        view["crawl"] = crawl
    return view


def item_json(
    t: BatchTarget, running: frozenset[int] = frozenset(), *, crawl: bool = False
) -> bytes:
    """One target as ``{"idx", "url", "status", "result" | "error"}`` JSON bytes; a pending
    target whose idx is in ``running`` is being fetched and shows as running. A crawl's
    target also carries ``depth`` and ``parent`` (the idx of the page that linked to it;
    null for the start page)."""
    status = "running" if t.status == "pending" and t.idx in running else t.status
    item: dict[str, Any] = {"idx": t.idx, "url": t.url, "status": status}
    if crawl:
        item["depth"], item["parent"] = t.depth, t.parent
    head = dumps(item)[:-1]
    if t.result is not None:
        return head + b',"result":' + t.result.encode() + b"}"
    if t.status in ("failed", "cancelled"):
        return head + b',"error":' + dumps(error_object(t.error, t.hint)) + b"}"
    return head + b"}"


def final_status(counts: dict[str, int]) -> tuple[JobStatus, str]:
    """A finished job's status and error from its target counts: done (all succeeded),
    failed (none did) or partial."""
    if counts.get("failed", 0) + counts.get("cancelled", 0) == 0:
        return "done", ""
    if counts.get("done", 0) == 0:
        return "failed", "every target failed; see the results"
    return "partial", ""


def quota_exceeded(caller: str, mine: int, live_jobs: int) -> QuotaExceeded:
    """The 429 for a caller at its live-job quota (every store raises this one)."""
    err = QuotaExceeded(
        f"caller {caller} already has {mine} live batch jobs (the limit is {live_jobs})",
        hint="Wait for one of your jobs to finish, or cancel one (DELETE /v1/batch/{id}), "
        "then retry.",
    )
    err.headers["Retry-After"] = str(QUOTA_RETRY_AFTER_S)
    return err


def service_busy(live_jobs_total: int) -> ServiceBusy:
    """The 503 when every caller's live jobs together reach ``batch.live_jobs_total``."""
    err = ServiceBusy(
        f"the server is running its limit of {live_jobs_total} live batch jobs",
        hint="Retry after the Retry-After delay.",
    )
    err.headers["Retry-After"] = str(BUSY_RETRY_AFTER_S)
    return err
