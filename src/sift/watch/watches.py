"""Watches as a caller sees them: create, list, show (with recent events), delete — for the
API, MCP, the CLI (through the server) and the console.

Every method takes the caller (``Principal``); ``create`` takes ``now`` (unix seconds). A
watch that does not exist and another caller's watch raise the same ``NotFound`` with the
same message (``store.watches.watch_not_found``).
"""

from __future__ import annotations

import random
import secrets
from typing import Any, Final

from sift.batch.submit import egress_check
from sift.config import Settings
from sift.errors import NotFound
from sift.jsonio import dumps
from sift.principal import Principal
from sift.service import Service
from sift.store import BatchStore
from sift.store.history import WATCH_TAG_PREFIX
from sift.store.watches import Watch
from sift.watch.scheduler import Scheduler
from sift.watch.spec import new_webhook_secret, parse_watch
from sift.watch.views import event_view, watch_view

# Events one GET /v1/watches/{id} may ask for (at most watch.events_kept are kept anyway).
MAX_EVENTS_LIMIT: Final = 1000


class Watches:
    """The watch operations over one store; ``scheduler`` (when this node runs one) is
    woken by a creation so a new watch's first check is not a tick late."""

    def __init__(
        self,
        settings: Settings,
        store: BatchStore,
        service: Service,
        scheduler: Scheduler | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.service = service
        self.scheduler = scheduler
        self._rng = rng or random.Random()

    async def create(self, principal: Principal, body: Any, now: float) -> dict[str, Any]:
        """Validate ``body`` (``watch.spec``) and store the watch; its view, plus
        ``webhook_secret`` (shown this once) when it has a webhook. Raises ``BadRequest``,
        ``Blocked`` (a URL the caller's policy refuses), ``QuotaExceeded`` (class limit)."""
        limits = self.settings.classes.get(principal.caller_class)
        spec = parse_watch(body, principal, limits, egress_check(self.service, principal))
        first_in = self._rng.uniform(0.0, min(self.settings.watch.jitter_s, spec.every_s))
        watch = Watch(
            id=secrets.token_hex(12),
            caller=principal.name,
            caller_class=principal.caller_class,
            url=spec.url,
            every_s=spec.every_s,
            options=spec.options,
            ignore=_json_list(spec.ignore),
            webhook=spec.webhook,
            webhook_secret=new_webhook_secret() if spec.webhook else "",
            created_at=now,
            next_due=now + first_in,
        )
        await self.store.watches.create_watch(watch, limits.max_watches)
        if self.scheduler is not None:
            self.scheduler.notify()
        view = watch_view(watch)
        if watch.webhook:
            view["webhook_secret"] = watch.webhook_secret
        return view

    async def list(self, principal: Principal) -> list[dict[str, Any]]:
        return [watch_view(w) for w in await self.store.watches.watches_of(principal.name)]

    async def get(self, principal: Principal, watch_id: str, events: int) -> dict[str, Any]:
        """The watch's view with ``events``: its newest ``events`` check events, newest
        first (each with its change and diff, or its error)."""
        watch = await self.store.watches.owned_watch(watch_id, principal.name)
        rows = await self.store.watches.watch_events(watch_id, events)
        return {**watch_view(watch), "events": [event_view(e) for e in rows]}

    async def owns(self, principal: Principal, watch_id: str) -> bool:
        """Whether the watch is there and ``principal``'s (its delivery log is theirs)."""
        try:
            await self.store.watches.owned_watch(watch_id, principal.name)
        except NotFound:
            return False
        return True

    async def delete(self, principal: Principal, watch_id: str) -> dict[str, Any]:
        """Delete the watch, its events and its change history (which the history's byte
        budget never evicts while the watch lives: gone with it, or it would stay forever)."""
        await self.store.watches.delete_watch(watch_id, principal.name)
        history = self.service.changes.history
        if history is not None:
            await history.forget(principal.name, f"{WATCH_TAG_PREFIX}{watch_id}")
        return {"id": watch_id, "deleted": True}


def _json_list(items: tuple[str, ...]) -> str:
    return dumps(list(items)).decode()
