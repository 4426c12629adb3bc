"""One check of a watch: a fresh fetch through the normal pipeline, turned into an event.

The check is ``Service.fetch`` as any caller's fetch (the caller's class, egress policy,
robots.txt, render), with the options the watch was created with plus what a watch sets
itself: ``max_age_s=0`` (never a cached copy) and, with change tracking
(docs/watches.md "What changed"), ``changes=True``, ``tag="watch:<id>"`` (the watch's own
history) and its ``ignore`` selectors. The event keeps the envelope's ``change`` as it is.

The check's history snapshot is not written by the fetch: ``Service.fetch`` leaves it to
the scheduler (``ChangeTracker.take_deferred``), which writes it with the check's event in
one transaction — the event that reports a change and the snapshot it compared are durable
together, and a check's slot is free before either is written.

A check fails when the fetch raises (``"<code>: <message>"`` and the hint are kept) or the
upstream answers 429 or 5xx (``upstream_status``): nothing is compared, no webhook is sent,
and the watch is simply checked again at its next due time.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from sift.errors import SiftError
from sift.jsonio import dumps, loads
from sift.options import FetchOptions, parse_options
from sift.principal import Principal
from sift.service import Service
from sift.service.changes import Deferred
from sift.store.history import WATCH_TAG_PREFIX
from sift.store.views import error_text
from sift.store.watches import Watch, WatchEvent

FAILED_STATUS_MIN: Final = 500
_UPSTREAM_STATUS_HINT: Final = (
    "The site answered with an error; the watch checks again at its next interval."
)


def check_options(watch: Watch) -> FetchOptions:
    """The options of one check of ``watch`` (see the module docstring)."""
    return _check_options(watch.id, watch.url, watch.options, watch.ignore)


# A watch's options never change: parsed once per watch, not at every check (measured: a
# parse was about a tenth of a check's CPU in this process). Frozen options, safe to share.
@functools.lru_cache(maxsize=4096)
def _check_options(watch_id: str, url: str, options: str, ignore: str) -> FetchOptions:
    data: dict[str, Any] = {**loads(options), "url": url, "max_age_s": 0}
    data.update(changes=True, ignore=list(loads(ignore)))
    # The watch's own history tag is set here, after parsing: callers may not use the
    # reserved prefix, so no caller can write into (or read) a watch's history.
    return dataclasses.replace(parse_options(data), tag=f"{WATCH_TAG_PREFIX}{watch_id}")


def is_failed_status(status: Any) -> bool:
    return isinstance(status, int) and (status == 429 or status >= FAILED_STATUS_MIN)


def event_from(watch: Watch, now: float, envelope: Mapping[str, Any]) -> WatchEvent:
    """The event of a check whose fetch answered ``envelope``."""
    status = envelope.get("status")
    http_status = status if isinstance(status, int) else None
    if is_failed_status(status):
        return WatchEvent(
            watch.id,
            0,
            now,
            "failed",
            http_status,
            None,
            f"upstream_status: the page answered HTTP {status}",
            _UPSTREAM_STATUS_HINT,
        )
    change = envelope.get("change")
    text = dumps(change).decode() if isinstance(change, dict) else None
    return WatchEvent(watch.id, 0, now, "ok", http_status, text)


def failed_event(watch: Watch, now: float, exc: SiftError) -> WatchEvent:
    return WatchEvent(watch.id, 0, now, "failed", None, None, error_text(exc), exc.hint)


class Checked(NamedTuple):
    """What one check saw: its event, the envelope (None when the fetch raised), and the
    history write it left to the scheduler (None: nothing to write)."""

    event: WatchEvent
    envelope: dict[str, Any] | None
    pending: Deferred | None


async def run_check(service: Service, principal: Principal, watch: Watch, now: float) -> Checked:
    """Fetch once."""
    opts = check_options(watch)
    try:
        envelope = await service.fetch(principal, opts)
    except SiftError as exc:
        return Checked(failed_event(watch, now, exc), None, None)
    pending = service.changes.take_deferred(principal.name, opts.tag or "")
    return Checked(event_from(watch, now, envelope), envelope, pending)
