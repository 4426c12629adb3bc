"""Batch jobs: thousands of URLs as one job, over the batch store and the fetch service.

- ``submit``: validate a submission whole, store it atomically (idempotency, quotas).
- ``runner``: the worker pool — fair across callers, polite per host, restart-safe.
- ``jobs``: what callers do with jobs (submit, status, results, cancel), for API and CLI.
- ``views``: the JSON callers see. ``politeness``: per-host limits, Crawl-delay, backoff.
- ``command``: ``sift batch``.

See docs/batch.md.
"""
