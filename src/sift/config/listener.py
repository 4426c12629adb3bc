"""``[listener]``: bounds on sift's own HTTP listener, and the hosts and origins it serves."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sift.config.values import check_positive, doc
from sift.errors import ConfigError


@dataclass(frozen=True)
class ListenerSettings:
    """Bounds on sift's own HTTP listener: what one connection may hold before a request."""

    max_connections: int = field(
        default=1000,
        metadata=doc(
            "Open client connections; at the limit the one furthest behind (an idle or half-sent "
            "head, a body behind its schedule, a response its client does not read) is closed, "
            "else the new one gets 503 too_many_connections."
        ),
    )
    head_timeout_s: float = field(
        default=10.0,
        metadata=doc(
            "Deadline for a request head (line + headers), from connect or the previous "
            "response; then 408 request_timeout."
        ),
    )
    max_head_bytes: int = field(
        default=64 << 10,
        metadata=doc(
            "Largest request head (line + headers); beyond it 431 header_too_large.", size=True
        ),
    )
    body_idle_timeout_s: float = field(
        default=10.0,
        metadata=doc(
            "Longest silence while a request body arrives (each read restarts it); then 408 "
            "request_timeout."
        ),
    )
    body_timeout_s: float = field(
        default=10.0,
        metadata=doc(
            "How far a request body may fall behind body_min_bytes_per_s: a body of N bytes has "
            "body_timeout_s + N / body_min_bytes_per_s in all; then 408 request_timeout."
        ),
    )
    body_min_bytes_per_s: int = field(
        default=32 << 10,
        metadata=doc(
            "Slowest rate a request body may arrive at on average (after body_timeout_s of "
            "grace); time sift itself makes a client wait does not count.",
            size=True,
        ),
    )
    write_timeout_s: float = field(
        default=30.0,
        metadata=doc(
            "Longest a response may wait on a client that does not read it (sift's send buffer "
            "full); then the connection is dropped."
        ),
    )
    keep_alive_grace_s: float = field(
        default=1.0,
        metadata=doc(
            "An idle kept-alive connection is not closed to make room for a new one until it "
            "has been idle this long (sooner would race the client's next request); 0: at once."
        ),
    )
    keep_alive_s: int = field(
        default=5, metadata=doc("Idle seconds after which a kept-alive connection is closed.")
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(),
        metadata=doc(
            "Anonymous mode: Host names served besides loopback ones (localhost, 127.0.0.1, ::1)."
        ),
    )
    allowed_origins: tuple[str, ...] = field(
        default=(),
        metadata=doc(
            "Browser origins (scheme://host[:port]) allowed besides loopback ones, in anonymous "
            "mode and on /mcp."
        ),
    )


def check_listener(listener: ListenerSettings, where: str) -> None:
    for fname in ("max_connections", "max_head_bytes", "body_min_bytes_per_s"):
        if getattr(listener, fname) < 1:
            raise ConfigError(f"{where}: listener.{fname}: must be at least 1")
    check_positive(
        listener,
        (
            "head_timeout_s",
            "body_idle_timeout_s",
            "body_timeout_s",
            "write_timeout_s",
            "keep_alive_s",
        ),
        where,
        "listener.",
    )
    if listener.keep_alive_grace_s < 0:
        raise ConfigError(f"{where}: listener.keep_alive_grace_s: must be 0 or more")
    for origin in listener.allowed_origins:
        if not re.fullmatch(r"https?://[^/\s]+", origin):
            raise ConfigError(
                f"{where}: listener.allowed_origins: bad origin {origin!r}; use scheme://host[:port]"
            )
