"""What a watch hands to webhooks when a check saw a change.

``change_event`` builds the event of the shared contract (docs/watches.md "Webhooks"):
``{"type": "watch.changed", "watch_id", "url", "change", "fetched_at"}``. ``hand_over`` is
the one place a watch's change reaches the webhook outbox.
"""

from __future__ import annotations

from typing import Any

from sift.store import BatchStore
from sift.store.watches import Watch
from sift.webhooks.outbox import enqueue


def change_event(watch: Watch, change: dict[str, Any], fetched_at: Any) -> dict[str, Any]:
    return {
        "type": "watch.changed",
        "watch_id": watch.id,
        "url": watch.url,
        "change": change,
        "fetched_at": fetched_at,
    }


async def hand_over(store: BatchStore, watch: Watch, event: dict[str, Any]) -> str | None:
    """Queue ``event`` for the watch's webhook; the delivery id (None: no webhook). Delivery
    is the outbox's business (``sift.webhooks``): it never holds up a check."""
    if not watch.webhook:
        return None
    return await enqueue(
        store,
        owner=watch.caller,
        source="watch",
        source_id=watch.id,
        url=watch.webhook,
        secret=watch.webhook_secret,
        event=event,
    )
