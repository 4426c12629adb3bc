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

    def render(self) -> bytes:
        return generate_latest(self.registry)
