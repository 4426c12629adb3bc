"""Job-finished webhooks: an optional ``webhook`` URL on a batch submission or a crawl
start; when the job ends, a signed ``job.finished`` event goes to it.

- At submit, ``split_webhook`` takes the field out of the body (the rest is validated as
  before), ``check_webhook`` judges the URL as a target is judged (the caller's egress
  policy, without DNS: an IP literal, a port or a local name the policy refuses is refused
  before anything is stored), and ``attach`` stores it with a fresh secret once the job is
  created; the secret is returned once, in the submit answer (``webhook_secret``).
- The deliverer, each turn, turns the webhooks of ended jobs (done, partial, failed or
  cancelled) into events ``{"type": "job.finished", "job_id", "status", "counts"}``
  (``fire_ended_jobs``): the job webhook is forgotten and the event stored in one
  transaction, so each job's event is enqueued exactly once, on whichever node sees it
  first — after a restart too. Nothing in the batch runner or the crawl had to change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from sift.errors import BadRequest, Blocked, SiftError
from sift.options import MAX_URL_BYTES
from sift.store.base import BatchStore
from sift.store.outbox import outbox_of
from sift.store.webhooks import Outbox
from sift.webhooks.outbox import new_delivery
from sift.webhooks.signing import new_secret

FIELD: Final = "webhook"
COUNT_KEYS: Final = ("pending", "running", "done", "failed", "cancelled")


def split_webhook(body: Any) -> tuple[Any, str | None]:
    """``(body without "webhook", its URL or None)``; ``BadRequest`` unless it is a string.
    A body that is not an object is passed on unchanged (its own check refuses it)."""
    if not isinstance(body, dict) or FIELD not in body:
        return body, None
    rest = {k: v for k, v in body.items() if k != FIELD}
    url = body[FIELD]
    if url is None:
        return rest, None
    if not isinstance(url, str) or not url.strip() or len(url.encode()) > MAX_URL_BYTES:
        raise BadRequest(
            f"webhook: expected an http(s) URL of at most {MAX_URL_BYTES} bytes",
            hint="Send the URL that should receive the job.finished event, or leave it out.",
        )
    return rest, url.strip()


def check_webhook(check: Callable[[str], Any], url: str) -> str:
    """``url`` normalised, judged by ``check`` (``batch.submit.egress_check``: the caller's
    policy without DNS); ``BadRequest`` (422) naming it when refused or invalid."""
    try:
        target = check(url)
    except Blocked as exc:
        raise BadRequest(
            f"webhook: the URL is refused before any delivery: {url}: blocked_address "
            "(its host, address or port is outside this caller's egress policy)",
            hint=f"{exc.hint} Nothing was stored.",
        ) from exc
    except SiftError as exc:
        raise BadRequest(f"webhook: {exc.message}", hint=exc.hint) from exc
    return str(target.url)


async def attach(store: BatchStore, job_id: str, owner: str, url: str, now: int) -> str:
    """Store ``job_id``'s webhook with a fresh secret; returns the secret."""
    secret = new_secret()
    await outbox_of(store).add_job_webhook(job_id, owner, url, secret, now)
    return secret


async def fire_ended_jobs(outbox: Outbox, now: int, limit: int) -> int:
    """Enqueue the ``job.finished`` event of up to ``limit`` ended jobs with a webhook;
    returns how many this call enqueued."""
    fired = 0
    for job in await outbox.ended_jobs(limit):
        event = {
            "type": "job.finished",
            "job_id": job.job_id,
            "status": job.status,
            "counts": {k: job.counts.get(k, 0) for k in COUNT_KEYS},
        }
        delivery = new_delivery(
            owner=job.owner,
            source="job",
            source_id=job.job_id,
            url=job.url,
            secret=job.secret,
            event=event,
            now=now,
        )
        if await outbox.fire_job(job.job_id, delivery):
            fired += 1
    return fired
