"""Prometheus metrics, one registry per app instance (no globals, so tests stay isolated)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    """Every metric sift exports. Created by ``create_app``; passed to whoever records."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "sift_requests_total", "API requests", ["route", "status", "caller_class"], registry=r
        )
        self.in_flight = Gauge(
            "sift_requests_in_flight", "API requests being handled now", registry=r
        )
        self.fetch_seconds = Histogram(
            "sift_fetch_seconds",
            "Upstream fetch latency (all hops)",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.cache = Counter("sift_cache_total", "Fetch cache outcomes", ["result"], registry=r)
        self.upstream_status = Counter(
            "sift_upstream_responses_total", "Upstream HTTP status codes", ["code"], registry=r
        )
        self.errors = Counter("sift_errors_total", "Errors by code", ["code"], registry=r)
        self.cache_bytes = Gauge("sift_cache_bytes", "Bytes held by the content cache", registry=r)
        self.cache_evictions = Gauge(
            "sift_cache_evictions", "Content cache evictions since start", registry=r
        )
        self.batch_bytes = Gauge("sift_batch_bytes", "Bytes of stored batch results", registry=r)
        self.browser_pages = Counter(
            "sift_browser_pages_total",
            "Pages loaded in the browser, by outcome (ok or an error code)",
            ["result"],
            registry=r,
        )
        self.browser_blocked = Counter(
            "sift_browser_blocked_total",
            "Browser subrequests the guard proxy refused (address, port, or budget)",
            registry=r,
        )
        self.browser_seconds = Histogram(
            "sift_browser_seconds",
            "Time per browser page (queueing, loading, waiting, extraction)",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.store_backend = Gauge(
            "sift_store_backend",
            "The batch store backend (1 for the one in use)",
            ["backend"],
            registry=r,
        )
        self.fenced_writes = Counter(
            "sift_batch_fenced_writes",
            "Late batch writes rejected because the claim's lease was lost (PostgreSQL store)",
            registry=r,
        )
        self.reaped = Counter(
            "sift_batch_reaped",
            "Expired batch leases requeued or failed by this node (PostgreSQL store)",
            registry=r,
        )
        self.interrupted = Counter(
            "sift_batch_interrupted",
            "Batch targets failed as interrupted after store.max_stalls lost nodes",
            registry=r,
        )
        self.leases_lost = Counter(
            "sift_batch_leases_lost",
            "Fetches this node stopped because their lease was gone (reaped after a stall, "
            "job cancelled or swept)",
            registry=r,
        )
        self.claim_seconds = Histogram(
            "sift_batch_claim_seconds",
            "Latency of one claim round trip to the PostgreSQL store",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
            registry=r,
        )
        self._seen: dict[str, int] = {}

    def record_store(
        self, backend: str, counters: dict[str, int], claim_seconds: list[float]
    ) -> None:
        """Fold the batch store's own counters (running totals) and the claim latencies
        gathered since the last call into the exported metrics."""
        self.store_backend.labels(backend=backend).set(1)
        for name, counter in (
            ("fenced_writes", self.fenced_writes),
            ("reaped", self.reaped),
            ("interrupted", self.interrupted),
            ("leases_lost", self.leases_lost),
        ):
            value = counters.get(name, 0)
            delta = value - self._seen.get(name, 0)
            if delta > 0:
                counter.inc(delta)
            self._seen[name] = value
        for seconds in claim_seconds:
            self.claim_seconds.observe(seconds)
        claim_seconds.clear()

    def render(self) -> bytes:
        return generate_latest(self.registry)
