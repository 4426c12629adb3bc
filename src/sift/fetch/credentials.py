"""A caller's own headers and cookies, for pages behind a login: checked, bounded, scoped.

``Credentials`` holds what a caller asked sift to send (``headers``: name → value,
``cookies``: name → value). They go to **one origin only** — the scheme, host and port of
the URL the caller asked for: the fetcher drops them for good at the first redirect hop to
another origin (``client.py``), robots.txt and sitemap fetches never get them (they are
separate fetches that are not handed any), and in the browser they are added only to
requests for that origin (``sift.browser.credentials``).

Values are secrets: this module never puts one in a message, a ``repr`` or a log line, and
every check below names the header (never its value) when it refuses one. What is refused:

- names that are not HTTP tokens, values with anything but printable ASCII and tab (no CR,
  LF, NUL), cookie values outside RFC 6265's cookie-octets;
- hop-by-hop and framing fields, and the fields sift itself sets (``REFUSED_HEADERS``,
  ``proxy-*``, ``sec-*``; ``Cookie`` is the ``cookies`` option's);
- more than ``MAX_HEADERS`` headers or ``MAX_COOKIES`` cookies, a name over
  ``MAX_NAME_CHARS``, a value over ``MAX_VALUE_BYTES``, or over ``MAX_TOTAL_BYTES`` together.

``tag`` names a caller's credentials in shared state (cache keys, single flight) without
storing them: an HMAC under a key the service draws at start, so a stored key reveals
nothing about the values and only this process can compute it again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

Pairs = tuple[tuple[str, str], ...]

# The fetch options that carry them: sent to one origin only, kept at rest only while a batch
# job or crawl lives (``sift.store`` removes them from its rows when the job ends).
CREDENTIAL_OPTIONS: Final = ("headers", "cookies")

MAX_HEADERS: Final = 32
MAX_COOKIES: Final = 64
MAX_NAME_CHARS: Final = 128
MAX_VALUE_BYTES: Final = 8 << 10
MAX_TOTAL_BYTES: Final = 16 << 10

_HOP_BY_HOP: Final = ("connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade")
_FRAMING: Final = ("host", "content-length", "expect")
# Fields sift sets or decides itself: its identity (robots.txt is judged for it), the
# encodings its bounded decoder reads, its cache's validators and whole-body reads, the
# browser's CORS and fetch-metadata fields, and the path a request took.
_SIFT_OWNED: Final = (
    "user-agent",
    "accept-encoding",
    "if-none-match",
    "if-modified-since",
    "if-match",
    "if-unmodified-since",
    "if-range",
    "range",
    "origin",
    "forwarded",
    "via",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
)
REFUSED_HEADERS: Final = frozenset((*_HOP_BY_HOP, *_FRAMING, *_SIFT_OWNED, "cookie"))
REFUSED_PREFIXES: Final = ("proxy-", "sec-")

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE: Final = re.compile(r"[\t\x20-\x7e]*")
_COOKIE_OCTETS: Final = r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"
_COOKIE_VALUE: Final = re.compile(f'{_COOKIE_OCTETS}|"{_COOKIE_OCTETS}"')
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@dataclass(frozen=True, repr=False)
class Credentials:
    """Checked headers and cookies, in the caller's order. Its ``repr`` names the headers
    and counts the cookies; it never shows a value."""

    headers: Pairs = ()
    cookies: Pairs = ()

    def __bool__(self) -> bool:
        return bool(self.headers or self.cookies)

    def __repr__(self) -> str:
        names = ", ".join(name for name, _ in self.headers)
        return f"Credentials(headers=[{names}], cookies={len(self.cookies)})"

    def request_headers(self, cookie: str | None = None) -> dict[str, str]:
        """The fields to add to a request for the origin: the headers, and a ``Cookie`` of
        ``cookie`` (the one the request already carries, if any) with the caller's cookies
        in place of any of the same name."""
        out = dict(self.headers)
        merged = self.cookie_header(cookie)
        if merged:
            out["Cookie"] = merged
        return out

    def cookie_header(self, existing: str | None = None) -> str:
        mine = {name for name, _ in self.cookies}
        kept = [
            part.strip()
            for part in (existing or "").split(";")
            if part.strip() and part.split("=", 1)[0].strip() not in mine
        ]
        return "; ".join([*kept, *(f"{name}={value}" for name, value in self.cookies)])

    def tag(self, key: bytes, caller: str) -> str:
        """A name for (``caller``, these credentials) in shared state: HMAC-SHA256 under
        ``key``, hex, 32 digits. Header names count case-insensitively; order does not."""
        canon = json.dumps(
            [caller, sorted((n.lower(), v) for n, v in self.headers), sorted(self.cookies)],
            separators=(",", ":"),
        )
        return hmac.new(key, canon.encode(), hashlib.sha256).hexdigest()[:32]


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of ``url``, host lowercase, default port filled in; None for an
    opaque origin (about:, data:, blob:, …) or a URL that does not parse."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def _refusal(lower: str) -> str | None:
    if lower == "cookie":
        return "send cookies with the cookies option"
    if lower in _HOP_BY_HOP or lower.startswith("proxy-"):
        return "a hop-by-hop field"
    if lower in _FRAMING:
        return "sift frames the request itself"
    if lower in _SIFT_OWNED or lower.startswith("sec-"):
        return "sift sets it itself"
    return None


def _pairs(what: str, value: Any, limit: int, problems: list[str]) -> list[tuple[str, Any]]:
    if not isinstance(value, Mapping):
        problems.append(f"{what}: expected an object of names to string values")
        return []
    if len(value) > limit:
        problems.append(f"{what}: at most {limit} {what}")
        return []
    return list(value.items())


def _name_ok(what: str, i: int, name: Any, problems: list[str]) -> bool:
    # An invalid name is never quoted: it may be a pasted "Name: secret" line.
    if isinstance(name, str) and len(name) <= MAX_NAME_CHARS and _TOKEN.fullmatch(name):
        return True
    problems.append(
        f"{what}: name #{i + 1} is not a valid field name (1-{MAX_NAME_CHARS} of the "
        "characters A-Z a-z 0-9 !#$%&'*+-.^_`|~)"
    )
    return False


def parse_headers(value: Any, problems: list[str]) -> Pairs | None:
    """``headers`` from untrusted JSON (name → value), or None with ``problems`` added."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    start = len(problems)
    for i, (name, raw) in enumerate(_pairs("headers", value, MAX_HEADERS, problems)):
        if not _name_ok("headers", i, name, problems):
            continue
        lower = name.lower()
        why = _refusal(lower)
        if why is not None:
            problems.append(f"headers: {name} is not allowed ({why})")
        elif lower in seen:
            problems.append(f"headers: {name} is given twice")
        elif not isinstance(raw, str):
            problems.append(f"headers: the value of {name} must be a string")
        elif len(raw.encode("utf-8", "surrogatepass")) > MAX_VALUE_BYTES:
            problems.append(f"headers: the value of {name} is longer than {MAX_VALUE_BYTES} bytes")
        elif not _VALUE.fullmatch(raw):
            problems.append(
                f"headers: the value of {name} may hold only printable ASCII and tabs "
                "(CR, LF and other control characters are refused)"
            )
        else:
            seen.add(lower)
            out.append((name, raw.strip(" \t")))
    return tuple(out) if len(problems) == start else None


def parse_cookies(value: Any, problems: list[str]) -> Pairs | None:
    """``cookies`` from untrusted JSON (name → value), or None with ``problems`` added."""
    out: list[tuple[str, str]] = []
    start = len(problems)
    for i, (name, raw) in enumerate(_pairs("cookies", value, MAX_COOKIES, problems)):
        if not _name_ok("cookies", i, name, problems):
            continue
        if not isinstance(raw, str):
            problems.append(f"cookies: the value of {name} must be a string")
        elif len(raw) > MAX_VALUE_BYTES:
            problems.append(f"cookies: the value of {name} is longer than {MAX_VALUE_BYTES} bytes")
        elif not _COOKIE_VALUE.fullmatch(raw):
            problems.append(
                f"cookies: the value of {name} may hold only RFC 6265 cookie characters "
                "(printable ASCII without space, double quote, comma, semicolon, backslash)"
            )
        else:
            out.append((name, raw))
    return tuple(out) if len(problems) == start else None


def check_total(headers: Pairs, cookies: Pairs, problems: list[str]) -> None:
    """Refuse headers and cookies over ``MAX_TOTAL_BYTES`` together."""
    total = sum(len(n) + len(v.encode()) for n, v in (*headers, *cookies))
    if total > MAX_TOTAL_BYTES:
        problems.append(
            f"headers, cookies: over {MAX_TOTAL_BYTES} bytes of names and values together"
        )
