"""Which URLs belong to a crawl: ``host``, ``domain`` or ``prefix`` of the start URL.

Every URL is judged in sift's normal form (``sift.fetch.url``: lowercase punycode host,
numeric IPv4 spellings as dotted quads, default port filled in, dot segments removed), so a
different spelling of the same place is never in or out of scope by accident.

- ``host``: the start URL's host and port. ``http`` on port 80 and ``https`` on port 443
  count as one place (a site that moves to HTTPS stays in scope); any other port is another
  host.
- ``domain``: the start host without a leading ``www.``, and every subdomain of it, on any
  port and scheme (``example.com`` → ``docs.example.com``, ``www.example.com``).
- ``prefix`` (the default): ``host``, and the path is the start URL's path or below it. The
  prefix is the start path up to its last ``/`` when the last segment looks like a file
  (``/docs/index.html`` → ``/docs/``), else the whole path, as a directory (``/docs`` covers
  ``/docs`` and ``/docs/…`` but not ``/docs-old``).
"""

from __future__ import annotations

from typing import Literal, get_args

from sift.fetch.url import Target

Scope = Literal["host", "domain", "prefix"]
SCOPES: tuple[str, ...] = get_args(Scope)


def _place(t: Target) -> tuple[str, int | None]:
    """Host and port, with the scheme's default port as None (http:80 = https:443)."""
    return t.host, None if t.default_port else t.port


def _dir_prefix(path: str) -> str:
    if path.endswith("/"):
        return path
    last = path.rsplit("/", 1)[-1]
    if "." in last:
        return path[: len(path) - len(last)]
    return path + "/"


class ScopeRule:
    """``allows(target)``: whether a normalised URL is inside the crawl's scope."""

    def __init__(self, start: Target, scope: Scope) -> None:
        self.scope = scope
        self._place = _place(start)
        host = start.host
        self._domain = host[4:] if host.startswith("www.") and start.ip is None else host
        path = start.target.split("?", 1)[0]
        self._exact = path.rstrip("/") or "/"
        self._prefix = _dir_prefix(path)

    def allows_host(self, t: Target) -> bool:
        """The host part of the rule alone (sitemaps are read from in-scope hosts)."""
        if self.scope == "domain":
            return t.host == self._domain or t.host.endswith("." + self._domain)
        return _place(t) == self._place

    def allows(self, t: Target) -> bool:
        if not self.allows_host(t):
            return False
        if self.scope != "prefix":
            return True
        path = t.target.split("?", 1)[0]
        return path.startswith(self._prefix) or path == self._exact
