"""A typed Python client for a running sift: ``Client`` (sync) and ``AsyncClient`` (asyncio).

    from sift.client import Client
    with Client("http://127.0.0.1:8080", key="sift_…") as sift:
        page = sift.fetch("https://example.com/", max_bytes=4096)
        print(page.title, page.content)
        shot = sift.fetch("https://example.com/", format="screenshot")
        png = sift.screenshot(shot)                           # the image's bytes
        for piece in sift.read("https://example.com/long"):   # follows next_offset
            ...
        job = sift.submit(urls, idempotency_key="crawl-42", options={"format": "text"})
        job.wait(progress=lambda v: print(v.targets_done, "/", v.targets_total))
        for item in job.results():                            # every page of results
            print(item.url, item.result.title if item.result else item.error)

Errors raise the same classes the server uses, rebuilt from the error object, so
``except sift.errors.BlockedAddress`` … ``except Blocked`` works remotely as in-process; a
batch target's error is the same kind of exception object, in ``BatchItem.error``.

Two kinds of failure never get mixed up:

- **sift itself is down**: ``SiftUnavailable`` (connection refused or reset, sift's host
  did not resolve, an answer without sift's error object — a proxy in front of a stopped
  sift) and its subclass ``SiftTimeout`` (no answer within ``timeout_s``). Never an httpx
  error, never an ``UpstreamError``.
- **the target site is down**: sift answered, and reports it with an ``UpstreamError``
  (``ConnectFailed``, ``DnsFailure``, ``UpstreamTimeout``, …: "<url> could not be fetched:
  …"; "the upstream" in a message is the target site). A failed batch target carries such
  an error in ``BatchItem.error``.

A webhook receiver checks what sift sent it with ``verify_webhook(secret, headers, body)``
(also ``verify``; Standard Webhooks, ``sift.webhooks.signing``: raises ``InvalidSignature``).

The package: ``wire`` (the answers' models and rebuilt errors), ``core`` (each call built and
read once), ``sync`` (``Client``, ``Job``) and ``aio`` (``AsyncClient``, ``AsyncJob``), the
twins that only send and sleep.
"""

from sift.client.aio import AsyncClient, AsyncJob
from sift.client.core import DEFAULT_POLL_S, DEFAULT_TIMEOUT_S, RESULTS_PAGE_SIZE
from sift.client.sync import Client, Job
from sift.client.wire import (
    LIVE_STATES,
    BatchItem,
    Envelope,
    JobState,
    JobView,
    Progress,
    TargetState,
    error_from_object,
    error_from_response,
)
from sift.webhooks.signing import InvalidSignature, verify
from sift.webhooks.signing import verify as verify_webhook

__all__ = [
    "DEFAULT_POLL_S",
    "DEFAULT_TIMEOUT_S",
    "LIVE_STATES",
    "RESULTS_PAGE_SIZE",
    "AsyncClient",
    "AsyncJob",
    "BatchItem",
    "Client",
    "Envelope",
    "InvalidSignature",
    "Job",
    "JobState",
    "JobView",
    "Progress",
    "TargetState",
    "error_from_object",
    "error_from_response",
    "verify",
    "verify_webhook",
]
