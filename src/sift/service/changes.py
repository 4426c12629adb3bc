"""``changes: true``: compare this fetch with the caller's last snapshot of the URL.

Two hooks around the pipeline, run only for a ``changes`` fetch (an ordinary fetch pays one
attribute test):

1. ``start`` — before the cache: the key's latest snapshot, which also lowers the request's
   max age so no cached copy older than it is served (``track.max_age_for``);
2. ``finish`` — after the render: the compared text (the markdown render with the ``ignore``
   selectors excluded, a second render only when it differs from the one served), the
   ``change`` object, and the snapshot recorded in the history (``sift.store.history``) —
   except a watch check's (tag ``watch:*``), which is left to the watch scheduler
   (``take_deferred``): it writes the snapshot with the check's event in one transaction.

The history is keyed by the caller's name, the request's ``tag`` and the normalised URL:
one caller never reads another's. A diff of more than ``INLINE_DIFF_LINES`` lines runs in
the render pool, under the class's render time limit, off the event loop.

The memo (``history.memo_max_bytes``): each key's latest snapshot and its text as this node
last wrote them. A fetch with ``max_age_s`` 0 (every watch check) compares against
the memo, so it reads nothing from the store before the fetch and, on a change, not the
previous text either; its write is *checked* (``HistoryStore.record``'s ``expect``): if
another writer replaced the latest meanwhile (another node, a deleted watch, an eviction),
nothing is written and the fetch compares again against the latest the store has. Other
fetches read the store as before (their cache rule, ``max_age_for``, depends on the latest),
and their writes are checked the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from sift.changes.diff import Diff, trim, unified_trimmed
from sift.changes.track import (
    change_of,
    compare_options,
    says_nothing,
    snapshot_of,
    status_of,
)
from sift.config import HistorySettings
from sift.errors import BadRequest, RenderFailed, RenderQueueTimeout, RenderUnavailable
from sift.render import RenderOptions
from sift.service.hotcache import BytesLRU
from sift.service.validate import Request
from sift.snapshot import Snapshot
from sift.store.history import (
    ANY_LATEST,
    REMOVED,
    WATCH_TAG_PREFIX,
    Conflict,
    HistoryLimits,
    HistoryStore,
    HistoryWrite,
    NewSnapshot,
    SnapshotRow,
)
from sift.workers import RenderPool

# Diffs of at most this many lines (the longer side, after the common head and tail) run in
# place: a few milliseconds at worst. Longer ones go to the render pool.
INLINE_DIFF_LINES = 1000
# Checked writes before the last one, which writes whatever the latest then is (as a
# fetch did before writes were checked): other writers cannot keep a fetch going forever.
CHECKED_WRITES = 3
# What the memo counts for one key besides its text (the row, the key, the entry).
_MEMO_ENTRY_BYTES = 512

Key = tuple[str, str, str]  # (owner, tag, url)

TextFor = Callable[[RenderOptions], Awaitable[str]]


class Tracking(NamedTuple):
    """One ``changes`` fetch's history key and the snapshot it compares against."""

    owner: str
    tag: str
    url: str
    latest: SnapshotRow | None


def _already_seen(latest: SnapshotRow | None, new: NewSnapshot) -> bool:
    """True when recording ``new`` would change nothing: the same text from the same copy
    (a cache hit on the copy the latest snapshot was last seen in)."""
    return (
        latest is not None
        and latest.digest == new.digest
        and latest.seen_at >= new.fetched_at
        and latest.body_digest == new.body_digest
        and latest.http_status == new.http_status
    )


@dataclass(frozen=True)
class Deferred:
    """A history write still to make: the snapshot of a ``changes`` fetch, checked against
    ``latest`` (what its change was computed from), and what a new comparison needs."""

    write: HistoryWrite
    latest: SnapshotRow | None
    req: Request
    deadline: float
    attempt: int = 0


class KnownLatest(NamedTuple):
    """A key's latest snapshot as this node last saw it, and its text (None: not kept)."""

    latest: SnapshotRow
    text: str | None


def _memo_bytes(memo: KnownLatest) -> int:
    return _MEMO_ENTRY_BYTES + len(memo.text or "")


class ChangeTracker:
    """The service's change tracking over a ``HistoryStore`` (None: refused)."""

    def __init__(
        self, history: HistoryStore | None, settings: HistorySettings, render_pool: RenderPool
    ) -> None:
        self.history = history
        self.settings = settings
        self._limits = HistoryLimits(settings.max_snapshots, settings.max_bytes)
        self._pool = render_pool
        self._memo: BytesLRU[Key, KnownLatest] = BytesLRU(
            max_bytes=settings.memo_max_bytes, size=_memo_bytes
        )
        # Watch checks' writes, until their scheduler takes them (one per watch at most).
        self._deferred: dict[tuple[str, str], Deferred] = {}

    async def start(self, req: Request) -> Tracking:
        """The history key of this request and its latest snapshot."""
        if self.history is None:
            raise BadRequest(
                "changes: this sift keeps no change history here",
                hint="The change history lives in the PostgreSQL store (store.url); run the "
                "fetch through a sift server that has it open.",
            )
        tag = req.opts.tag or ""
        key = (req.principal.name, tag, req.target.url)
        memo = self._memo.get(key) if req.opts.max_age_s == 0 else None
        latest = memo.latest if memo is not None else await self.history.latest(*key)
        return Tracking(*key, latest)

    async def finish(
        self, tracking: Tracking, req: Request, snap: Snapshot, text_for: TextFor, deadline: float
    ) -> dict[str, Any] | None:
        """The envelope's ``change`` (None for a 429/5xx answer, which is not recorded).
        Returned once the snapshot is recorded (committed): a change reported is never lost
        — except a watch check's, which is left to its scheduler (``take_deferred``)."""
        assert self.history is not None  # start() refused otherwise
        if says_nothing(snap.status):
            return None
        text = ""
        if snap.status not in (404, 410):
            text = await text_for(compare_options(req.ropts, req.opts.ignore))
        key = (tracking.owner, tracking.tag, tracking.url)
        memo = self._memo.get(key)
        known = None
        if memo is not None and memo.text is not None and memo.latest.digest != REMOVED:
            known = (memo.text, memo.latest.digest)
        new = snapshot_of(text, snap.digest, snap.status, snap.fetched_at, known)
        first = Deferred(
            HistoryWrite(*key, new, self._limits, tracking.latest), tracking.latest, req, deadline
        )
        pending: Deferred | None
        change, pending = await self._compare(first, tracking.latest)
        if tracking.tag.startswith(WATCH_TAG_PREFIX):
            if pending is not None:
                self._deferred[(tracking.owner, tracking.tag)] = pending
            return change
        while pending is not None:
            written = await self.history.record(*key, new, self._limits, pending.write.expect)
            if not isinstance(written, Conflict):
                self.written(pending, written)
                return change
            change, pending = await self.again(pending, written)
        return change

    def take_deferred(self, owner: str, tag: str) -> Deferred | None:
        """The history write a watch check (tag ``watch:*``) left for its scheduler, which
        writes it with the check's event in one transaction (``WatchStore.
        record_check_and_history``), then calls ``written`` — or ``again`` on a conflict."""
        return self._deferred.pop((owner, tag), None)

    def written(self, pending: Deferred, row: SnapshotRow) -> None:
        """``pending`` was written as ``row``: the key's latest now."""
        write = pending.write
        self._memo.put((write.owner, write.tag, write.url), KnownLatest(row, write.snap.text))

    async def again(
        self, pending: Deferred, conflict: Conflict
    ) -> tuple[dict[str, Any], Deferred | None]:
        """Another writer moved the key on (``conflict``): compare with the latest it found.
        The change, and the write to make (None: nothing to write)."""
        write = pending.write
        self._memo.pop((write.owner, write.tag, write.url))
        return await self._compare(pending, conflict.latest, pending.attempt + 1)

    async def _compare(
        self, pending: Deferred, latest: SnapshotRow | None, attempt: int = 0
    ) -> tuple[dict[str, Any], Deferred | None]:
        """The change from ``latest`` to ``pending``'s snapshot, and the write that records
        it, checked against ``latest`` (the last of ``CHECKED_WRITES + 1`` unchecked); None
        when there is nothing to write (a copy compared before)."""
        write, new = pending.write, pending.write.snap
        status = status_of(latest, new)
        diff: Diff | None = None
        if status == "changed" and latest is not None:
            old = await self._text_of((write.owner, write.tag, write.url), latest)
            diff = await self._diff(old, new.text or "", pending.req, pending.deadline)
        change = change_of(latest, status, diff)
        if _already_seen(latest, new):
            return change, None
        expect = latest if attempt < CHECKED_WRITES else ANY_LATEST
        if expect is write.expect and attempt == pending.attempt:
            return change, pending  # the first comparison: written as built
        again = HistoryWrite(write.owner, write.tag, write.url, new, write.limits, expect)
        return change, Deferred(again, latest, pending.req, pending.deadline, attempt)

    async def _text_of(self, key: Key, latest: SnapshotRow) -> str:
        """The text of ``latest`` (the memo's, else the store's; "" for a tombstone)."""
        assert self.history is not None
        if latest.digest == REMOVED:
            return ""
        memo = self._memo.get(key)
        if memo is not None and memo.latest.digest == latest.digest and memo.text is not None:
            return memo.text
        return await self.history.text(latest.digest) or ""

    async def _diff(self, old: str, new: str, req: Request, deadline: float) -> Diff:
        trimmed = trim(old, new)
        max_lines, max_bytes = self.settings.diff_max_lines, self.settings.diff_max_bytes
        if trimmed.lines <= INLINE_DIFF_LINES:
            return unified_trimmed(trimmed, max_lines=max_lines, max_bytes=max_bytes)
        try:
            return await self._pool.run(
                unified_trimmed,
                trimmed,
                max_lines,
                max_bytes,
                timeout_s=req.limits.render_timeout_s,
                caller=req.principal.name,
                deadline=deadline,
            )
        except (RenderFailed, RenderQueueTimeout, RenderUnavailable):
            # The change is known (the digests differ); only its diff did not finish in time.
            return Diff("", 0, 0, True)
