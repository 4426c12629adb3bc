"""sift's one error tree.

Every failure a caller can see is a ``SiftError`` with a stable snake_case ``code``, a
human ``message``, a ``hint`` saying what to do next, and the HTTP ``status`` it maps to.
The API turns any of them into ``{"error": {"code", "message", "hint"}}``; the CLI prints
message and hint; the batch runner stores them per target. ``docs/errors.md`` lists every
code (a test keeps the two in step).

    SiftError (500 internal_error)
    ├── ConfigError            (500 config_error)      bad settings; the CLI exits 2
    ├── StoreError             (500 store_error)       the database cannot be opened or used
    │   └── StoreUnavailable   (503 store_unavailable) the shared PostgreSQL store is unreachable
    ├── BadRequest             (422 invalid_request)
    │   ├── InvalidUrl         (422 invalid_url)
    │   ├── OffsetOutOfRange   (422 offset_out_of_range)
    │   └── SnapshotGone       (410 snapshot_gone)
    ├── RequestTooLarge        (413 request_too_large)
    │   └── HeaderTooLarge     (431 header_too_large)
    ├── RequestTimeout         (408 request_timeout)
    ├── Unauthorized           (401 unauthorized)
    ├── ClientGone             (499 client_gone)       the client hung up; nobody reads the answer
    ├── HostNotAllowed         (403 host_not_allowed)
    ├── OriginNotAllowed       (403 origin_not_allowed)
    ├── NotFound               (404 not_found)
    ├── MethodNotAllowed       (405 method_not_allowed)
    ├── QuotaExceeded          (429 quota_exceeded)
    │   ├── ServiceBusy        (503 service_busy)
    │   │   ├── TooManyConnections (503 too_many_connections)
    │   │   └── RenderQueueTimeout (503 render_queue_timeout) dropped, still queued, at the deadline
    │   └── RateLimited        (429 rate_limited)
    ├── BrowserUnavailable     (503 browser_unavailable)  no Chromium / Playwright here
    ├── ActionFailed           (422 action_failed)     a page action failed (names the step)
    ├── RenderUnavailable      (503 render_unavailable)  render workers cannot start
    ├── RenderFailed           (502 render_failed)     the page exceeds the render limits
    │   └── RenderTimeout      (504 render_timeout)
    ├── Blocked                (403 blocked_address)
    │   └── RobotsDisallowed   (403 robots_disallowed)
    ├── SiftUnavailable        (503 sift_unavailable)  the Python client cannot reach sift itself
    │   └── SiftTimeout        (504 sift_timeout)      … or sift did not answer in time
    └── UpstreamError          (502 upstream_error)
        ├── DnsFailure         (502 dns_failure)
        ├── ConnectFailed      (502 connect_failed)
        ├── TlsFailure         (502 tls_failure)
        ├── TooManyRedirects   (502 too_many_redirects)
        ├── TooLarge           (502 too_large)
        ├── UnsupportedEncoding     (502 unsupported_encoding)
        ├── UnsupportedContentType  (502 unsupported_content_type)
        ├── BrowserFailed      (502 browser_error)     the page crashed or the browser died
        │   ├── BrowserMemoryExceeded (502 browser_memory_exceeded)
        │   └── BrowserCpuExceeded    (502 browser_cpu_exceeded)
        └── UpstreamTimeout    (504 upstream_timeout)
            └── BrowserTimeout (504 browser_timeout)

Foreign exceptions (aiohttp, sqlite3, …) are translated once, at the layer that meets them,
with ``raise SomeSiftError(...) from exc``; nothing above that layer sees them.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SiftError(Exception):
    """Base of every error sift reports. Subclasses set ``code``, ``status`` and a default hint."""

    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500
    default_hint: ClassVar[str] = (
        "This is a bug in sift; the server log has the details. Retry later or report it."
    )

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint
        # Extra response headers (e.g. Retry-After) that the API layer should send along.
        self.headers: dict[str, str] = {}

    def to_dict(self) -> dict[str, Any]:
        """The error envelope every front end returns: ``{"error": {code, message, hint}}``."""
        return {"error": {"code": self.code, "message": self.message, "hint": self.hint}}

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep message and hint across pickling (errors cross the render process pool).
        return (_rebuild, (type(self), self.message, self.hint, self.headers))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, hint={self.hint!r})"


class ConfigError(SiftError):
    code = "config_error"
    default_hint = "Fix the named setting in the config file or environment and start again."


class StoreError(SiftError):
    code = "store_error"
    default_hint = (
        "Check that the data directory exists, is writable and holds a valid sift database."
    )


class StoreUnavailable(StoreError):
    code = "store_unavailable"
    status = 503
    default_hint = (
        "The batch job store (PostgreSQL) cannot be reached right now; retry in a few "
        "seconds. Finished results are kept there and come back with it."
    )


class BadRequest(SiftError):
    code = "invalid_request"
    status = 422
    default_hint = "Fix the request as the message says and send it again."


class InvalidUrl(BadRequest):
    code = "invalid_url"
    default_hint = "Send an absolute http:// or https:// URL with a valid host, at most 8 KiB long."


class OffsetOutOfRange(BadRequest):
    code = "offset_out_of_range"
    default_hint = "Use an offset below total_bytes, or start again from offset 0."


class SnapshotGone(BadRequest):
    code = "snapshot_gone"
    status = 410
    default_hint = (
        "The snapshot this offset pointed into is no longer cached: "
        "fetch again from offset 0 without a digest."
    )


class RequestTooLarge(SiftError):
    code = "request_too_large"
    status = 413
    default_hint = "Send a smaller request: fewer targets or a smaller body."


class HeaderTooLarge(RequestTooLarge):
    code = "header_too_large"
    status = 431
    default_hint = "Send a request line and headers within the server's listener.max_head_bytes."


class RequestTimeout(SiftError):
    code = "request_timeout"
    status = 408
    default_hint = "Send the whole request line and headers at once, then wait for the answer."


class Unauthorized(SiftError):
    code = "unauthorized"
    status = 401
    default_hint = "Send 'Authorization: Bearer <key>' with a key the operator issued."


class ClientGone(SiftError):
    code = "client_gone"
    status = 499  # nginx's "client closed request": logged, never received by anyone
    default_hint = "The client closed the connection before the answer was ready."


class HostNotAllowed(SiftError):
    code = "host_not_allowed"
    status = 403
    default_hint = (
        "With no keys configured sift answers only to loopback Host names (localhost, "
        "127.0.0.1, [::1]); use one of them, or the operator adds listener.allowed_hosts."
    )


class OriginNotAllowed(SiftError):
    code = "origin_not_allowed"
    status = 403
    default_hint = (
        "sift refuses requests from web pages of other origins; call it from a program, "
        "or the operator adds the origin to listener.allowed_origins."
    )


class NotFound(SiftError):
    code = "not_found"
    status = 404
    default_hint = "Check the id; jobs expire when their lease runs out."


class MethodNotAllowed(SiftError):
    code = "method_not_allowed"
    status = 405
    default_hint = "Use a method this route supports (see /docs)."


class QuotaExceeded(SiftError):
    code = "quota_exceeded"
    status = 429
    default_hint = "Wait for one of your jobs to finish (or cancel one), then retry."


class ServiceBusy(QuotaExceeded):
    code = "service_busy"
    status = 503
    default_hint = "The server is at capacity; retry after the Retry-After delay."


class RateLimited(QuotaExceeded):
    code = "rate_limited"
    status = 429
    default_hint = "Too many of your fetches are in flight; wait for one, then retry."


class TooManyConnections(ServiceBusy):
    code = "too_many_connections"
    default_hint = (
        "Every connection slot holds a request in progress; retry after the Retry-After "
        "delay, and reuse one kept-alive connection rather than opening many."
    )


class RenderQueueTimeout(ServiceBusy):
    code = "render_queue_timeout"
    default_hint = (
        "Every render worker stayed busy until your request's deadline, so the render was "
        "dropped before it started. Retry after the Retry-After delay, or raise timeout_s "
        "within your class limit. Workers are shared out in turn between callers: your own "
        "queued renders are the first ones this render waited behind."
    )


class RenderUnavailable(SiftError):
    code = "render_unavailable"
    status = 503
    default_hint = (
        "sift cannot render pages right now (its render workers do not start); "
        "retry later, and tell the operator: the server log and /healthz say why."
    )


class RenderFailed(SiftError):
    code = "render_failed"
    status = 502
    default_hint = (
        "This page needs more memory than sift's render workers may use (or crashed the "
        "renderer); ask for format=raw, narrow it with selector, or fetch a smaller page."
    )


class RenderTimeout(RenderFailed):
    code = "render_timeout"
    status = 504
    default_hint = (
        "Rendering this page took longer than your class's render time limit; use a simpler "
        "selector (or none), ask for format=raw, or fetch a smaller page. The same request "
        "will time out again."
    )


class Blocked(SiftError):
    code = "blocked_address"
    status = 403
    default_hint = (
        "This caller may only reach public addresses on allowed ports; "
        "ask the operator for a fleet key if you need more."
    )


class RobotsDisallowed(Blocked):
    code = "robots_disallowed"
    default_hint = (
        "The site's robots.txt disallows this URL for sift; "
        "fleet callers may pass robots=false where the operator allows it."
    )


class UpstreamError(SiftError):
    code = "upstream_error"
    status = 502
    default_hint = "The upstream server failed; retry later or try another URL."


class DnsFailure(UpstreamError):
    code = "dns_failure"
    default_hint = "Check the host name; it did not resolve."


class ConnectFailed(UpstreamError):
    code = "connect_failed"
    default_hint = "The upstream refused or dropped the connection; retry later."


class TlsFailure(UpstreamError):
    code = "tls_failure"
    default_hint = (
        "The upstream's TLS certificate or handshake is invalid; try http:// or another host."
    )


class TooManyRedirects(UpstreamError):
    code = "too_many_redirects"
    default_hint = "The URL redirects too often or in a loop; fetch the final URL directly."


class TooLarge(UpstreamError):
    code = "too_large"
    default_hint = (
        "The upstream body exceeds this caller's download limit; fetch a smaller resource."
    )


class UnsupportedEncoding(UpstreamError):
    code = "unsupported_encoding"
    default_hint = (
        "The upstream used a content encoding sift does not decode (gzip, deflate, br, zstd)."
    )


class UnsupportedContentType(UpstreamError):
    code = "unsupported_content_type"
    default_hint = "sift renders HTML, text, markdown, JSON, XML feeds and PDF; fetch one of those."


class UpstreamTimeout(UpstreamError):
    code = "upstream_timeout"
    status = 504
    default_hint = (
        "The upstream was too slow; retry later or raise timeout_s within your class limit."
    )


class SiftUnavailable(SiftError):
    """Raised by the Python client (``sift.client``), never answered by sift: sift itself
    could not be reached (connection refused or reset, its host did not resolve) or the
    address answered without sift's error object (a proxy in front of a stopped sift).
    Distinct from ``UpstreamError``, which is sift reporting that the *target site* failed."""

    code = "sift_unavailable"
    status = 503
    default_hint = (
        "sift itself is not reachable: check that `sift serve` runs at that address and that "
        "this machine can reach it. The target site was never asked."
    )


class SiftTimeout(SiftUnavailable):
    """The Python client's deadline (``timeout_s``) passed before sift answered."""

    code = "sift_timeout"
    status = 504
    default_hint = (
        "sift did not answer within the client's timeout_s: it may be down or overloaded, or "
        "the request takes longer (a slow page, engine=browser); retry, or pass a larger "
        "timeout_s to the client."
    )


BROWSER_INSTALL_HINT = (
    "Install Chromium on the server: apt-get install --no-install-recommends "
    "chromium-headless-shell, and Playwright: pip install 'sift-fetch[browser]' "
    "(see docs/browser.md); or fetch with engine=http."
)


class BrowserUnavailable(SiftError):
    code = "browser_unavailable"
    status = 503
    default_hint = BROWSER_INSTALL_HINT


class ActionFailed(SiftError):
    """A page action (``actions``) could not be done on the loaded page: its element never
    appeared or could not be clicked or typed into within the step's time, or the step was
    refused by the page. The message names the step (``actions[2] (click '#more'): …``)."""

    code = "action_failed"
    status = 422
    default_hint = (
        "Check the step's selector against what the browser built (fetch the page with "
        "engine=browser and format=html), wait for the element first with a wait_for step, "
        "or drop the step. Each step may wait up to the class's action_timeout_s."
    )


class BrowserFailed(UpstreamError):
    code = "browser_error"
    default_hint = (
        "The page crashed the browser tab (often: it used more memory than allowed) or the "
        "browser exited; retry, or fetch with engine=http."
    )


class BrowserMemoryExceeded(BrowserFailed):
    code = "browser_memory_exceeded"
    default_hint = (
        "The page used more memory than a browser page may (browser.page_memory_bytes: its "
        "whole renderer process, not just the JavaScript heap) and was stopped; fetch it "
        "with engine=http, or a lighter page."
    )


class BrowserCpuExceeded(BrowserFailed):
    code = "browser_cpu_exceeded"
    default_hint = (
        "The page used more CPU time than a browser page may (browser.page_cpu_s) and was "
        "stopped; fetch it with engine=http, or a lighter page."
    )


class BrowserTimeout(UpstreamTimeout):
    code = "browser_timeout"
    default_hint = (
        "The page did not load (or wait_for did not appear) within the deadline; retry, "
        "raise timeout_s within your class limit, or fetch with engine=http."
    )


# The class named after its code, for callers who think in codes.
BlockedAddress = Blocked


def _rebuild(cls: type[SiftError], message: str, hint: str, headers: dict[str, str]) -> SiftError:
    err = cls(message, hint=hint)
    err.headers = headers
    return err


def all_error_classes() -> list[type[SiftError]]:
    """Every class in the tree, base first (used by docs tests and the client library)."""
    seen: list[type[SiftError]] = []
    stack: list[type[SiftError]] = [SiftError]
    while stack:
        cls = stack.pop(0)
        if cls not in seen:
            seen.append(cls)
            stack.extend(cls.__subclasses__())
    return seen
