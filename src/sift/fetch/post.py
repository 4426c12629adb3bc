"""One guarded, bounded POST of a small body (a webhook event): the fetcher's egress guard,
never around it.

The same steps as a fetch's hop (``client.Fetcher``): validate the URL under the caller's
policy (rules, port, local names, literal address) → resolve the host once and vet every
answer (``Fetcher.vetted_addresses``: under a restricted policy a refused name is the same
``DnsFailure`` as an unknown one) → connect to a vetted IP literal through the policy's
pool, whose socket factory checks again the address each socket really connects to. So a
name re-pointed at a private or loopback address after the URL was accepted is refused at
connect time, like a fetch's.

What differs from a GET: redirects are never followed (a 3xx is an answer like any other:
the caller decides it is a failure), the request carries ``body``, and the answer's body is
read to at most ``max_response_bytes`` and dropped (the connection is closed rather than
drained past it). One deadline, ``policy.timeout_s``, covers it all.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import aiohttp
from yarl import URL

from sift.errors import SiftError, TooLarge, UpstreamTimeout
from sift.fetch.client import Fetcher
from sift.fetch.policy import FetchPolicy
from sift.fetch.transport import MAX_LINE_BYTES, is_connect_error, translate

CHUNK_BYTES: Final = 16 << 10


@dataclass(frozen=True, slots=True)
class PostResult:
    """The answer to a POST: its status and how many body bytes were read (bounded)."""

    status: int
    body_bytes: int


async def post(
    fetcher: Fetcher,
    url: str,
    policy: FetchPolicy,
    body: bytes,
    headers: Mapping[str, str],
    *,
    max_response_bytes: int,
) -> PostResult:
    """POST ``body`` to ``url`` under ``policy`` (see the module docstring). Raises sift's
    errors only: ``InvalidUrl``, ``Blocked``, ``DnsFailure``, ``ConnectFailed``,
    ``UpstreamTimeout`` (the whole exchange past ``policy.timeout_s``), ``TooLarge``
    (response headers past the policy's bounds), ``UpstreamError``."""
    if not fetcher.is_open:
        raise SiftError("The fetcher is not open; call start() first.")
    target = fetcher.check_url(url, policy)
    try:
        async with asyncio.timeout(policy.timeout_s):
            vetted = await fetcher.vetted_addresses(target, policy)
            sent = {
                **headers,
                "Host": target.netloc,
                "Content-Type": "application/json",
                "Accept": "*/*",
                "Accept-Encoding": "identity",
            }
            tls_name = target.host if target.scheme == "https" and target.ip is None else None
            session = fetcher.pools.session(policy)
            for i, ip in enumerate(vetted):
                literal = f"[{ip}]" if ":" in ip else ip
                try:
                    return await _exchange(
                        session,
                        f"{target.scheme}://{literal}:{target.port}{target.target}",
                        body,
                        sent,
                        tls_name,
                        policy,
                        max_response_bytes,
                    )
                except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
                    if i + 1 < len(vetted) and is_connect_error(exc):
                        continue
                    raise translate(exc, policy) from exc
    except TimeoutError as exc:
        raise UpstreamTimeout(
            f"The receiver did not answer within {policy.timeout_s:g} s."
        ) from exc
    raise AssertionError("unreachable: vet() returns at least one address")


async def _exchange(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    server_hostname: str | None,
    policy: FetchPolicy,
    max_response_bytes: int,
) -> PostResult:
    """One POST to an IP-literal URL; the answer's body read to at most the bound."""
    async with session.post(
        URL(url, encoded=True),
        data=body,
        headers=headers,
        allow_redirects=False,
        server_hostname=server_hostname,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=policy.connect_timeout_s),
        max_headers=policy.max_header_fields,
        max_field_size=min(MAX_LINE_BYTES, policy.max_header_bytes),
    ) as resp:
        raw = resp.raw_headers
        size = 4 * len(raw) + sum(len(k) + len(v) for k, v in raw)
        if size > policy.max_header_bytes:
            raise TooLarge("The receiver's response headers exceed this caller's limits.")
        read = 0
        while read <= max_response_bytes:
            chunk = await resp.content.read(CHUNK_BYTES)
            if not chunk:
                break
            read += len(chunk)
        if read > max_response_bytes:
            resp.close()  # not drained: the connection goes, the rest is never read
        return PostResult(resp.status, min(read, max_response_bytes))
