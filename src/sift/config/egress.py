"""``[egress]``: lab/test knobs of the egress guard and sift's own addresses it refuses."""

from __future__ import annotations

import ipaddress
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sift.config.values import check_cidr, check_positive, doc
from sift.errors import ConfigError


@dataclass(frozen=True)
class EgressSettings:
    """Lab/test settings that make the egress guard testable end to end without weakening it."""

    extra_public_cidrs: tuple[str, ...] = field(
        default=(),
        metadata=doc("Lab/test only: treat these ranges as public (e.g. 127.0.1.0/24)."),
    )
    resolve: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: types.MappingProxyType({}),
        metadata=doc(
            "Lab/test only: static host -> addresses, applied before DNS like curl --resolve; "
            "the addresses are still classified."
        ),
    )
    dns_timeout_s: float = field(
        default=5.0,
        metadata=doc(
            "Deadline of one DNS lookup, the wait for a free lookup slot included; c-ares "
            "gives up on the query within it too."
        ),
    )
    dns_lookups_per_caller: int = field(
        default=4,
        metadata=doc(
            "DNS lookups one caller may have in flight; more wait for one of its own, never "
            "for another caller's."
        ),
    )
    dns_negative_ttl_s: float = field(
        default=10.0,
        metadata=doc("How long a name that did not resolve keeps failing without a new lookup."),
    )
    dns_negative_max_entries: int = field(
        default=4096,
        metadata=doc("Names remembered as not resolving (oldest forgotten first)."),
    )
    dns_servers: tuple[str, ...] = field(
        default=(),
        metadata=doc(
            'DNS servers to ask ("ip" or "ip:port"); empty: those of /etc/resolv.conf. '
            "/etc/hosts is read first either way."
        ),
    )
    own_addresses: tuple[str, ...] = field(
        default=(),
        metadata=doc(
            'sift\'s own addresses besides the bound one ("ip", "ip:port", "[v6]:port"), '
            "refused as fetch targets: e.g. the public address behind a wildcard bind."
        ),
    )


def parse_resolve(value: Any) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ValueError("expected a table of host = [addresses]")
    out: dict[str, tuple[str, ...]] = {}
    for host, addrs in value.items():
        if isinstance(addrs, str):
            addrs = [addrs]
        if not isinstance(addrs, list) or not addrs:
            raise ValueError(f"{host}: expected a non-empty list of IP addresses")
        for a in addrs:
            ipaddress.ip_address(a)  # ValueError names the bad address
        out[host.lower().rstrip(".")] = tuple(addrs)
    return types.MappingProxyType(out)


def check_public_cidrs(egress: EgressSettings, where: str) -> None:
    for cidr in egress.extra_public_cidrs:
        check_cidr(cidr, where, "egress.extra_public_cidrs")


def check_dns(egress: EgressSettings, where: str) -> None:
    check_positive(
        egress,
        ("dns_timeout_s", "dns_lookups_per_caller", "dns_negative_max_entries"),
        where,
        "egress.",
    )
    if egress.dns_negative_ttl_s < 0:
        raise ConfigError(f"{where}: egress.dns_negative_ttl_s: must be >= 0")
    for server in egress.dns_servers:
        host, port = _split_host_port(server.strip())
        try:
            ipaddress.ip_address(host)
            if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(port)
        except ValueError:
            raise ConfigError(
                f"{where}: egress.dns_servers: bad server {server!r}; use ip, ip:port or [v6]:port"
            ) from None


def _split_host_port(text: str) -> tuple[str, str | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, rest.removeprefix(":") if rest else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, port
    return text, None


def check_own_addresses(egress: EgressSettings, where: str) -> None:
    for entry in egress.own_addresses:
        _check_own_address(entry, where)


def _check_own_address(entry: str, where: str) -> None:
    """``ip``, ``ip:port``, ``[v6]`` or ``[v6]:port`` (the guard parses them at start)."""
    text = entry.strip()
    host, port = text, "1"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") if rest else "1"
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    try:
        ipaddress.ip_address(host)
        if not (port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(port)
    except ValueError:
        raise ConfigError(
            f"{where}: egress.own_addresses: bad address {entry!r}; use ip, ip:port or [v6]:port"
        ) from None
