"""Batch jobs as a caller sees them: submit, status, results, cancel — for the API and CLI.

Every method takes the caller (``Principal``) and ``now`` (unix seconds). A job that does
not exist and a job of another caller raise the same ``NotFound``, with the same message,
on every method. Every successful read or cancel is followed by ``touch_batch_job`` (spec
rule 1), so the lease reported is ``now``.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any, Final

from sift.batch.runner import Runner
from sift.batch.submit import egress_check, parse_submission
from sift.config import Settings
from sift.errors import BadRequest, NotFound
from sift.principal import Principal
from sift.store import BatchJob, BatchStore
from sift.store.base import job_not_found
from sift.store.views import TERMINAL_TARGET, item_json, job_view
from sift.webhooks.jobs import attach, check_webhook, split_webhook

MAX_PAGE_LIMIT: Final = 1000
# Jobs per ``GET /v1/batch`` answer: a caller has at most ``live_jobs`` live ones, and the
# finished ones it still holds are the newest that matter.
MAX_LIST_LIMIT: Final = 200
# Targets read from the store per step while building a page or the NDJSON stream.
_READ_CHUNK: Final = 100


class BatchJobs:
    """The batch operations over one database and one runner."""

    def __init__(self, settings: Settings, store: BatchStore, runner: Runner) -> None:
        self.settings = settings
        self.store = store
        self.runner = runner

    async def submit(
        self, principal: Principal, idem_key: str, body: Any, now: int
    ) -> tuple[dict[str, Any], bool]:
        """Validate ``body`` and create a job, or find the live one with this key.

        Returns ``(status view, created)``; a created job with a ``webhook`` has its secret
        in the view, once (``webhook_secret``, see ``sift.webhooks.jobs``). Raises
        ``RequestTooLarge`` (too many targets), ``BadRequest`` (bad targets and targets the
        caller's egress policy refuses without DNS, listed; a refused webhook),
        ``QuotaExceeded`` / ``ServiceBusy`` (quotas).
        """
        limits = self.settings.classes.get(principal.caller_class)
        check = egress_check(self.runner.service, principal)
        body, webhook = split_webhook(body)
        hook_url = check_webhook(check, webhook) if webhook is not None else None
        targets = parse_submission(body, principal, limits, check)
        job = BatchJob(
            id=secrets.token_hex(12),
            caller=principal.name,
            caller_class=principal.caller_class,
            idem_key=idem_key,
            status="queued",
            error="",
            targets_total=len(targets),
            targets_done=0,
            created_at=now,
            lease=now,
            nbytes=0,
        )
        job_id, created = await self.store.submit_job(
            job,
            targets,
            ttl_s=self.settings.batch.ttl_s,
            live_jobs=limits.live_jobs,
            live_jobs_total=self.settings.batch.live_jobs_total,
        )
        secret = None
        if created and hook_url is not None:
            secret = await attach(self.store, job_id, principal.name, hook_url, now)
        if created:
            self.runner.notify()
        view = await self.status(principal, job_id, now)
        if secret is not None:
            view["webhook_secret"] = secret
        return view, created

    async def status(self, principal: Principal, job_id: str, now: int) -> dict[str, Any]:
        """``{id, status, error, targets_total, targets_done, counts, created_at, lease,
        expires_at}``."""
        running = len(self.runner.running(job_id))
        return await self.store.status_view(
            job_id, principal.name, now, self.settings.batch.ttl_s, running
        )

    async def list(self, principal: Principal, limit: int) -> list[dict[str, Any]]:
        """The caller's newest jobs (at most ``limit``, newest first) as status views; other
        callers' jobs never appear. Moves no lease."""
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise BadRequest(f"limit must be between 1 and {MAX_LIST_LIMIT}")
        views = []
        for job in await self.store.jobs_of(principal.name, limit):
            counts = await self.store.batch_target_counts(job.id)
            if counts is None:  # swept between the two reads
                continue
            # Targets this process fetches are still pending in the store (see status).
            moved = min(len(self.runner.running(job.id)), counts.get("pending", 0))
            counts["pending"] = counts.get("pending", 0) - moved
            counts["running"] = counts.get("running", 0) + moved
            views.append(job_view(job, counts, self.settings.batch.ttl_s))
        return views

    async def cancel(self, principal: Principal, job_id: str, now: int) -> dict[str, Any]:
        """Cancel a queued or running job (pending targets never run, running ones are
        abandoned); a finished or cancelled job is left as it is. Returns its status view."""
        await self.store.owned_job(job_id, principal.name)
        # The runner lets go first, so nothing it writes can land after the cancellation.
        self.runner.abandon(job_id)
        return await self.store.cancel_job(job_id, principal.name, now, self.settings.batch.ttl_s)

    async def results_page(
        self, principal: Principal, job_id: str, offset: int, limit: int, now: int, max_bytes: int
    ) -> bytes:
        """``{"items": [...], "next_offset": n | null}`` as JSON bytes: the targets with
        ``offset <= idx``, at most ``limit`` of them and, beyond the first, at most about
        ``max_bytes`` of JSON (a caller follows ``next_offset``)."""
        if offset < 0 or not 1 <= limit <= MAX_PAGE_LIMIT:
            raise BadRequest(f"offset must be >= 0 and limit between 1 and {MAX_PAGE_LIMIT}")
        job = await self.store.owned_job(job_id, principal.name)
        running = self.runner.running(job_id)
        items: list[bytes] = []
        size = 0
        pos = offset
        full = False
        while len(items) < limit and not full:
            want = min(_READ_CHUNK, limit - len(items))
            rows = await self.store.batch_targets_page(job_id, pos, want)
            if rows is None:
                raise job_not_found(job_id)
            for t in rows:
                line = item_json(t, running, crawl=job.kind == "crawl")
                if items and size + len(line) > max_bytes:
                    full = True
                    break
                items.append(line)
                size += len(line)
                pos = t.idx + 1
            if len(rows) < want:
                break
        await self.store.touch_owned(job_id, principal.name, now)
        next_offset = b"%d" % pos if pos < job.targets_total else b"null"
        return b'{"items":[' + b",".join(items) + b'],"next_offset":' + next_offset + b"}"

    async def check_owner(self, principal: Principal, job_id: str, now: int) -> None:
        """``NotFound`` unless ``principal`` owns ``job_id``; touches the job."""
        await self.store.touch_owned(job_id, principal.name, now)

    async def results_ndjson(
        self, principal: Principal, job_id: str, now: int
    ) -> AsyncIterator[bytes]:
        """Every finished target, one JSON line each, in idx order. Check the owner with
        ``check_owner`` first: this generator stops quietly if the job disappears."""
        job = await self.store.batch_job(job_id)
        crawl = job is not None and job.kind == "crawl"
        pos = 0
        while True:
            rows = await self.store.batch_targets_page(job_id, pos, _READ_CHUNK)
            if not rows:
                break
            for t in rows:
                if t.status in TERMINAL_TARGET:
                    yield item_json(t, crawl=crawl) + b"\n"
            pos = rows[-1].idx + 1
        try:
            await self.store.touch_owned(job_id, principal.name, now)
        except NotFound:
            return
