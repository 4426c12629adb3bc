"""``[batch]``: how many batch targets run at once, how long jobs live, how big bodies get."""

from __future__ import annotations

from dataclasses import dataclass, field

from sift.config.values import doc
from sift.errors import ConfigError


@dataclass(frozen=True)
class BatchSettings:
    max_bytes: int = field(
        default=256 << 20,
        metadata=doc(
            "Byte budget of stored batch results; oldest finished jobs are evicted whole.",
            size=True,
        ),
    )
    ttl_s: int = field(
        default=86400,
        metadata=doc(
            "Seconds a job lives after its last submit, result or read (the sliding lease)."
        ),
    )
    concurrency: int = field(
        default=32, metadata=doc("Targets fetched at once across all batch jobs.")
    )
    per_host: int = field(default=4, metadata=doc("Targets fetched at once per upstream host."))
    live_jobs_total: int = field(
        default=200,
        metadata=doc("Queued or running jobs across all callers; beyond it submissions get 503."),
    )
    shutdown_grace_s: float = field(
        default=10.0,
        metadata=doc(
            "On SIGTERM/SIGINT, how long running requests and batch targets may finish before "
            "sift cuts them off and exits (a second Ctrl-C: at once)."
        ),
    )
    mcp_finish_s: float = field(
        default=900.0,
        metadata=doc(
            "When sift mcp's input closes with batch or crawl jobs unfinished, how long a "
            "background sift may go on running them (0: not at all; they end interrupted)."
        ),
    )
    sweep_interval_s: float = field(default=60.0, metadata=doc("How often expired jobs are swept."))
    max_request_bytes: int = field(
        default=16 << 20,
        metadata=doc(
            "Largest POST /v1/batch body (a 10,000-target list exceeds max_request_bytes).",
            size=True,
        ),
    )
    request_bytes_per_target: int = field(
        default=2 << 10,
        metadata=doc(
            "POST /v1/batch body allowance per target the caller's class may submit: the "
            "body limit is 64 KiB + max_targets x this, at most batch.max_request_bytes.",
            size=True,
        ),
    )

    def request_max_bytes(self, max_targets: int) -> int:
        """The largest batch body a class allowed ``max_targets`` targets may send: a body
        is parsed in one go on the event loop, so it scales with what the class may submit."""
        return min(self.max_request_bytes, (64 << 10) + max_targets * self.request_bytes_per_target)


def check_batch(batch: BatchSettings, where: str) -> None:
    for fname in ("concurrency", "per_host", "live_jobs_total", "ttl_s"):
        if getattr(batch, fname) < 1:
            raise ConfigError(f"{where}: batch.{fname}: must be at least 1")
    if batch.mcp_finish_s < 0:
        raise ConfigError(f"{where}: batch.mcp_finish_s: must be 0 or more")
