"""Starting a crawl: validate, check the start URL as ``/v1/fetch`` would, store the job.

A crawl is stored as a batch job of kind ``crawl`` with one target (the start URL, depth 0)
and its parameters; the same ``submit_job`` as a batch stores it, so the Idempotency-Key
replay rules and the quotas are the batch's. Nothing is stored when the body is bad or the
start URL is invalid or refused. A start URL the caller's egress policy refuses without
DNS is refused like such a batch target (422 ``invalid_request`` naming it, see
``sift.batch.submit``); one refused once DNS answers gets ``/v1/fetch``'s answer.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

from sift.batch.jobs import BatchJobs
from sift.batch.submit import egress_check, refused_entry
from sift.crawl.spec import CrawlSpec, parse_crawl
from sift.errors import BadRequest, Blocked
from sift.fetch import Target
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchJob, NewTarget
from sift.webhooks.jobs import attach, check_webhook, split_webhook


async def check_start(service: Service, principal: Principal, url: str) -> Target:
    """The start URL normalised, or why not: ``BadRequest`` (422) naming it when the
    caller's egress policy refuses it without DNS (port, local name, IP literal, a name
    ``[egress.resolve]`` maps); otherwise the error ``/v1/fetch`` answers for it:
    ``InvalidUrl``, ``Blocked`` (the resolved address), ``DnsFailure``."""
    limits = service.settings.classes.get(principal.caller_class)
    policy = service.policy_for(principal, limits.timeout_s)
    try:
        target = service.fetcher.check_without_dns(url, policy)
    except Blocked as exc:
        raise BadRequest(
            f"the start URL is refused before any fetch: {refused_entry(url)}",
            hint=f"{exc.hint} Nothing was stored.",
        ) from exc
    await service.fetcher.vetted_addresses(target, policy)
    return target


async def submit_crawl(
    jobs: BatchJobs, service: Service, principal: Principal, idem_key: str, body: Any, now: int
) -> tuple[dict[str, Any], bool]:
    """``(status view, created)`` for a ``/v1/crawl`` body (a created crawl with a
    ``webhook`` carries its secret once, ``webhook_secret``: ``sift.webhooks.jobs``);
    raises ``BadRequest`` (listing every bad field; a refused webhook), the start URL's
    fetch errors, ``QuotaExceeded`` / ``ServiceBusy``."""
    settings = jobs.settings
    limits = settings.classes.get(principal.caller_class)
    body, webhook = split_webhook(body)
    hook_url = None
    if webhook is not None:
        hook_url = check_webhook(egress_check(service, principal), webhook)
    spec = parse_crawl(body, principal.caller_class, limits)
    start = await check_start(service, principal, spec.url)
    spec = replace(spec, url=start.url)
    job = new_crawl_job(principal, idem_key, spec, now)
    job_id, created = await jobs.store.submit_job(
        job,
        [NewTarget(start.url, spec.options_json())],
        ttl_s=settings.batch.ttl_s,
        live_jobs=limits.live_jobs,
        live_jobs_total=settings.batch.live_jobs_total,
    )
    secret = None
    if created and hook_url is not None:
        secret = await attach(jobs.store, job_id, principal.name, hook_url, now)
    if created:
        jobs.runner.notify()
    view = await jobs.status(principal, job_id, now)
    if secret is not None:
        view["webhook_secret"] = secret
    return view, created


def new_crawl_job(principal: Principal, idem_key: str, spec: CrawlSpec, now: int) -> BatchJob:
    return BatchJob(
        id=secrets.token_hex(12),
        caller=principal.name,
        caller_class=principal.caller_class,
        idem_key=idem_key,
        status="queued",
        error="",
        targets_total=1,
        targets_done=0,
        created_at=now,
        lease=now,
        nbytes=0,
        kind="crawl",
        spec=spec.to_json(),
    )
