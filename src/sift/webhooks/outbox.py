"""``enqueue``: store one webhook event for delivery (the durable outbox).

The event is written to the store before anything is sent (``sift.store.webhooks``), so it
survives a restart; the deliverer (``deliverer.Deliverer``) sends it — at once when it runs
on this node and is told (``notify``), else at its next poll — and retries it. Its JSON is
serialised once, here, and sent byte for byte on every attempt, so a signature always
covers exactly the bytes the receiver gets.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from sift.errors import BadRequest
from sift.jsonio import dumps
from sift.store.base import BatchStore
from sift.store.outbox import outbox_of
from sift.store.webhooks import SOURCES, NewDelivery, Outbox, Source


def new_message_id() -> str:
    """A webhook-id: ``msg_`` + 32 hex digits (no full stop, as the signature scheme asks)."""
    return "msg_" + secrets.token_hex(16)


def new_delivery(
    *,
    owner: str,
    source: Source,
    source_id: str,
    url: str,
    secret: str,
    event: Mapping[str, Any],
    now: int,
) -> NewDelivery:
    """The row ``enqueue`` stores (also used to fire a job's webhook)."""
    if source not in SOURCES:
        raise BadRequest(f"a webhook source is one of {', '.join(SOURCES)}")
    if not isinstance(event.get("type"), str):
        raise BadRequest("a webhook event needs a string type")
    return NewDelivery(
        id=new_message_id(),
        owner=owner,
        source=source,
        source_id=source_id,
        url=url,
        secret=secret,
        event=dumps(dict(event)).decode(),
        created_at=now,
    )


async def enqueue(
    store: BatchStore,
    *,
    owner: str,
    source: Source,
    source_id: str,
    url: str,
    secret: str,
    event: Mapping[str, Any],
    now: int | None = None,
    notify: Callable[[], None] | None = None,
) -> str:
    """Store ``event`` for delivery to ``url``, signed with ``secret``, sent under the egress
    policy of the caller ``owner``; returns its delivery id (the ``webhook-id`` of every
    attempt). ``url`` was checked against the owner's policy when it was given (a watch's or
    a job's creation); every attempt is checked again when it connects. ``notify``: the
    deliverer's, to send at once rather than at its next poll."""
    delivery = new_delivery(
        owner=owner,
        source=source,
        source_id=source_id,
        url=url,
        secret=secret,
        event=event,
        now=int(time.time()) if now is None else now,
    )
    return await enqueue_to(outbox_of(store), delivery, notify)


async def enqueue_to(
    outbox: Outbox, delivery: NewDelivery, notify: Callable[[], None] | None = None
) -> str:
    """Store ``delivery`` (``new_delivery``'s) in ``outbox``, then ``notify``; its id."""
    await outbox.add(delivery)
    if notify is not None:
        notify()
    return delivery.id
