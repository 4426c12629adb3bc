"""Stage 4, render: a page entry becomes its rendered ``Snapshot``.

From the render cache when this (digest, render options) was rendered before; else in the
render pool, off the event loop under its time and memory limits (only small plain text is
rendered in place, ``snapshot.renders_inline``), one render per key at a time (single
flight), and the result stored. A render that timed out or ran out of memory is answered
from memory for a while instead of taking a worker again.

Renders wait for a worker in the pool's fair queue under the caller's name, dropped if still
queued at the request's deadline. So the single flight is per caller as well: a render
shared across callers would sit in its first caller's queue, under that caller's deadline,
and another caller joining it could wait behind that caller's backlog. A flight nobody waits
for any more (every client hung up) is cancelled: queued, it leaves the queue; running, its
worker is killed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sift.dcache import PageEntry
from sift.errors import RenderFailed, SnapshotGone
from sift.jsonio import loads
from sift.render import RenderOptions
from sift.service.cache import PageCache
from sift.service.flight import Flights
from sift.snapshot import DEFAULT_RENDER_TIMEOUT_S, Snapshot, render_call, renders_inline
from sift.workers import RenderPool

# Renders that timed out or ran out of memory are answered from memory for this long.
RENDER_FAILURE_TTL_S = 60
RENDER_FAILURES_MAX = 1024


class Renderer:
    """Renders through ``render_pool``, caching in ``cache``, sharing runs in ``flights``."""

    def __init__(self, render_pool: RenderPool, cache: PageCache, flights: Flights) -> None:
        self.render_pool = render_pool
        self._cache = cache
        self._flights = flights
        self._render_failures: dict[tuple[str, str, float], tuple[int, RenderFailed]] = {}

    async def snapshot(
        self,
        page: PageEntry,
        ropts: RenderOptions,
        render_key: str,
        now: int,
        body: bytes | None,
        new_body: bool = False,
        *,
        caller: str = "",
        deadline: float | None = None,
    ) -> Snapshot | None:
        """The rendered snapshot of ``page``: hot cache, render cache, or a fresh render.

        ``None`` only when nothing is cached and ``body`` was not given and is gone. With
        ``new_body`` (just stored for the first time) the render cache is not asked: no
        render of that digest can exist there yet. A fresh render takes ``caller``'s turn in
        the render queue and is dropped if still queued at ``deadline`` (event-loop time).
        """
        if new_body:
            snap = self._cache.hot_render(page.digest, render_key)
        else:
            snap = await self._cache.render(page.digest, render_key, now)
        if snap is None:
            if body is None:
                body = await self._cache.body(page.digest, now)
                if body is None:
                    return None
            snap = await self._flights.once(
                ("render", page.digest, render_key, caller),
                lambda: self._render_and_store(
                    page, body, ropts, render_key, now, caller, deadline
                ),
                cancel_abandoned=True,
            )
        if snap.fetched_at != page.fetched_at:
            snap = replace(snap, fetched_at=page.fetched_at)  # revalidated since it was rendered
        if page.status in (429, 503):
            retry_after = loads(page.headers_json or "{}").get("retry_after")
            if retry_after != snap.retry_after:
                snap = replace(snap, retry_after=retry_after)
        actions = _actions(page)
        if actions != snap.actions:  # this load's steps (a render may be an older load's)
            snap = replace(snap, actions=actions)
        if '"screenshot"' in page.headers_json:  # a browser load with a screenshot
            shot = loads(page.headers_json).get("screenshot")
            if shot != snap.screenshot:
                snap = replace(snap, screenshot=shot)
        return snap

    async def snapshot_at(
        self,
        page_key: str,
        digest: str,
        ropts: RenderOptions,
        render_key: str,
        now: int,
        *,
        caller: str = "",
        deadline: float | None = None,
    ) -> Snapshot:
        """A continuation read: exactly the snapshot at ``digest``, never a newer copy."""
        snap = await self._cache.render(digest, render_key, now)
        if snap is not None:
            return snap
        page = await self._cache.page(page_key, now)
        if page is not None and page.digest == digest:
            found = await self.snapshot(
                page, ropts, render_key, now, body=None, caller=caller, deadline=deadline
            )
            if found is not None:
                return found
        raise SnapshotGone(f"snapshot {digest} of this URL is no longer cached")

    async def _render_and_store(
        self,
        page: PageEntry,
        body: bytes,
        ropts: RenderOptions,
        render_key: str,
        now: int,
        caller: str,
        deadline: float | None,
    ) -> Snapshot:
        charset = loads(page.headers_json or "{}").get("charset")
        args = (body, page.content_type, page.final_url, ropts, charset)
        if renders_inline(page.content_type, body, charset):
            rendered = render_call(*args)
        else:
            # A page that timed out or ran out of memory fails the same way for a while
            # without taking a render worker again (it would hold one for the whole limit).
            timeout_s = ropts.timeout_s or DEFAULT_RENDER_TIMEOUT_S
            failed_key = (page.digest, render_key, timeout_s)
            failed = self._render_failures.get(failed_key)
            if failed is not None and failed[0] > now:
                raise type(failed[1])(failed[1].message, hint=failed[1].hint)
            try:
                rendered = await self.render_pool.run(
                    render_call, *args, timeout_s=timeout_s, caller=caller, deadline=deadline
                )
            except RenderFailed as exc:
                if len(self._render_failures) >= RENDER_FAILURES_MAX:
                    self._render_failures.pop(next(iter(self._render_failures)))
                self._render_failures[failed_key] = (now + RENDER_FAILURE_TTL_S, exc)
                raise
        snap = Snapshot(
            url=page.url,
            final_url=page.final_url,
            status=page.status,
            content_type=page.content_type,
            fetched_at=page.fetched_at,
            digest=page.digest,
            rendered=rendered,
            content_bytes=rendered.content.encode(),
            actions=_actions(page),
        )
        await self._cache.store_render(render_key, snap, now)
        return snap


def _actions(page: PageEntry) -> list[dict[str, Any]] | None:
    """The page actions' outcomes a browser load with actions kept in its page entry."""
    if '"actions"' not in (page.headers_json or ""):  # most pages: no parse on the hot path
        return None
    actions: list[dict[str, Any]] | None = loads(page.headers_json or "{}").get("actions")
    return actions
