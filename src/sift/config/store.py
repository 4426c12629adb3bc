"""``[store]``: where batch jobs live, the embedded SQLite (default) or a shared PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass, field

from sift.config.values import check_positive, doc
from sift.errors import ConfigError


@dataclass(frozen=True)
class StoreSettings:
    """Where batch jobs live: the embedded SQLite (default) or a shared PostgreSQL."""

    url: str = field(
        default="",
        metadata=doc(
            "PostgreSQL URL of the batch job store shared by several sift nodes "
            "(postgresql://user@host/db); empty: the embedded SQLite in data_dir."
        ),
    )
    pool_size: int = field(
        default=8,
        metadata=doc("PostgreSQL connections per node (the pool's maximum)."),
    )
    connect_timeout_s: float = field(
        default=5.0,
        metadata=doc(
            "How long a request waits for a PostgreSQL connection before 503 store_unavailable."
        ),
    )
    lease_s: float = field(
        default=30.0,
        metadata=doc(
            "PostgreSQL store: a claimed target's lease; a node silent this long loses it and "
            "another node fetches the target again."
        ),
    )
    renew_s: float = field(
        default=5.0,
        metadata=doc(
            "PostgreSQL store: how often a node renews its leases and reaps expired ones "
            "(also how soon a cancel reaches the node fetching the job)."
        ),
    )
    max_stalls: int = field(
        default=3,
        metadata=doc(
            "PostgreSQL store: a target whose node was lost this many times fails as interrupted."
        ),
    )
    node_id: str = field(
        default="",
        metadata=doc(
            "PostgreSQL store: this node's label in claims, for operators "
            "(default host:port:pid); correctness never depends on it."
        ),
    )


def check_store(st: StoreSettings, where: str) -> None:
    if st.url and not st.url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            f"{where}: store.url: expected a postgresql:// URL (or nothing for the embedded "
            "SQLite store)"
        )
    check_positive(
        st, ("pool_size", "connect_timeout_s", "lease_s", "renew_s", "max_stalls"), where, "store."
    )
    if st.renew_s * 2 > st.lease_s:
        raise ConfigError(
            f"{where}: store.renew_s: must be at most half of store.lease_s ({st.lease_s}), "
            "or a slow renewal loses the lease of a healthy node"
        )
