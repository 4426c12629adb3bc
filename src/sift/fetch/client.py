"""The fetcher: one guarded, bounded GET with redirects, conditional requests and robots.

Per hop: validate the URL (rules, port, local names) → resolve the host once → vet every
address → connect to a vetted IP literal (TLS still verifies the host name) → check the
response headers against the bounds → either follow a redirect (re-validated, loop- and
count-checked) or stream the body through the bounded decoder. The whole fetch, every hop
and the body included, runs under one deadline, ``policy.timeout_s``.

Only ``sift.errors`` classes leave this module; aiohttp's are translated once, in
``transport.translate``, and chained.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urljoin

import aiohttp

from sift.errors import (
    Blocked,
    DnsFailure,
    InvalidUrl,
    RobotsDisallowed,
    SiftError,
    TooLarge,
    TooManyRedirects,
    UpstreamTimeout,
)
from sift.fetch.charset import detect_charset
from sift.fetch.credentials import Credentials
from sift.fetch.decode import make_decoder, parse_content_encoding
from sift.fetch.egress import EgressGuard, blocked, is_restricted, unreachable_name
from sift.fetch.mimetype import extract_content_type
from sift.fetch.policy import FetchPolicy
from sift.fetch.resolver import AresResolver, DnsLimits, Lookups, Resolver, lookup_caller
from sift.fetch.transport import Pools, is_connect_error, send, translate
from sift.fetch.url import Target, validate_url

if TYPE_CHECKING:
    from sift.fetch.robots import RobotsChecker

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.5"
ACCEPT_ENCODING = "gzip, deflate, br, zstd"
CHUNK_BYTES = 64 << 10
# A redirect's own body is drained (so the connection can be reused) only when this small.
DRAIN_REDIRECT_BYTES = 16 << 10


@dataclass(frozen=True)
class FetchResult:
    """What one fetch produced. ``headers`` names are lowercase; repeated fields are joined
    with ``", "``. ``body`` is decoded from its content encoding. ``redirects`` lists every
    URL that answered with a redirect, in order (``final_url`` is the last hop).
    ``truncated`` is true only for ``allow_truncation`` fetches cut at the limit.
    """

    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    body: bytes
    content_type: str
    charset: str | None
    redirects: tuple[str, ...]
    timings: dict[str, float] = field(compare=False)
    not_modified: bool
    etag: str | None
    last_modified: str | None
    truncated: bool = False
    # Browser loads with page actions: each step's outcome (sift.browser.actions).
    actions: tuple[dict[str, Any], ...] = ()


class Fetcher:
    """One per process. ``async with Fetcher(...) as f`` or ``start()`` / ``close()``.

    ``static_hosts`` is the ``[egress.resolve]`` table (consulted before ``resolver``; its
    answers are vetted like DNS answers). ``resolver`` answers every other name (default
    ``AresResolver``, c-ares); ``dns`` bounds every lookup: deadline, per-caller slots,
    negative answers (``resolver.Lookups``). ``own_addresses`` are sift's listening addresses
    (``"ip"``, ``"ip:port"``, ``"[v6]:port"``), refused for every policy. ``ssl_context``
    replaces the default verifying context (tests trust their own CA with it).
    """

    def __init__(
        self,
        *,
        user_agent: str,
        resolver: Resolver | None = None,
        dns: DnsLimits | None = None,
        extra_public_cidrs: Sequence[str] = (),
        static_hosts: Mapping[str, Sequence[str]] | None = None,
        own_addresses: Sequence[str] = (),
        ssl_context: ssl.SSLContext | None = None,
        pool_limit: int = 100,
        pool_limit_per_host: int = 0,
        keepalive_timeout_s: float = 15.0,
    ) -> None:
        self.user_agent = user_agent
        self.guard = EgressGuard(extra_public_cidrs=extra_public_cidrs, own_addresses=own_addresses)
        dns = dns or DnsLimits()
        self.lookups = Lookups(
            static_hosts or {},
            resolver
            if resolver is not None
            else AresResolver(servers=dns.servers, timeout_s=dns.timeout_s),
            dns,
        )
        self._pools = Pools(
            self.guard,
            ssl_context=ssl_context,
            limit=pool_limit,
            limit_per_host=pool_limit_per_host,
            keepalive_timeout_s=keepalive_timeout_s,
            headers={
                "User-Agent": user_agent,
                "Accept": ACCEPT,
                "Accept-Encoding": ACCEPT_ENCODING,
            },
        )
        self._state = "new"

    async def start(self) -> None:
        """Open for fetching. Pools are created lazily, one per policy pool, on first use."""
        if self._state == "closed":
            raise SiftError("This fetcher was closed; create a new one.")
        self._state = "open"

    async def close(self) -> None:
        """Close every pooled connection. Idempotent; later fetches raise ``SiftError``."""
        self._state = "closed"
        await self._pools.close()
        await self.lookups.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def pools(self) -> Pools:
        return self._pools

    @property
    def is_open(self) -> bool:
        """Started and not closed (``sift.fetch.post`` sends only then)."""
        return self._state == "open"

    def check_url(self, url: str, policy: FetchPolicy) -> Target:
        """Every check possible without I/O: URL rules, port, local names, literal address."""
        target = validate_url(url, policy)
        if target.ip is not None:
            self.guard.vet([target.ip], target.port, policy)
        return target

    def check_without_dns(self, url: str, policy: FetchPolicy) -> Target:
        """Every refusal this fetcher would make before asking DNS: ``check_url`` and, for a
        name ``[egress.resolve]`` maps, its mapped addresses vetted as ``vetted_addresses``
        would vet them. What passes may still be refused once DNS answers (or a redirect
        leads elsewhere); what fails here is refused by every fetch of ``url`` under
        ``policy``. Submissions call it to refuse such URLs before storing a job.

        A mapped name is judged here only for a caller that is not restricted: a restricted
        caller is never told a refused name from an unknown one (``vetted_addresses``), so
        its mapped names are accepted like any name and fail at fetch as ``dns_failure``."""
        target = self.check_url(url, policy)
        if target.ip is None and not is_restricted(policy):
            mapped = self.lookups.static_answer(target.host)
            if mapped is not None:
                self.guard.vet(mapped, target.port, policy)
        return target

    async def vetted_addresses(self, target: Target, policy: FetchPolicy) -> list[str]:
        """Resolve ``target``'s host once and vet every answer: the IP literals a connection
        for ``policy`` may be opened to, in order. Raises ``Blocked`` if any answer is refused
        (one bad answer refuses the name) and ``DnsFailure`` if the name does not resolve —
        except under a restricted policy, where both are the same ``DnsFailure``
        (``egress.unreachable_name``: which internal names exist is not that caller's to
        learn).

        The one "resolve once and vet" step of sift: the fetcher and the browser's proxy
        (``sift.browser.proxy``) both connect only to what this returns, by literal, so a
        second lookup can never rebind the name.
        """
        if target.ip is not None:
            return self.guard.vet([target.ip], target.port, policy)
        try:
            addresses = await self.lookups.resolve(target.host, target.port, policy.caller)
            return self.guard.vet(addresses, target.port, policy)
        except (DnsFailure, Blocked) as exc:
            if not is_restricted(policy):
                raise
            raise unreachable_name(target.host) from exc

    async def fetch(
        self,
        url: str,
        policy: FetchPolicy,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        robots: RobotsChecker | None = None,
        allow_truncation: bool = False,
        credentials: Credentials | None = None,
    ) -> FetchResult:
        """GET ``url`` under ``policy``, following redirects; see the module docstring.

        ``etag`` / ``last_modified`` make it a conditional GET (``not_modified`` on 304).
        With ``robots``, every hop must be allowed by its origin's robots.txt
        (``RobotsDisallowed`` otherwise). With ``allow_truncation``, a body over
        ``max_download_bytes`` is cut there instead of raising ``TooLarge``. Non-2xx
        statuses are results, not errors. ``credentials`` (the caller's headers and
        cookies) go to ``url``'s origin only: with every hop while the redirects stay on
        it, never again once one leaves it (even if a later hop comes back).
        """
        if self._state != "open":
            raise SiftError("The fetcher is not open; call start() first.")
        target = self.check_url(url, policy)
        started = time.perf_counter()
        timings = {"resolve_s": 0.0}
        # The robots.txt fetches inside (the shared checker's policy names no caller) count
        # against this fetch's caller too.
        token = lookup_caller.set(policy.caller) if policy.caller else None
        try:
            async with asyncio.timeout(policy.timeout_s):
                result = await self._follow(
                    target,
                    policy,
                    etag,
                    last_modified,
                    robots,
                    allow_truncation,
                    timings,
                    credentials or None,
                )
        except TimeoutError as exc:
            raise UpstreamTimeout(
                f"The fetch did not finish within {policy.timeout_s:g} s."
            ) from exc
        finally:
            if token is not None:
                lookup_caller.reset(token)
        timings["total_s"] = time.perf_counter() - started
        return result

    async def _follow(
        self,
        target: Target,
        policy: FetchPolicy,
        etag: str | None,
        last_modified: str | None,
        robots: RobotsChecker | None,
        allow_truncation: bool,
        timings: dict[str, float],
        credentials: Credentials | None,
    ) -> FetchResult:
        origin_url = target.url
        origin = (target.scheme, target.host, target.port)
        redirects: list[str] = []
        seen = {target.url}
        started = time.perf_counter()
        while True:
            if credentials is not None and (target.scheme, target.host, target.port) != origin:
                credentials = None  # the chain left the caller's origin: never again
            if robots is not None and not await robots.allowed(target.url):
                raise RobotsDisallowed(f"robots.txt at {target.origin} disallows this URL.")
            try:
                resp = await self._open(target, policy, etag, last_modified, timings, credentials)
            except Blocked as exc:
                if not redirects:
                    raise
                raise blocked(policy) from exc  # a refused hop: chained, see below
            try:
                location = resp.headers.get("Location")
                if resp.status in REDIRECT_STATUSES and location:
                    await _drain(resp)
                    target = self._next_hop(target, location, policy, redirects, seen)
                    continue
                timings["headers_s"] = time.perf_counter() - started
                body_started = time.perf_counter()
                body, truncated = await _read_body(resp, policy, allow_truncation)
                timings["body_s"] = time.perf_counter() - body_started
                return _result(
                    origin_url,
                    target,
                    resp,
                    body,
                    truncated,
                    redirects,
                    timings,
                    etag,
                    last_modified,
                )
            except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
                raise translate(exc, policy) from exc
            finally:
                resp.release()

    def _next_hop(
        self,
        current: Target,
        location: str,
        policy: FetchPolicy,
        redirects: list[str],
        seen: set[str],
    ) -> Target:
        if len(redirects) >= policy.max_redirects:
            raise TooManyRedirects(f"The URL redirected more than {policy.max_redirects} times.")
        try:
            nxt = self.check_url(urljoin(current.url, location.strip()), policy)
        except (InvalidUrl, Blocked) as exc:
            # The upstream chose this URL, not the caller: refuse it without detail. Always
            # chained: robots.py tells a refused redirect from a refused origin by the cause.
            raise blocked(policy) from exc
        if nxt.url in seen:
            raise TooManyRedirects("The URL redirects in a loop.")
        redirects.append(current.url)
        seen.add(nxt.url)
        return nxt

    async def _open(
        self,
        target: Target,
        policy: FetchPolicy,
        etag: str | None,
        last_modified: str | None,
        timings: dict[str, float],
        credentials: Credentials | None = None,
    ) -> aiohttp.ClientResponse:
        """Resolve once, vet every answer, send to the first vetted address that connects
        (with the caller's ``credentials``, when given: none of their names is one sift
        sets here, ``sift.fetch.credentials``)."""
        resolve_started = time.perf_counter()
        vetted = await self.vetted_addresses(target, policy)
        timings["resolve_s"] += time.perf_counter() - resolve_started
        headers = credentials.request_headers() if credentials else {}
        headers["Host"] = target.netloc
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        tls_name = target.host if target.scheme == "https" and target.ip is None else None
        session = self._pools.session(policy)
        for i, ip in enumerate(vetted):
            literal = f"[{ip}]" if ":" in ip else ip
            try:
                resp = await send(
                    session,
                    url=f"{target.scheme}://{literal}:{target.port}{target.target}",
                    headers=headers,
                    server_hostname=tls_name,
                    policy=policy,
                )
            except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
                if i + 1 < len(vetted) and is_connect_error(exc):
                    continue
                raise translate(exc, policy) from exc
            _check_headers(resp, policy)
            return resp
        raise AssertionError("unreachable: vet() returns at least one address")


def _check_headers(resp: aiohttp.ClientResponse, policy: FetchPolicy) -> None:
    raw = resp.raw_headers
    size = 4 * len(raw) + sum(map(len, itertools.chain.from_iterable(raw)))
    if len(raw) > policy.max_header_fields or size > policy.max_header_bytes:
        resp.release()
        raise TooLarge("The upstream's response headers exceed this caller's limits.")


async def _drain(resp: aiohttp.ClientResponse) -> None:
    length = resp.content_length
    if length is not None and length <= DRAIN_REDIRECT_BYTES:
        await resp.content.read(length)


async def _read_body(
    resp: aiohttp.ClientResponse, policy: FetchPolicy, allow_truncation: bool
) -> tuple[bytes, bool]:
    """The decoded body, never holding more than ``max_download_bytes`` (+1) of it."""
    limit = policy.max_download_bytes
    coding = parse_content_encoding(resp.headers.get("Content-Encoding"))
    length = resp.content_length
    if length is not None and length > limit and not allow_truncation:
        raise TooLarge(f"The upstream announced {length} bytes; the limit is {limit}.")
    if coding is None and length is not None and length <= limit:
        # Fast path: the parser never delivers more than Content-Length bytes.
        return await resp.read(), False
    decoder = make_decoder(coding, limit)
    body = bytearray()
    wire = 0
    async for chunk in resp.content.iter_chunked(CHUNK_BYTES):
        wire += len(chunk)
        body += decoder.feed(chunk)
        if len(body) > limit or wire > limit:
            break
    else:
        body += decoder.flush()
    if len(body) > limit or wire > limit:
        if not allow_truncation:
            raise TooLarge(f"The upstream's body exceeds the limit of {limit} bytes.")
        del body[limit:]
        return bytes(body), True
    return bytes(body), False


def _header_dict(resp: aiohttp.ClientResponse) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw_name, raw_value in resp.raw_headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("utf-8", "replace")
        if name in out:
            out[name] += ", " + value
        else:
            out[name] = value
    return out


def _result(
    origin_url: str,
    target: Target,
    resp: aiohttp.ClientResponse,
    body: bytes,
    truncated: bool,
    redirects: list[str],
    timings: dict[str, float],
    etag: str | None,
    last_modified: str | None,
) -> FetchResult:
    headers = _header_dict(resp)
    # Several Content-Type fields (or one listing several types): the last valid one.
    content_type = extract_content_type(resp.headers.getall("Content-Type", ()))
    not_modified = resp.status == 304 and bool(etag or last_modified)
    return FetchResult(
        url=origin_url,
        final_url=target.url,
        status=resp.status,
        headers=headers,
        body=body,
        content_type=content_type,
        charset=detect_charset(body, content_type),
        redirects=tuple(redirects),
        timings=timings,
        not_modified=not_modified,
        etag=headers.get("etag") or (etag if not_modified else None),
        last_modified=headers.get("last-modified") or (last_modified if not_modified else None),
        truncated=truncated,
    )
