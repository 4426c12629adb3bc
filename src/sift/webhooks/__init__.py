"""Signed webhooks (docs/watches.md, "Webhooks"): the Standard Webhooks signature
(``signing``, pure and stdlib only: the Python client re-exports ``verify``), the durable
outbox (``outbox.enqueue``), the deliverer that POSTs each event through the egress guard
with its owner's policy (``deliverer``), and the job-finished events of batch jobs and
crawls (``jobs``).

This package module imports nothing, so ``sift.client`` can load ``signing`` alone.
"""
