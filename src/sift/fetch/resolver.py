"""Name resolution: the one place a host name becomes addresses.

The fetcher resolves each hop's host exactly once, vets every answer, and connects to a
vetted literal, so a resolver is never asked twice for the same connection (no DNS
rebinding). ``StaticResolver`` serves tests and the ``[egress.resolve]`` lab table; it knows
only the names it was given and fails every other lookup, so nothing reaches real DNS.

Fair share (issue 24): one caller's names whose DNS never answers must not stop anyone
else's fetches. ``Lookups`` is the front every lookup goes through:

1. ``[egress.resolve]`` names answer at once (IP literals never reach a resolver at all).
2. A name that failed within ``negative_ttl_s`` fails again at once (bounded table).
3. Each caller has at most ``lookups_per_caller`` lookups in flight; more wait for one of
   its own to end, never for anyone else's. Lookups with no caller (sift's own) are bounded
   by their deadline only.
4. Every lookup, the wait for a slot included, ends within ``timeout_s`` with ``DnsFailure``.

The default resolver, ``AresResolver``, is c-ares (through aiodns): lookups are messages on a
socket, not a blocked thread each, so a lookup that never gets an answer holds nothing
anyone else needs, and c-ares itself gives up on it within ``timeout_s`` (tries and
per-try timeouts derived from it): a lookup cannot outlive its deadline, and the caller's
slot is given back when it ends. It reads ``/etc/resolv.conf`` and ``/etc/hosts`` (or asks
the servers ``dns_servers`` names) and never appends search domains.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sift.errors import ConfigError, DnsFailure

# The caller a lookup is counted against when its policy names none: ``Fetcher.fetch`` sets
# it for the whole fetch, so the robots.txt fetch a caller's fetch makes (under the shared
# checker's caller-less policy) counts against that caller.
lookup_caller: contextvars.ContextVar[str] = contextvars.ContextVar("lookup_caller", default="")

# c-ares tries each query twice; with its back-off the total is about 3 per-try timeouts.
ARES_TRIES = 2
ARES_TIMEOUT_SHARE = 3.0


class Resolver(Protocol):
    """Turns a host name into IP address strings; raises ``DnsFailure`` when it cannot."""

    async def resolve(self, host: str, port: int) -> list[str]: ...


@dataclass(frozen=True)
class DnsLimits:
    """The bounds of ``Lookups`` (``[egress]`` settings ``dns_*``, docs/configuration.md).

    ``timeout_s``: one lookup, the wait for a slot included. ``lookups_per_caller``: lookups
    one caller may have in flight. ``negative_ttl_s``: how long a failed name keeps failing
    without a new lookup; ``negative_max_entries`` bounds that table. ``servers``: the DNS
    servers ``AresResolver`` asks (``"ip"`` or ``"ip:port"``); empty: ``/etc/resolv.conf``.
    """

    timeout_s: float = 5.0
    lookups_per_caller: int = 4
    negative_ttl_s: float = 10.0
    negative_max_entries: int = 4096
    servers: tuple[str, ...] = ()


def _dns_failure(host: str) -> DnsFailure:
    return DnsFailure(f"The host name {host!r} did not resolve.")


def _unique(literals: Sequence[str]) -> list[str]:
    out: list[str] = []
    for literal in literals:
        if literal not in out:
            out.append(literal)
    return out


class AresResolver:
    """c-ares through aiodns (see the module docstring). The channel is made on first use,
    on the running loop; ``close()`` ends it and every lookup in flight."""

    def __init__(self, *, servers: Sequence[str] = (), timeout_s: float = 5.0) -> None:
        self._servers = tuple(servers)
        self._timeout_s = timeout_s
        self._channel: Any = None

    def _resolver(self) -> Any:
        if self._channel is None:
            import aiodns  # imported on first use: c-ares starts a thread of its own
            import pycares

            self._channel = aiodns.DNSResolver(
                nameservers=list(self._servers) or None,
                timeout=self._timeout_s / ARES_TIMEOUT_SHARE,
                tries=ARES_TRIES,
                flags=pycares.ARES_FLAG_NOSEARCH,
            )
        return self._channel

    async def resolve(self, host: str, port: int) -> list[str]:
        import aiodns

        try:
            result = await self._resolver().getaddrinfo(
                host, family=socket.AF_UNSPEC, port=port, type=socket.SOCK_STREAM
            )
        except aiodns.error.DNSError as exc:
            if exc.args and exc.args[0] == aiodns.error.ARES_ETIMEOUT:
                # c-ares gave up at about the lookup's own deadline: the same answer as
                # when that deadline ends first (which one wins is a race of timers)
                raise DnsFailure(
                    f"The host name {host!r} did not resolve within {self._timeout_s:g} s."
                ) from exc
            raise _dns_failure(host) from exc
        except (UnicodeError, ValueError) as exc:
            raise _dns_failure(host) from exc
        addresses = _unique([_literal(node.addr[0]) for node in result.nodes])
        if not addresses:
            raise _dns_failure(host)
        return addresses

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()


def _literal(addr: bytes | str) -> str:
    text = addr.decode("ascii") if isinstance(addr, bytes) else addr
    return text.partition("%")[0]  # no IPv6 zone: the guard judges the address alone


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


class _Slots:
    """One caller's lookup slots: ``running`` holders; ``users`` counts holders and waiters
    (at 0 the entry is dropped, so the table holds only callers with lookups)."""

    def __init__(self, size: int) -> None:
        self.semaphore = asyncio.Semaphore(size)
        self.running = 0
        self.users = 0


class Lookups:
    """The front every lookup goes through (see the module docstring).

    ``static_hosts``: the ``[egress.resolve]`` table. ``fallback``: every other name.
    ``clock``: monotonic seconds, for the negative answers' expiry (tests pass their own).
    """

    def __init__(
        self,
        static_hosts: Mapping[str, Sequence[str]],
        fallback: Resolver,
        limits: DnsLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._static = _static_table(static_hosts, "egress.resolve")
        self._fallback = fallback
        self.limits = limits or DnsLimits()
        self._clock = clock
        self._negative: OrderedDict[str, float] = OrderedDict()
        self._slots: dict[str, _Slots] = {}
        self._queries: set[asyncio.Task[list[str]]] = set()

    def static_answer(self, host: str) -> list[str] | None:
        """The addresses ``[egress.resolve]`` maps ``host`` to, or None (a DNS name)."""
        addresses = self._static.get(normalize_name(host))
        return None if addresses is None else list(addresses)

    def in_flight(self, caller: str) -> int:
        """Lookups ``caller`` has running now (for tests and metrics)."""
        slots = self._slots.get(caller)
        return 0 if slots is None else slots.running

    async def resolve(self, host: str, port: int, caller: str = "") -> list[str]:
        """The addresses of ``host``; ``caller`` (else ``lookup_caller``) is who it counts
        against. Raises ``DnsFailure`` (no such name, no answer in time)."""
        name = normalize_name(host)
        static = self._static.get(name)
        if static is not None:
            return list(static)
        literal = _ip_literal(name)
        if literal is not None:
            return [literal]
        self._check_negative(name, host)
        timeout_s = self.limits.timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                return await self._lookup(name, host, port, caller or lookup_caller.get())
        except TimeoutError as exc:
            raise DnsFailure(
                f"The host name {host!r} did not resolve within {timeout_s:g} s."
            ) from exc

    def _check_negative(self, name: str, host: str) -> None:
        expires = self._negative.get(name)
        if expires is None:
            return
        if self._clock() < expires:
            raise _dns_failure(host)
        del self._negative[name]

    def _remember_failure(self, name: str) -> None:
        self._negative[name] = self._clock() + self.limits.negative_ttl_s
        self._negative.move_to_end(name)
        while len(self._negative) > self.limits.negative_max_entries:
            self._negative.popitem(last=False)

    async def _lookup(self, name: str, host: str, port: int, caller: str) -> list[str]:
        slots: _Slots | None = None
        if caller:
            slots = self._slots.get(caller)
            if slots is None:
                slots = self._slots[caller] = _Slots(self.limits.lookups_per_caller)
            slots.users += 1
            try:
                await slots.semaphore.acquire()
            except BaseException:
                self._leave(caller, slots, acquired=False)
                raise
            slots.running += 1
        # The query runs on in its own task when this caller gives up, and keeps the slot
        # until c-ares ends it (within timeout_s): what bounds a caller is what it runs.
        task = asyncio.create_task(self._query(name, host, port, caller, slots))
        self._queries.add(task)
        task.add_done_callback(_settle)
        task.add_done_callback(self._queries.discard)
        return await asyncio.shield(task)

    async def _query(
        self, name: str, host: str, port: int, caller: str, slots: _Slots | None
    ) -> list[str]:
        try:
            return await self._fallback.resolve(host, port)
        except DnsFailure:
            self._remember_failure(name)  # an answer about the name, whoever asked
            raise
        finally:
            if slots is not None:
                self._leave(caller, slots, acquired=True)

    def _leave(self, caller: str, slots: _Slots, *, acquired: bool) -> None:
        if acquired:
            slots.running -= 1
            slots.semaphore.release()
        slots.users -= 1
        if slots.users == 0 and self._slots.get(caller) is slots:
            del self._slots[caller]

    async def close(self) -> None:
        """End every lookup in flight and the fallback resolver (when it has ``close``)."""
        for task in list(self._queries):
            task.cancel()
        if self._queries:
            await asyncio.gather(*self._queries, return_exceptions=True)
        close = getattr(self._fallback, "close", None)
        if close is not None:
            await close()


def _ip_literal(name: str) -> str | None:
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return None


def _settle(task: asyncio.Task[list[str]]) -> None:
    """Retrieve the outcome of a query nobody waits for any more (no "never retrieved")."""
    if not task.cancelled():
        task.exception()
