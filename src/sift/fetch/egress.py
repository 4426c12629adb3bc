"""Which addresses a fetch may connect to, decided by sift's own pinned table.

``ipaddress.is_global`` is not used: its answers change between CPython releases and it
calls some dangerous ranges global (6to4, Teredo and NAT64 embed arbitrary IPv4 addresses).
Instead every address gets one of three categories from ``TABLE`` (most specific range wins):

- ``public``: anyone may connect.
- ``private``: loopback, RFC 1918, CGNAT, link-local (cloud metadata), ULA, benchmarking;
  only a policy with ``allow_private`` (optionally narrowed to ``private_cidrs``) may connect.
- ``forbidden``: unspecified, multicast, broadcast, reserved, documentation, IPv4-compatible,
  NAT64, 6to4, Teredo and every IPv6 address outside global unicast ``2000::/3``: never.

IPv4-mapped IPv6 (``::ffff:a.b.c.d``) is unwrapped first and judged (and connected to) as the
IPv4 address. A lab setting makes the guard testable without weakening it:
``extra_public_cidrs`` (ranges treated as public). sift's own addresses — those ``listen``
names (resolved at start when it is a host name) plus ``egress.own_addresses`` (e.g. the
public address in front of a wildcard bind) — are always refused, so sift cannot be pointed
at itself.

Every refusal raises the same ``Blocked`` with the same message: callers learn nothing about
which rule fired. Its hint depends only on the policy (``blocked``): a restricted caller is
told to ask for a fleet key, a fleet caller to ask the operator to allow the range.

A restricted caller must not learn which private names exist either: under a restricted
policy (``is_restricted``) a host *name* whose answers are refused and a name that does not
resolve get one and the same answer (``unreachable_name``: ``502 dns_failure``, one message,
one hint), so probing ``intranet.corp`` tells nothing a typo would not.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sift.errors import Blocked, ConfigError, DnsFailure
from sift.fetch.policy import FetchPolicy

Category = Literal["public", "private", "forbidden"]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

BLOCKED_MESSAGE = (
    "sift will not fetch this URL for this caller: it names or leads to a host, address or "
    "port outside the caller's egress policy."
)

# What to do next, by the kind of policy refused (never by the rule that fired).
RESTRICTED_HINT = (
    "This caller may only reach public addresses on allowed ports; "
    "ask the operator for a fleet key if you need more."
)
FLEET_PRIVATE_HINT = (
    "If sift should reach this host, ask the operator to allow its range for your class "
    "(private_cidrs); multicast, reserved and documentation ranges and sift's own address "
    "are never reachable."
)
FLEET_NO_PRIVATE_HINT = (
    "Your class may not reach private addresses; if sift should reach this host, ask the "
    "operator to set allow_private (and private_cidrs to its range) for your class."
)


def is_restricted(policy: FetchPolicy) -> bool:
    """A restricted caller's policy: public addresses only, on a list of ports."""
    return policy.allowed_ports is not None and not policy.allow_private


def blocked(policy: FetchPolicy) -> Blocked:
    """The one refusal for ``policy``: the same message always, the hint that fits it."""
    if is_restricted(policy):
        hint = RESTRICTED_HINT
    elif policy.allow_private:
        hint = FLEET_PRIVATE_HINT
    else:
        hint = FLEET_NO_PRIVATE_HINT
    return Blocked(BLOCKED_MESSAGE, hint=hint)


UNREACHABLE_NAME_HINT = (
    "Check the host name: this caller reaches public addresses only, and this name resolves "
    "to none of them (or to nothing at all)."
)


def unreachable_name(host: str) -> DnsFailure:
    """The one answer, under a restricted policy, to a host name that does not resolve *and*
    to one whose answers the policy refuses: the two must look alike."""
    return DnsFailure(
        f"The host name {host!r} does not resolve to an address this caller may reach.",
        hint=UNREACHABLE_NAME_HINT,
    )


log = logging.getLogger("sift.fetch.egress")
_MEMO_SIZE = 4096


@dataclass(frozen=True)
class Range:
    """One row of the classifier table."""

    network: IPNetwork
    category: Category
    name: str


def _row(cidr: str, category: Category, name: str) -> Range:
    return Range(ipaddress.ip_network(cidr), category, name)


# The pinned table. Order does not matter: lookups take the most specific match.
TABLE: tuple[Range, ...] = (
    # IPv4
    _row("0.0.0.0/8", "forbidden", "this network (0.0.0.0 reaches the local host)"),
    _row("10.0.0.0/8", "private", "private use"),
    _row("100.64.0.0/10", "private", "shared address space (CGNAT)"),
    _row("127.0.0.0/8", "private", "loopback"),
    _row("169.254.0.0/16", "private", "link-local (cloud metadata)"),
    _row("172.16.0.0/12", "private", "private use"),
    _row("192.0.0.0/24", "forbidden", "IETF protocol assignments"),
    _row("192.0.2.0/24", "forbidden", "documentation (TEST-NET-1)"),
    _row("192.88.99.0/24", "forbidden", "6to4 relay anycast"),
    _row("192.168.0.0/16", "private", "private use"),
    _row("198.18.0.0/15", "private", "benchmarking"),
    _row("198.51.100.0/24", "forbidden", "documentation (TEST-NET-2)"),
    _row("203.0.113.0/24", "forbidden", "documentation (TEST-NET-3)"),
    _row("224.0.0.0/4", "forbidden", "multicast"),
    _row("240.0.0.0/4", "forbidden", "reserved"),
    _row("255.255.255.255/32", "forbidden", "limited broadcast"),
    # IPv6 (anything outside 2000::/3 that no row names is forbidden, see classify)
    _row("::/128", "forbidden", "unspecified (:: reaches the local host)"),
    _row("::1/128", "private", "loopback"),
    _row("::/96", "forbidden", "IPv4-compatible (deprecated)"),
    _row("64:ff9b::/96", "forbidden", "NAT64"),
    _row("64:ff9b:1::/48", "forbidden", "local-use NAT64"),
    _row("100::/64", "forbidden", "discard-only"),
    _row("2001::/23", "forbidden", "IETF protocol assignments"),
    _row("2001::/32", "forbidden", "Teredo"),
    _row("2001:db8::/32", "forbidden", "documentation"),
    _row("2002::/16", "forbidden", "6to4"),
    _row("3fff::/20", "forbidden", "documentation"),
    _row("fc00::/7", "private", "unique local"),
    _row("fe80::/10", "private", "link-local"),
    _row("fec0::/10", "private", "site-local (deprecated)"),
    _row("ff00::/8", "forbidden", "multicast"),
)

_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
# Span = (version, first, last) as integers: containment is two comparisons, not an
# ipaddress method call (the fetcher classifies every address of every hop).
Span = tuple[int, int, int]


def _span(net: IPNetwork) -> Span:
    return (net.version, int(net.network_address), int(net.broadcast_address))


_BY_SPECIFICITY = sorted(TABLE, key=lambda r: r.network.prefixlen, reverse=True)
_SPANS = tuple((_span(r.network), r) for r in _BY_SPECIFICITY)
_GLOBAL_V6_SPAN = _span(_GLOBAL_UNICAST_V6)


def _within(ip: IPAddress, spans: Iterable[Span]) -> bool:
    v, n = ip.version, int(ip)
    return any(version == v and lo <= n <= hi for version, lo, hi in spans)


def parse_ip(text: str) -> IPAddress | None:
    """The address ``text`` spells in canonical form (no brackets, no zone), else ``None``."""
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def unwrap(address: IPAddress) -> IPAddress:
    """IPv4-mapped IPv6 (``::ffff:a.b.c.d``) becomes the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def lookup(address: IPAddress) -> Range | None:
    """The most specific table row containing ``address`` (already unwrapped), if any."""
    v, n = address.version, int(address)
    for (version, lo, hi), row in _SPANS:
        if version == v and lo <= n <= hi:
            return row
    return None


def classify(address: IPAddress | str, extra_public: Iterable[IPNetwork] = ()) -> Category:
    """The category of one address. Raises ``ValueError`` for a string that is no IP."""
    ip = unwrap(ipaddress.ip_address(address) if isinstance(address, str) else address)
    return _classify(ip, tuple(_span(n) for n in extra_public))


def _classify(ip: IPAddress, extra_public: tuple[Span, ...]) -> Category:
    if extra_public and _within(ip, extra_public):
        return "public"
    row = lookup(ip)
    if row is not None:
        return row.category
    if ip.version == 6 and not _within(ip, (_GLOBAL_V6_SPAN,)):
        return "forbidden"
    return "public"


def _parse_networks(cidrs: Iterable[str], setting: str) -> tuple[IPNetwork, ...]:
    try:
        return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in cidrs)
    except ValueError as exc:
        raise ConfigError(f"{setting}: {exc}") from exc


@functools.lru_cache(maxsize=64)
def _private_spans(cidrs: tuple[str, ...]) -> tuple[Span, ...]:
    return tuple(_span(n) for n in _parse_networks(cidrs, "private_cidrs"))


def _parse_own(entry: str) -> tuple[IPAddress, int | None]:
    """``"ip"``, ``"ip:port"``, ``"[v6]"`` or ``"[v6]:port"`` → (address, port or None)."""
    text = entry.strip()
    port: int | None = None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = int(rest.removeprefix(":"))
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = int(port_text)
    else:
        host = text
    return unwrap(ipaddress.ip_address(host)), port


def listen_addresses(host: str, port: int) -> list[str]:
    """The own-address entries (``"ip:port"``, ``"[v6]:port"``) for a listen ``host``.

    An IP literal is used as is; a name is resolved now (sift binds every address it
    resolves to, so each is refused as a fetch target). Raises ``ConfigError`` if the name
    does not resolve.
    """
    ip = parse_ip(host)
    if ip is not None:
        ips = [ip]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConfigError(f"listen: {host}: cannot resolve: {exc}") from exc
        ips = []
        for info in infos:
            parsed = parse_ip(str(info[4][0]).partition("%")[0])
            if parsed is not None and parsed not in ips:
                ips.append(parsed)
    return [f"[{a}]:{port}" if a.version == 6 else f"{a}:{port}" for a in ips]


class EgressGuard:
    """Applies the table plus the lab settings to one policy at a time.

    Construct once per ``Fetcher``; raises ``ConfigError`` for malformed settings.
    """

    def __init__(
        self, *, extra_public_cidrs: Sequence[str] = (), own_addresses: Sequence[str] = ()
    ) -> None:
        nets = _parse_networks(extra_public_cidrs, "egress.extra_public_cidrs")
        self._extra_public = tuple(_span(n) for n in nets)
        try:
            self._own = tuple(_parse_own(entry) for entry in own_addresses)
        except ValueError as exc:
            raise ConfigError(f"egress.own_addresses: {exc}") from exc
        self._memo: dict[str, tuple[IPAddress, str, Category]] = {}

    def add_own(self, entry: str) -> None:
        """Refuse ``entry`` (``"ip:port"`` or ``"[v6]:port"``) for every policy from now on:
        a listener sift opens after start-up (the browser's guard proxies)."""
        self._own = (*self._own, _parse_own(entry))

    def remove_own(self, entry: str) -> None:
        """Undo one ``add_own`` (the listener is closed)."""
        own = list(self._own)
        with contextlib.suppress(ValueError):
            own.remove(_parse_own(entry))
        self._own = tuple(own)

    def category(self, address: IPAddress) -> Category:
        """The category of an unwrapped address, with ``extra_public_cidrs`` applied."""
        return _classify(address, self._extra_public)

    def _is_own(self, ip: IPAddress, port: int) -> bool:
        for own_ip, own_port in self._own:
            if own_port is not None and own_port != port:
                continue
            if own_ip == ip:
                return True
            # A wildcard bind listens on every local address: refuse every non-public one.
            if own_ip.is_unspecified and _classify(ip, ()) != "public":
                return True
        return False

    def _judge(self, text: str) -> tuple[IPAddress, str, Category] | None:
        """(unwrapped address, its literal, its category) for an address string, memoised:
        the answer depends only on the string and this guard's settings."""
        hit = self._memo.get(text)
        if hit is None:
            parsed = parse_ip(text)
            if parsed is None:
                return None
            ip = unwrap(parsed)
            hit = (ip, str(ip), self.category(ip))
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            self._memo[text] = hit
        return hit

    def permits(self, address: IPAddress | str, port: int, policy: FetchPolicy) -> bool:
        """Whether ``policy`` may connect to ``address``:``port`` (ports included)."""
        if isinstance(address, str):
            judged = self._judge(address)
            if judged is None:
                return False
            ip, _, category = judged
        else:
            ip = unwrap(address)
            category = self.category(ip)
        reason = self._refusal(ip, category, port, policy)
        if reason is not None:
            log.debug("egress refused %s port %d: %s", ip, port, reason)
        return reason is None

    def _refusal(
        self, ip: IPAddress, category: Category, port: int, policy: FetchPolicy
    ) -> str | None:
        if not self.port_allowed(port, policy):
            return "port not allowed"
        if self._own and self._is_own(ip, port):
            return "sift's own listening address"
        if category == "public":
            return None
        if category == "forbidden":
            return "forbidden range"
        if not policy.allow_private:
            return "private address"
        spans = _private_spans(policy.private_cidrs)
        if spans and not _within(ip, spans):
            return "private address outside private_cidrs"
        return None

    @staticmethod
    def port_allowed(port: int, policy: FetchPolicy) -> bool:
        return policy.allowed_ports is None or port in policy.allowed_ports

    def vet(self, addresses: Sequence[str], port: int, policy: FetchPolicy) -> list[str]:
        """Classify every resolved address; refuse if any one is not allowed.

        Returns the connectable literals (mapped IPv6 unwrapped, duplicates dropped, order
        kept). Raises ``Blocked`` if the list is empty or any address is refused: a name
        that answers with a public and a private address is refused outright, so which
        address a retry picks can never matter.
        """
        vetted: list[str] = []
        for text in addresses:
            judged = self._judge(text)
            if judged is None or not self.permits(text, port, policy):
                raise blocked(policy)
            literal = judged[1]
            if literal not in vetted:
                vetted.append(literal)
        if not vetted:
            raise blocked(policy)
        return vetted
