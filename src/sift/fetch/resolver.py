"""Name resolution: the one place a host name becomes addresses.

The fetcher resolves each hop's host exactly once, vets every answer, and connects to a
vetted literal, so a resolver is never asked twice for the same connection (no DNS
rebinding). ``StaticResolver`` serves tests and the ``[egress.resolve]`` lab table; it knows
only the names it was given and fails every other lookup, so nothing reaches real DNS.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Mapping, Sequence
from typing import Protocol

from sift.errors import ConfigError, DnsFailure


class Resolver(Protocol):
    """Turns a host name into IP address strings; raises ``DnsFailure`` when it cannot."""

    async def resolve(self, host: str, port: int) -> list[str]: ...


def _dns_failure(host: str) -> DnsFailure:
    return DnsFailure(f"The host name {host!r} did not resolve.")


class SystemResolver:
    """The operating system's resolver, through the event loop's ``getaddrinfo``."""

    async def resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
        except (OSError, UnicodeError) as exc:
            raise _dns_failure(host) from exc
        addresses: list[str] = []
        for _family, _type, _proto, _canon, sockaddr in infos:
            literal = str(sockaddr[0])
            if literal not in addresses:
                addresses.append(literal)
        if not addresses:
            raise _dns_failure(host)
        return addresses


def _static_table(table: Mapping[str, Sequence[str]], setting: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, addresses in table.items():
        if isinstance(addresses, str):
            raise ConfigError(f"{setting}: {name!r} must map to a list of addresses")
        try:
            out[normalize_name(name)] = [str(ipaddress.ip_address(a)) for a in addresses]
        except ValueError as exc:
            raise ConfigError(f"{setting}: {name!r}: {exc}") from exc
    return out


def normalize_name(name: str) -> str:
    """Lowercase, without a trailing dot: the form ``Target.host`` has."""
    return name.strip().lower().removesuffix(".")


class StaticResolver:
    """A fixed name → addresses table; every other name fails with ``DnsFailure``.

    ``calls`` counts lookups per name, so tests can prove a fetch resolved exactly once.
    """

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self._table = _static_table(table, "StaticResolver")
        self.calls: dict[str, int] = {}

    async def resolve(self, host: str, port: int) -> list[str]:
        name = normalize_name(host)
        self.calls[name] = self.calls.get(name, 0) + 1
        addresses = self._table.get(name)
        if not addresses:
            raise _dns_failure(host)
        return list(addresses)


class LayeredResolver:
    """``[egress.resolve]`` entries first (like ``curl --resolve``), then ``fallback``.

    The addresses a static entry yields are still vetted like any DNS answer.
    """

    def __init__(self, static_hosts: Mapping[str, Sequence[str]], fallback: Resolver) -> None:
        self._static = _static_table(static_hosts, "egress.resolve")
        self._fallback = fallback

    def static_answer(self, host: str) -> list[str] | None:
        """The addresses ``[egress.resolve]`` maps ``host`` to, or None (a DNS name)."""
        addresses = self._static.get(normalize_name(host))
        return None if addresses is None else list(addresses)

    async def resolve(self, host: str, port: int) -> list[str]:
        addresses = self._static.get(normalize_name(host))
        if addresses is not None:
            return list(addresses)
        return await self._fallback.resolve(host, port)
