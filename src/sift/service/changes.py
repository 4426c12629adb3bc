"""``changes: true``: compare this fetch with the caller's last snapshot of the URL.

Two hooks around the pipeline, run only for a ``changes`` fetch (an ordinary fetch pays one
attribute test):

1. ``start`` — before the cache: the key's latest snapshot, which also lowers the request's
   max age so no cached copy older than it is served (``track.max_age_for``);
2. ``finish`` — after the render: the compared text (the markdown render with the ``ignore``
   selectors excluded, a second render only when it differs from the one served), the
   ``change`` object, and the snapshot recorded in the history (``sift.store.history``).

The history is keyed by the caller's name, the request's ``tag`` and the normalised URL:
one caller never reads another's. A diff of more than ``INLINE_DIFF_LINES`` lines runs in
the render pool, under the class's render time limit, off the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
from sift.service.validate import Request
from sift.snapshot import Snapshot
from sift.store.history import REMOVED, HistoryLimits, HistoryStore, NewSnapshot, SnapshotRow
from sift.workers import RenderPool

# Diffs of at most this many lines (the longer side, after the common head and tail) run in
# place: a few milliseconds at worst. Longer ones go to the render pool.
INLINE_DIFF_LINES = 1000

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


class ChangeTracker:
    """The service's change tracking over a ``HistoryStore`` (None: refused)."""

    def __init__(
        self, history: HistoryStore | None, settings: HistorySettings, render_pool: RenderPool
    ) -> None:
        self.history = history
        self.settings = settings
        self._limits = HistoryLimits(settings.max_snapshots, settings.max_bytes)
        self._pool = render_pool

    async def start(self, req: Request) -> Tracking:
        """The history key of this request and its latest snapshot."""
        if self.history is None:
            raise BadRequest(
                "changes: this sift keeps no change history here",
                hint="The change history lives in the PostgreSQL store (store.url); run the "
                "fetch through a sift server that has it open.",
            )
        tag = req.opts.tag or ""
        latest = await self.history.latest(req.principal.name, tag, req.target.url)
        return Tracking(req.principal.name, tag, req.target.url, latest)

    async def finish(
        self, tracking: Tracking, req: Request, snap: Snapshot, text_for: TextFor, deadline: float
    ) -> dict[str, Any] | None:
        """The envelope's ``change`` (None for a 429/5xx answer, which is not recorded)."""
        assert self.history is not None  # start() refused otherwise
        if says_nothing(snap.status):
            return None
        text = ""
        if snap.status not in (404, 410):
            text = await text_for(compare_options(req.ropts, req.opts.ignore))
        new = snapshot_of(text, snap.digest, snap.status, snap.fetched_at)
        latest = tracking.latest
        status = status_of(latest, new)
        diff: Diff | None = None
        if status == "changed" and latest is not None:
            old = "" if latest.digest == REMOVED else await self.history.text(latest.digest)
            diff = await self._diff(old or "", text, req, deadline)
        if not _already_seen(latest, new):  # a copy compared before: nothing to write
            await self.history.record(tracking.owner, tracking.tag, tracking.url, new, self._limits)
        return change_of(latest, status, diff)

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
