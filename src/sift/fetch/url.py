"""URL rules applied before any I/O, and the one normal form sift keys caches by.

The parser is deliberately stricter than browsers and than ``urllib``, so that no spelling
means one host to sift and another to the socket layer:

- scheme ``http`` or ``https`` followed by ``//``; total length at most 8 KiB;
- no control characters anywhere; no userinfo (``@``), backslash, whitespace or ``%`` in
  the authority; port 1–65535;
- the host is mapped with IDNA/UTS #46 first (fullwidth letters, circled letters, soft
  hyphens and ideographic full stops fold exactly as a resolver would fold them), then a host
  whose last label is numeric is parsed as IPv4 the way WHATWG and ``inet_aton`` do
  (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``) and replaced by its dotted
  quad, so the egress classifier always sees the address the socket would reach;
- other hosts must be IDNA-valid (ASCII labels: letters, digits, ``-``, ``_``).

``validate_url`` returns a ``Target``; with a policy it also applies the checks that need no
I/O: the port list and the by-name refusal of local names (``localhost``, ``*.internal`` …).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass, field

import idna

from sift.errors import InvalidUrl
from sift.fetch.egress import EgressGuard, blocked
from sift.fetch.policy import FetchPolicy

MAX_URL_CHARS = 8 << 10
DEFAULT_PORTS = {"http": 80, "https": 443}

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_PORT = re.compile(r"[0-9]{1,5}")
_IPV4_PART = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)")
# RFC 3986 unreserved + reserved + '%': everything else in a path or query is escaped.
_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?[]@!$&'()*+,;=%"
)
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_NEEDS_ESCAPE = re.compile(r"[^A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=]")
_AUTHORITY_END = re.compile(r"[/?#]")
_BAD_AUTHORITY = re.compile(r"[\\%\s]")
_LABEL = r"[a-z0-9_](?:[a-z0-9_\-]{0,61}[a-z0-9_])?"
_ASCII_HOST = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}")

# Names refused for callers without allow_private, whatever they resolve to.
REFUSED_NAMES = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
    }
)
REFUSED_SUFFIXES = (
    ".localhost",
    ".internal",
    ".local",
    ".localdomain",
    ".home.arpa",
    ".in-addr.arpa",
    ".ip6.arpa",
)


@dataclass(frozen=True)
class Target:
    """A validated URL, split into what the connection layer needs.

    ``host`` is lowercase ASCII (punycode for IDN), without brackets or a trailing dot;
    ``ip`` is the canonical literal when the host is an IP address; ``target`` is the
    request target (path and query, percent-encoded, starting with ``/``). ``netloc``
    (``host[:port]``, as in the URL and the ``Host`` header), ``origin`` and ``url`` (the
    normal form) are derived once, at construction.
    """

    scheme: str
    host: str
    port: int
    target: str
    ip: str | None
    netloc: str = field(init=False, compare=False)
    origin: str = field(init=False, compare=False)
    url: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        host = f"[{self.host}]" if ":" in self.host else self.host
        netloc = host if self.default_port else f"{host}:{self.port}"
        origin = f"{self.scheme}://{netloc}"
        object.__setattr__(self, "netloc", netloc)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "url", origin + self.target)

    @property
    def default_port(self) -> bool:
        return DEFAULT_PORTS[self.scheme] == self.port


def normalize_url(url: str) -> str:
    """The normal form of ``url`` (raises ``InvalidUrl``): the key caches use."""
    return validate_url(url).url


def validate_url(url: str, policy: FetchPolicy | None = None) -> Target:
    """Parse ``url`` under sift's rules; raise ``InvalidUrl`` with a precise message.

    With ``policy``, also raise ``Blocked`` when the port is not allowed or, for a policy
    without ``allow_private``, the host is a refused local name. Addresses are judged later,
    by the fetcher, on what the name actually resolves to.
    """
    if isinstance(url, str) and len(url) <= _CACHED_URL_CHARS:
        target = _parse_cached(url)
    else:
        target = _parse(url)
    if policy is not None:
        refuse_by_name(target, policy)
    return target


def refuse_by_name(target: Target, policy: FetchPolicy) -> None:
    """Raise ``Blocked`` for a port or (without ``allow_private``) a local name."""
    if not EgressGuard.port_allowed(target.port, policy):
        raise blocked(policy)
    if not policy.allow_private and target.ip is None and is_refused_name(target.host):
        raise blocked(policy)


def is_refused_name(host: str) -> bool:
    """Local names (defence in depth: their addresses are refused anyway).

    Single-label names are refused too: resolvers complete them with search domains, which
    point inside the operator's network.
    """
    return host in REFUSED_NAMES or host.endswith(REFUSED_SUFFIXES) or "." not in host


# The service validates a URL before fetching it, the fetcher again, robots.txt once more:
# remember the last few (Targets are immutable; failures are not cached).
_CACHED_URL_CHARS = 2048


@functools.lru_cache(maxsize=256)
def _parse_cached(url: str) -> Target:
    return _parse(url)


def _parse(url: str) -> Target:
    if not isinstance(url, str) or not url:
        raise InvalidUrl("The URL is empty.")
    url = url.strip(" \t\r\n\f")
    if len(url) > MAX_URL_CHARS:
        raise InvalidUrl(f"The URL is longer than {MAX_URL_CHARS} characters.")
    if _CONTROL.search(url):
        raise InvalidUrl("The URL contains control characters.")
    m = _SCHEME.match(url)
    if m is None:
        raise InvalidUrl("The URL has no scheme; use http:// or https://.")
    scheme = m.group(1).lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidUrl(f"Only http and https URLs can be fetched, not {scheme}:.")
    rest = url[m.end() :]
    if not rest.startswith("//"):
        raise InvalidUrl("The URL must start with http:// or https://.")
    rest = rest[2:]
    m_end = _AUTHORITY_END.search(rest)
    end = m_end.start() if m_end else len(rest)
    authority, tail = rest[:end], rest[end:]
    host_text, port = _split_authority(authority, scheme)
    host, ip = _parse_host(host_text)
    target = Target(scheme, host, port, _request_target(tail), ip)
    if len(target.url) > MAX_URL_CHARS:
        raise InvalidUrl(f"The URL is longer than {MAX_URL_CHARS} characters once encoded.")
    return target


def _split_authority(authority: str, scheme: str) -> tuple[str, int]:
    if not authority:
        raise InvalidUrl("The URL has no host.")
    if "@" in authority:
        raise InvalidUrl("URLs with user information (user@host) are not accepted.")
    if _BAD_AUTHORITY.search(authority):
        raise InvalidUrl("The URL's host contains a backslash, a space or a '%'.")
    if authority.startswith("["):
        host, sep, after = authority.partition("]")
        host += sep
        if after and not after.startswith(":"):
            raise InvalidUrl("The URL's host is malformed.")
        port_text = after[1:] if after else ""
    elif ":" in authority:
        host, _, port_text = authority.partition(":")
    else:
        host, port_text = authority, ""
    if not port_text:
        return host, DEFAULT_PORTS[scheme]
    if not _PORT.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
        raise InvalidUrl("The URL's port must be a number from 1 to 65535.")
    return host, int(port_text)


def _parse_host(text: str) -> tuple[str, str | None]:
    """(host, ip literal or None) for the host part of an authority."""
    if text.startswith("["):
        if not text.endswith("]"):
            raise InvalidUrl("The URL's IPv6 address is missing its closing ']'.")
        try:
            v6 = ipaddress.IPv6Address(text[1:-1])
        except ValueError as exc:
            raise InvalidUrl("The URL's IPv6 address is malformed.") from exc
        return str(v6), str(v6)
    if text.isascii():
        mapped = text.lower()  # what UTS #46 mapping does to ASCII (non-STD3), only faster
    else:
        try:
            mapped = idna.uts46_remap(text, std3_rules=False, transitional=False)
        except (idna.IDNAError, UnicodeError, ValueError) as exc:
            raise InvalidUrl("The URL's host is not a valid international domain name.") from exc
    if mapped.endswith("."):
        mapped = mapped[:-1]
    labels = mapped.split(".")
    if not mapped or "" in labels:
        raise InvalidUrl("The URL's host has an empty label.")
    if _IPV4_PART.fullmatch(labels[-1]):
        v4 = parse_ipv4(labels)
        return v4, v4
    if _ASCII_HOST.fullmatch(mapped) and "xn--" not in mapped:
        host = mapped  # the common case: plain ASCII labels, nothing to encode or check
    else:
        host = ".".join(_ascii_label(label) for label in labels)
    if len(host) > 253:
        raise InvalidUrl("The URL's host name is longer than 253 characters.")
    return host, None


def _ascii_label(label: str) -> str:
    try:
        if label.isascii():
            label = label.lower()
            if label.startswith("xn--"):
                idna.decode(label)  # must be valid punycode for a valid IDN
            elif not re.fullmatch(_LABEL, label):
                raise InvalidUrl(f"The URL's host label {label!r} is not a valid name.")
            return label
        return idna.alabel(label).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        raise InvalidUrl("The URL's host is not a valid international domain name.") from exc


def parse_ipv4(labels: list[str]) -> str:
    """WHATWG IPv4 parsing (hex, octal, 1–4 parts), as sockets would read the host."""
    if len(labels) > 4:
        raise InvalidUrl("The URL's host looks like an IPv4 address but has too many parts.")
    numbers: list[int] = []
    for part in labels:
        if not _IPV4_PART.fullmatch(part):
            raise InvalidUrl("The URL's host ends in a number but is not an IPv4 address.")
        digits = part[2:] if part[:2] in ("0x", "0X") else part
        if len(digits.lstrip("0")) > 11:  # past any 32-bit value in any base: no huge int()
            raise InvalidUrl("The URL's host is an IPv4 address out of range.")
        if part[:2] in ("0x", "0X"):
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if any(c in "89" for c in part):
                raise InvalidUrl("The URL's host has an invalid octal IPv4 part.")
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise InvalidUrl("The URL's host is an IPv4 address out of range.")
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return str(ipaddress.IPv4Address(value))


def _request_target(tail: str) -> str:
    """Path and query, fragment dropped, dot segments removed, unsafe characters escaped."""
    tail = tail.partition("#")[0]
    path, sep, query = tail.partition("?")
    path = _remove_dot_segments(path or "/")
    return _escape(path) + (sep + _escape(query) if sep else "")


def _escape(text: str) -> str:
    if not _NEEDS_ESCAPE.search(text):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%" and _PCT.match(text, i):
            out.append(text[i : i + 3])
            i += 3
            continue
        if c in _SAFE and c != "%":
            out.append(c)
        else:
            try:
                out.extend(f"%{b:02X}" for b in c.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise InvalidUrl("The URL contains characters that cannot be encoded.") from exc
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, so ``/a/../b`` and ``/b`` are one cache key."""
    if "/." not in path:  # a dot segment always follows a slash
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        elif seg == ".":
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    return result if result.startswith("/") else "/" + result
