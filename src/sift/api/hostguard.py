"""DNS-rebinding and cross-site protection, as ASGI middleware in front of every route.

With no keys configured (anonymous mode) anyone who can reach sift may use it, and a web
page can reach a loopback sift too: through the browser, either with a name the attacker
re-points at 127.0.0.1 (DNS rebinding: the browser then sends ``Host: evil.example``) or by
posting cross-site (the browser sends ``Origin: https://evil.example``). Browsers always
send both headers, programs set them honestly, so in anonymous mode sift serves only:

- ``Host`` values naming a loopback address — ``localhost``, any 127.0.0.0/8 or ``::1``
  literal, with any port — the listen host itself (unless a wildcard), or one in
  ``listener.allowed_hosts``;
- requests without ``Origin``, or whose ``Origin`` is the request's own (the console, also
  under an ``allowed_hosts`` name), a loopback one (``http://localhost:3000``) or listed in
  ``listener.allowed_origins`` (``null`` is foreign);
- and of requests a browser marks as coming from another site or origin
  (``Sec-Fetch-Site: cross-site`` or ``same-site``), only those whose ``Origin`` is allowed
  as above. A browser sends no ``Origin`` on a cross-site ``GET`` (an image, a script, a
  form or a link), so without this any web page could drive a local sift blind:
  ``<img src="http://localhost:8080/v1/fetch?url=…">``. Navigating to the console's own
  pages (``/``, ``/docs``) from a link elsewhere is still served: they only show static
  pages, whose own requests are then same-origin.

With keys configured a browser cannot borrow the caller's credentials (bearer keys are
never ambient, unlike cookies), so only ``/mcp`` checks ``Origin``, because the MCP
streamable-HTTP transport requires every server to (403 when present and invalid).

Refusals are ``403 host_not_allowed`` / ``403 origin_not_allowed`` in the usual envelope
(a cross-site refusal says so, with its own hint).
The same instance wraps FastAPI's stack and the fast lane, so no route is left out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from sift.api.auth import KeyRing
from sift.api.errors import error_response
from sift.config import Settings
from sift.errors import HostNotAllowed, OriginNotAllowed, SiftError

MCP_PATH = "/mcp"
# Pages a link on another site may open (a navigation): static, they do nothing.
CONSOLE_PAGES = frozenset({"/", "/docs"})
CROSS_SITE_HINT = (
    "With no keys configured sift serves programs and its own console, not web pages of "
    "other sites or origins: call it from a program, open the console at sift's own "
    "address, or have the operator list the page's origin in listener.allowed_origins."
)


def split_host(value: str) -> str:
    """The host part of a ``Host`` header or an origin's netloc, lower-cased, no port or
    brackets: ``"[::1]:8080"`` → ``"::1"``, ``"LocalHost:80"`` → ``"localhost"``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") > 1:  # a bare IPv6 literal (not valid in Host, judged as written)
        return value
    return value.partition(":")[0]


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP literal (as ``split_host`` returns it)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin_key(origin: str) -> str:
    """``scheme://host[:port]`` normalised for comparison (lower case, no trailing slash)."""
    return origin.strip().lower().rstrip("/")


class HostGuard:
    """Refuse foreign ``Host`` (anonymous mode) and ``Origin`` (anonymous mode, ``/mcp``).

    Anonymous mode is decided per request from ``keys`` (the callers in force, reloaded at
    run time), else from the configured callers."""

    def __init__(self, app: ASGIApp, *, settings: Settings, keys: KeyRing | None = None) -> None:
        self.app = app
        self.settings = settings
        self._keys = keys
        listener = settings.listener
        hosts = {split_host(h) for h in listener.allowed_hosts}
        listen_host = split_host(settings.listen_host_port[0])
        # A wildcard bind is no name: a page addressing 0.0.0.0 directly is not let in by it.
        if listen_host not in ("0.0.0.0", "::"):
            hosts.add(listen_host)
        self._hosts = frozenset(hosts)
        self._origins = frozenset(_origin_key(o) for o in listener.allowed_origins)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function handing back the inner app's awaitable: on the fast lane, with
        # keys configured, the guard costs two comparisons and no coroutine of its own.
        if scope["type"] == "http":
            anonymous = not (self._keys.callers if self._keys else self.settings.callers)
            if anonymous or scope["path"] == MCP_PATH:
                refusal = self.check(scope["headers"], anonymous=anonymous, scope=scope)
                if refusal is not None:
                    return error_response(refusal)(scope, receive, send)
        return self.app(scope, receive, send)

    def check(
        self,
        headers: Iterable[tuple[bytes, bytes]],
        *,
        anonymous: bool,
        scope: Scope | None = None,
    ) -> SiftError | None:
        """The refusal for a request with these headers (``scope``: its method and path),
        or ``None`` to serve it."""
        host: str | None = None
        origin: str | None = None
        site: bytes | None = None
        mode: bytes | None = None
        for name, value in headers:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"sec-fetch-site":
                site = value.strip().lower()
            elif name == b"sec-fetch-mode":
                mode = value.strip().lower()
        if anonymous and not self.host_allowed(host):
            return HostNotAllowed(
                f"Host {host!r} is not a loopback name"
                if host is not None
                else "the request has no Host header"
            )
        # The request's own origin counts only where its Host was vetted (anonymous mode):
        # with keys, /mcp's Host is not checked, and a rebound name would match itself.
        if origin is not None and not self.origin_allowed(origin, host if anonymous else None):
            return OriginNotAllowed(f"requests from origin {origin!r} are refused")
        if (
            anonymous
            and site in (b"cross-site", b"same-site")
            and origin is None  # an Origin sent was judged just above
            and not (mode == b"navigate" and scope is not None and _console_page(scope))
        ):
            return OriginNotAllowed(
                f"{site.decode('latin-1')} requests are refused in anonymous mode "
                f"(Sec-Fetch-Site: {site.decode('latin-1')}, no allowed Origin)",
                hint=CROSS_SITE_HINT,
            )
        return None

    def host_allowed(self, host: str | None) -> bool:
        if host is None:
            return False
        name = split_host(host)
        return is_loopback_host(name) or name in self._hosts

    def origin_allowed(self, origin: str, host: str | None = None) -> bool:
        """``origin`` is listed, a loopback page's, or the request's own (its netloc is the
        ``host`` the request was sent to: the console, whatever name it is served under)."""
        key = _origin_key(origin)
        if key in self._origins:
            return True
        parts = urlsplit(key)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null", file://, extension schemes: never loopback pages
        if host is not None and parts.netloc == host.strip().lower():
            return True
        return is_loopback_host(split_host(parts.netloc))


def _console_page(scope: Scope) -> bool:
    return scope["method"] in ("GET", "HEAD") and scope["path"] in CONSOLE_PAGES
