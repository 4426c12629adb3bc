"""Connection pools and the single HTTP exchange, on aiohttp.

How the guard fits aiohttp:

- The fetcher hands aiohttp a URL whose host is the *vetted IP literal*; aiohttp never
  resolves a literal, so there is no second lookup to rebind. The original host travels in
  the ``Host`` header and as ``server_hostname`` (SNI and certificate verification), and
  aiohttp keys pooled connections by (IP, port, TLS, server_hostname).
- Belt and braces: each connector's resolver refuses every name, and its socket factory
  checks the address of every socket actually connected against the pool's egress rules.
- Pools are keyed by the policy's pool name *and* its egress fields, so a kept-alive
  connection opened for one policy is never reused by a stricter one.
- ``trust_env=False`` (proxy variables and .netrc ignored), a dummy cookie jar (nothing
  leaks between callers), no automatic decompression (``decode.py`` does it, bounded).

``translate`` is the one place aiohttp's and the socket layer's exceptions become sift's.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import ssl
from collections.abc import Awaitable, Iterator, Mapping
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from yarl import URL

from sift.errors import (
    Blocked,
    ConnectFailed,
    DnsFailure,
    SiftError,
    TlsFailure,
    TooLarge,
    UpstreamError,
    UpstreamTimeout,
)
from sift.fetch.egress import BLOCKED_MESSAGE, EgressGuard, blocked
from sift.fetch.policy import FetchPolicy

PoolKey = tuple[str, bool, tuple[str, ...]]
READ_BUFFER_BYTES = 64 << 10
MAX_LINE_BYTES = 8190


class EgressDenied(OSError):
    """Raised by the socket factory when a connect target fails the guard."""


class _NoResolver(AbstractResolver):
    """Connectors only ever see IP literals; a name reaching one is a bug, so refuse it."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        raise OSError(f"sift resolves names itself; refusing to resolve {host!r}")

    async def close(self) -> None:
        return None


def pool_key(policy: FetchPolicy) -> PoolKey:
    return (policy.pool, policy.allow_private, policy.private_cidrs)


class Pools:
    """One aiohttp session (and connection pool) per pool key, created on first use."""

    def __init__(
        self,
        guard: EgressGuard,
        *,
        ssl_context: ssl.SSLContext | None,
        limit: int,
        limit_per_host: int,
        keepalive_timeout_s: float,
        headers: Mapping[str, str],
    ) -> None:
        self._guard = guard
        self._headers = dict(headers)
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._limit = limit
        self._limit_per_host = limit_per_host
        self._keepalive_timeout_s = keepalive_timeout_s
        self._sessions: dict[PoolKey, aiohttp.ClientSession] = {}

    def session(self, policy: FetchPolicy) -> aiohttp.ClientSession:
        key = pool_key(policy)
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = self._new_session(policy)
        return session

    def _new_session(self, policy: FetchPolicy) -> aiohttp.ClientSession:
        # The socket factory knows only the pool's egress fields (ports were checked
        # per URL already); it judges the address each socket really connects to.
        view = FetchPolicy(allow_private=policy.allow_private, private_cidrs=policy.private_cidrs)
        guard = self._guard

        def socket_factory(addr_info: Any) -> socket.socket:
            family, type_, proto, _canon, sockaddr = addr_info
            if not guard.permits(str(sockaddr[0]), int(sockaddr[1]), view):
                raise EgressDenied("egress guard refused the connect target")
            return socket.socket(family, type_, proto)

        connector = aiohttp.TCPConnector(
            limit=self._limit,
            limit_per_host=self._limit_per_host,
            keepalive_timeout=self._keepalive_timeout_s,
            use_dns_cache=False,
            resolver=_NoResolver(),
            ssl=self._ssl,
            socket_factory=socket_factory,
        )
        return aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            auto_decompress=False,
            read_bufsize=READ_BUFFER_BYTES,
            max_line_size=MAX_LINE_BYTES,
            timeout=aiohttp.ClientTimeout(total=None),
        )

    def connection_counts(self) -> Mapping[PoolKey, int]:
        """Open connections per pool (for tests and metrics)."""
        out: dict[PoolKey, int] = {}
        for key, session in self._sessions.items():
            conns = getattr(session.connector, "_conns", {})
            out[key] = sum(len(v) for v in conns.values())
        return out

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


# Distinct connect timeouts remembered: a caller picks ``timeout_s`` (a float) per request,
# so the memo is an LRU, not a dict every distinct value would grow for good.
CONNECT_TIMEOUT_MEMO_SIZE = 64


@functools.lru_cache(maxsize=CONNECT_TIMEOUT_MEMO_SIZE)
def _timeout(connect_timeout_s: float) -> aiohttp.ClientTimeout:
    # The total deadline is the fetcher's own (one for all hops); aiohttp bounds connects.
    return aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s)


def send(
    session: aiohttp.ClientSession,
    *,
    url: str,
    headers: Mapping[str, str],
    server_hostname: str | None,
    policy: FetchPolicy,
) -> Awaitable[aiohttp.ClientResponse]:
    """One GET to an IP-literal URL; await it for the open response (the caller releases it).

    ``headers`` are added to the session's defaults (User-Agent, Accept, Accept-Encoding).
    Not a coroutine itself: the caller awaits aiohttp's request directly (one frame less on
    the hot path).
    """
    return session.get(
        URL(url, encoded=True),
        headers=headers,
        allow_redirects=False,
        server_hostname=server_hostname,
        timeout=_timeout(policy.connect_timeout_s),
        max_headers=policy.max_header_fields,
        max_field_size=min(MAX_LINE_BYTES, policy.max_header_bytes),
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        if isinstance(cur, aiohttp.ClientConnectorError) and cur.os_error is not cur:
            yield cur.os_error
        cur = cur.__cause__ or cur.__context__


def is_connect_error(exc: BaseException) -> bool:
    """A failure to open the connection (nothing was sent): the next address may work."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return True
    return (
        isinstance(exc, aiohttp.ClientConnectorError)
        and not isinstance(exc, aiohttp.ClientSSLError)
        and not isinstance(exc.os_error, EgressDenied)
    )


def translate(exc: BaseException, policy: FetchPolicy | None = None) -> SiftError:
    """The sift error for an exception raised by aiohttp or the socket layer (``policy``:
    the one the fetch ran under, for the hint of a refusal)."""
    if isinstance(exc, SiftError):
        return exc
    chain = list(_chain(exc))
    if any(isinstance(e, EgressDenied) for e in chain):
        return blocked(policy) if policy is not None else Blocked(BLOCKED_MESSAGE)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return DnsFailure("The upstream host name did not resolve.")
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError) or any(
        isinstance(e, ssl.SSLError | ssl.CertificateError) for e in chain
    ):
        return TlsFailure(f"TLS with the upstream failed: {_reason(exc)}")
    if isinstance(exc, asyncio.TimeoutError):
        return UpstreamTimeout("The upstream did not answer in time.")
    if any(isinstance(e, LineTooLong) for e in chain) or "Too many headers" in str(exc):
        return TooLarge("The upstream's response headers exceed this caller's limits.")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectFailed(f"Could not connect to the upstream: {_reason(exc)}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ConnectFailed("The upstream closed the connection before answering.")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return UpstreamError("The upstream's response body was cut off or malformed.")
    if isinstance(exc, aiohttp.ClientResponseError | HttpProcessingError):
        return UpstreamError("The upstream sent a malformed HTTP response.")
    if isinstance(exc, aiohttp.ClientError | OSError):
        return ConnectFailed(f"The connection to the upstream failed: {_reason(exc)}")
    return UpstreamError(f"The fetch failed: {type(exc).__name__}")


def _reason(exc: BaseException) -> str:
    """A short cause for the message, without addresses (they may be internal)."""
    for e in _chain(exc):
        if isinstance(e, aiohttp.ClientError):
            # aiohttp's wrappers subclass ssl/OS errors without their attributes.
            cert_error = getattr(e, "certificate_error", None)
            if isinstance(cert_error, ssl.SSLCertVerificationError):
                return str(cert_error.verify_message or "certificate verification failed")
            continue
        if isinstance(e, ssl.SSLCertVerificationError):
            return str(e.verify_message or "certificate verification failed")
        if isinstance(e, ssl.SSLError):
            return str(e.reason or "handshake failed").lower()
        if isinstance(e, OSError) and e.errno:
            return os.strerror(e.errno).lower()
    return type(exc).__name__
