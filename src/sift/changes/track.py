"""What a ``changes`` fetch compares, what it answers and what it records.

- The compared text is the page rendered as markdown with the caller's ``selector``,
  ``main_content`` and ``exclude``, plus the ``ignore`` selectors excluded
  (``compare_options``): the content returned is still the page as asked.
- ``change_of`` gives the envelope's ``change``: ``new`` (no history), ``same`` (same text
  digest), ``changed`` (with the diff), ``removed`` (the page answers 404/410 and did not
  before). A 429 or 5xx answer says nothing about the page: no change, nothing recorded.
- The cache rule: a ``changes`` fetch may be served a cached copy only if it was fetched no
  earlier than the last snapshot (``max_age_for``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Literal

from sift.changes.diff import Diff
from sift.render import RenderOptions
from sift.store.history import REMOVED, NewSnapshot, SnapshotRow

ChangeStatus = Literal["new", "same", "changed", "removed"]
GONE_STATUSES = frozenset({404, 410})


def compare_options(ropts: RenderOptions, ignore: tuple[str, ...]) -> RenderOptions:
    """The render whose markdown a ``changes`` fetch compares."""
    if ropts.format == "markdown" and not ignore:
        return ropts  # the render the caller gets: nothing more to render
    return dataclasses.replace(ropts, format="markdown", exclude=(*ropts.exclude, *ignore))


def says_nothing(http_status: int) -> bool:
    """A throttled or failing upstream's answer is not the page: nothing to compare."""
    return http_status == 429 or http_status >= 500


def max_age_for(max_age_s: int, latest: SnapshotRow | None, now: int) -> int:
    """``max_age_s`` lowered so a cached copy older than ``latest`` is never fresh enough
    (``service.cache.is_fresh``: fresh while ``now - fetched_at < max_age_s``)."""
    if latest is None:
        return max_age_s
    return max(0, min(max_age_s, now - latest.seen_at + 1))


def text_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def snapshot_of(
    text: str,
    body_digest: str,
    http_status: int,
    fetched_at: int,
    known: tuple[str, str] | None = None,
) -> NewSnapshot:
    """What this fetch records: the compared text, or a tombstone for 404/410. ``known``: a
    text and its digest seen before; when ``text`` equals it, its digest is not computed
    again (a watch's unchanged page: one string comparison instead of a hash)."""
    if http_status in GONE_STATUSES:
        return NewSnapshot(REMOVED, None, body_digest, http_status, fetched_at)
    digest = known[1] if known is not None and known[0] == text else text_digest(text)
    return NewSnapshot(digest, text, body_digest, http_status, fetched_at)


def status_of(latest: SnapshotRow | None, snap: NewSnapshot) -> ChangeStatus:
    if snap.digest == REMOVED:
        return "same" if latest is not None and latest.digest == REMOVED else "removed"
    if latest is None:
        return "new"
    return "same" if latest.digest == snap.digest else "changed"


def change_of(
    latest: SnapshotRow | None, status: ChangeStatus, diff: Diff | None
) -> dict[str, Any]:
    """The envelope's ``change`` object (docs/watches.md, "What changed")."""
    return {
        "status": status,
        "previous_fetched_at": latest.seen_at if latest is not None else None,
        "previous_digest": latest.body_digest if latest is not None else None,
        "diff": diff.text if diff is not None else None,
        "added": diff.added if diff is not None else 0,
        "removed": diff.removed if diff is not None else 0,
        "truncated": diff.truncated if diff is not None else False,
    }
