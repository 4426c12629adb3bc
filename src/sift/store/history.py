"""The change history's rows and the ``HistoryStore`` both backends implement.

A *key* is (owner, tag, url): the caller's identity, the caller's tag ("" for none) and the
normalised URL. Each key holds a short list of snapshots, oldest first; the last one is the
key's *latest* (``latest`` true), the one the next ``changes`` fetch compares against.
Snapshot texts (the rendered markdown compared) are stored once per content digest, shared
by every snapshot that has that text; a text goes when no snapshot refers to it.

Bounds (``HistoryLimits``): at most ``max_snapshots`` per key (the oldest go first), and a
byte budget over all texts: past it the oldest snapshots that are not a key's latest go
first; then, if that is not enough, the latest snapshots least recently seen — but never
one of a watch (tag ``watch:*``: the watch compares its next check against it) nor the one
just recorded.

A 404/410 answer is kept as a tombstone: digest ``REMOVED``, no text.

A ``record`` may be *checked* (``expect``): it writes only if the key's latest snapshot is
still the one the caller compared against, and otherwise writes nothing and answers
``Conflict`` with the latest it found — so a comparison made against a snapshot that another
writer (another node, another process on the same file) has since replaced is never
recorded as if it were current; the caller compares again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Protocol

# The digest of a tombstone: the page answered 404 or 410. No text is stored for it.
REMOVED = "removed"
# Tags of watches' checks (f"watch:{id}"): their latest snapshots are never evicted.
WATCH_TAG_PREFIX = "watch:"
# SQL (SQLite and PostgreSQL alike) true for a row whose tag is not a watch's.
NOT_A_WATCH_SQL = f"substr(tag, 1, {len(WATCH_TAG_PREFIX)}) <> '{WATCH_TAG_PREFIX}'"


@dataclass(frozen=True)
class HistoryLimits:
    """Bounds a ``record`` keeps: snapshots per key, and bytes of texts in all."""

    max_snapshots: int
    max_bytes: int


@dataclass(frozen=True)
class NewSnapshot:
    """What one ``changes`` fetch saw: the compared text's digest and text (``None`` for a
    tombstone), the page's body digest and HTTP status, and when the page was fetched."""

    digest: str
    text: str | None
    body_digest: str
    http_status: int
    fetched_at: int


@dataclass(frozen=True)
class SnapshotRow:
    """A stored snapshot, without its text. ``fetched_at``: when this content was first
    seen; ``seen_at``: when it was last seen (a ``same`` fetch moves it)."""

    id: int
    digest: str
    body_digest: str
    http_status: int
    fetched_at: int
    seen_at: int
    latest: bool


@dataclass(frozen=True)
class Conflict:
    """A checked ``record`` found another latest snapshot than expected (None: the key has
    no history now); nothing was written."""

    latest: SnapshotRow | None


class Unchecked(enum.Enum):
    """``record``'s default ``expect``: write whatever the key's latest is."""

    ANY = "any"


ANY_LATEST: Final = Unchecked.ANY
# What ``record`` checks the key's latest against: a row, None (no history), or nothing.
Expect = SnapshotRow | None | Unchecked


@dataclass(frozen=True)
class HistoryWrite:
    """A ``record`` to make in the same transaction as something else: a watch check's
    snapshot with the check's event (``WatchStore.record_check_and_history``)."""

    owner: str
    tag: str
    url: str
    snap: NewSnapshot
    limits: HistoryLimits
    expect: Expect


class HistoryStore(Protocol):
    """The change history of every caller; SQLite (``sqlite.history``) or PostgreSQL
    (``postgres.history``)."""

    async def latest(self, owner: str, tag: str, url: str) -> SnapshotRow | None:
        """The key's latest snapshot, or None when it has no history."""
        ...

    async def text(self, digest: str) -> str | None:
        """The text stored for ``digest`` (None: a tombstone, or gone)."""
        ...

    async def record(
        self,
        owner: str,
        tag: str,
        url: str,
        snap: NewSnapshot,
        limits: HistoryLimits,
        expect: Expect = ANY_LATEST,
    ) -> SnapshotRow | Conflict:
        """Add ``snap`` as the key's latest; if the latest already has its digest, only
        its ``seen_at``, body digest and status move. Then keep ``limits``. The key's latest
        as written — or, when ``expect`` (a row, or None for no history) is not the key's
        latest now, ``Conflict`` and nothing written. One transaction."""
        ...

    async def snapshots(self, owner: str, tag: str, url: str) -> list[SnapshotRow]:
        """The key's snapshots, oldest first."""
        ...

    async def nbytes(self) -> int:
        """Bytes of stored texts, all keys together (what ``max_bytes`` bounds)."""
        ...

    async def forget(self, owner: str, tag: str) -> int:
        """Delete every snapshot of ``owner`` under ``tag`` (a deleted watch's history, which
        the byte budget never evicts), and the texts no other snapshot has; how many went."""
        ...
