"""The plain-data egress and bounds policy one fetch runs under.

The service maps a caller's class (``fleet``, ``restricted``) onto a ``FetchPolicy``;
``fetch/`` never reads settings itself. Every limit a hostile upstream could push on is here,
so that tests (and operators) set them explicitly.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class FetchPolicy:
    """What one caller class may reach and how much it may spend doing so.

    ``allow_private``: may connect to private, loopback and link-local addresses (never to
    unspecified, multicast, reserved, documentation or translation ranges, nor to sift itself).
    ``private_cidrs``: when non-empty, only private addresses inside these ranges are allowed.
    ``allowed_ports``: ``None`` allows any port; otherwise the only ports a URL may name.
    ``timeout_s``: one total deadline for the whole fetch, across every redirect hop and the
    whole body (a slow drip ends here). ``connect_timeout_s`` bounds each TCP connect.
    ``pool``: connection pool name; pools are further split by the egress fields, so a
    connection opened under one policy is never reused under a stricter one.
    ``caller``: who the fetch runs for, only to count its DNS lookups against it
    (``resolver.Lookups``); not part of equality, so policies of one class stay equal
    (shared fetches, memos) whoever holds them.
    """

    allow_private: bool
    private_cidrs: tuple[str, ...] = ()
    allowed_ports: frozenset[int] | None = None
    max_redirects: int = 10
    max_download_bytes: int = 16 << 20
    connect_timeout_s: float = 10.0
    timeout_s: float = 30.0
    max_header_bytes: int = 64 << 10
    max_header_fields: int = 100
    pool: str = "fleet"
    caller: str = field(default="", compare=False)


RESTRICTED_PORTS: frozenset[int] = frozenset({80, 443})


def restricted_policy(extra_ports: frozenset[int] = frozenset(), **overrides: Any) -> FetchPolicy:
    """The ``restricted`` defaults: public addresses only, ports 80/443 (+ extras), 5 redirects.

    ``overrides`` replace any other field (tests shorten ``timeout_s``, for instance).
    """
    base = FetchPolicy(
        allow_private=False,
        allowed_ports=RESTRICTED_PORTS | extra_ports,
        max_redirects=5,
        pool="restricted",
    )
    return replace(base, **overrides)


@functools.lru_cache(maxsize=256)  # on the hot path; policies are few and hashable
def egress_scope(policy: FetchPolicy) -> str:
    """A short name for everything in ``policy`` that decides what a fetch may reach or keep:
    private access and ranges, ports, redirect count, body and header limits (not deadlines,
    which change how long a fetch may take, not what it may return).

    Shared state that one caller's fetch fills and another's reads — cached pages, robots.txt
    outcomes, single-flight fetches — is keyed by it, so two policies never share an entry.
    Readable prefix (``pub``/``priv``) for humans; a digest of the rest keeps keys short.
    """
    parts = (
        policy.allow_private,
        policy.private_cidrs,
        sorted(policy.allowed_ports) if policy.allowed_ports is not None else None,
        policy.max_redirects,
        policy.max_download_bytes,
        policy.max_header_bytes,
        policy.max_header_fields,
    )
    digest = hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
    return f"{'priv' if policy.allow_private else 'pub'}.{digest}"
