"""Stage 2, cache: page entries and rendered snapshots, looked up, revalidated and stored.

Two levels. The SQLite content cache (``dcache``) holds raw bodies (content-addressed),
page entries (per normalised URL and egress scope) and rendered snapshots (per body digest
and render options). In front of it, a small in-process LRU (``hotcache.py``) of page
entries and rendered snapshots keeps the cache-hit path free of database round trips; it is
coherent because this process is the only writer and snapshots are immutable per key.

In front of both, ``ResponseCache`` keeps the serialized answers to repeated identical
requests (``Service.fetch_json``) for as long as the page they were served from stays fresh.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import replace
from email.utils import parsedate_to_datetime
from typing import Any, Literal, NamedTuple

from sift.browser.actions import actions_key
from sift.browser.shot import Shot, ShotOrder
from sift.dcache import DB, AsyncDB, PageEntry
from sift.fetch import FetchPolicy, FetchResult, egress_scope
from sift.jsonio import dumps, loads
from sift.options import Engine, FetchOptions
from sift.principal import Principal
from sift.render import RenderOptions
from sift.service.hotcache import BytesLRU, HotCache
from sift.snapshot import Snapshot

CacheState = Literal["hit", "miss", "revalidated"]


def page_key_for(
    normalized_url: str,
    opts: FetchOptions,
    policy: FetchPolicy,
    engine: Engine,
    private: str = "",
    shot: ShotOrder | None = None,
) -> str:
    """The page entry's key: egress scope (and robots, engine) first, then the URL."""
    # The whole egress scope is part of the key (private access and ranges, ports,
    # redirect count, size limits; and whether robots.txt was obeyed): a page fetched
    # under one policy is never served to a caller whose policy would have refused a
    # hop of it (a redirect to a port it may not use, more redirects, a larger body).
    # Keying by the policy is simpler and more correct than recording the hops and
    # re-checking them: a re-check without I/O cannot redo what the guard decided on
    # resolved addresses, and pages per policy cost little (bodies are shared, by
    # digest). Continuations (digest) and batch targets use the same key.
    # So is the engine: an HTTP body is never served for a browser request or the
    # reverse (and wait_for changes what the browser reads; so do page actions, keyed by
    # the digest of their canonical serialization).
    suffix = "" if opts.robots else "-norobots"
    if engine == "browser":
        suffix += "-browser"
        if opts.wait_for:  # hashed: the key's first space must stay the URL's separator
            suffix += "-wait:" + hashlib.sha256(opts.wait_for.encode()).hexdigest()[:16]
        if opts.actions:
            suffix += "-actions:" + actions_key(opts.actions)
        if shot is not None:  # a load with a screenshot: its spec and the class's bounds
            suffix += "-shot:" + shot.key()
    # A page fetched with a caller's headers or cookies is that caller's alone: ``private``
    # (``Credentials.tag``: caller and credentials, HMAC'd) keys its entry, renders and
    # single flight apart from everyone else's and from the same caller's other logins.
    if private:
        suffix += "-private:" + private
    return f"{egress_scope(policy)}{suffix} {normalized_url}"


def render_key_for(ropts: RenderOptions, page_key: str) -> str:
    """The rendered snapshot's key beside its body digest: render options, then the page."""
    return f"{_render_options_key(ropts)} {page_key}"


@functools.lru_cache(maxsize=4096)
def _render_options_key(options: RenderOptions) -> str:
    return options.cache_key()


def is_fresh(page: PageEntry, now: int, max_age_s: int) -> bool:
    """Young enough to serve as is. A throttled or failing upstream (429, 5xx) is asked
    again rather than served from the cache: its answer says "not now", not "this is the
    page"."""
    return now - page.fetched_at < max_age_s and _cacheable(page.status)


def _cacheable(status: int) -> bool:
    return status != 429 and status < 500


class PageCache:
    """Both levels of the content cache, for pages and their rendered snapshots."""

    def __init__(self, adb: AsyncDB, hot_bytes: int) -> None:
        self.adb = adb
        self.hot = HotCache(max_bytes=hot_bytes)

    async def page(self, page_key: str, now: int) -> PageEntry | None:
        return self.hot.page(page_key) or await self.adb.run(DB.get_page, page_key, now)

    def keep_page(self, page_key: str, page: PageEntry) -> None:
        """Hold a page entry read from the database (served from it) in memory."""
        self.hot.put_page(page_key, page)

    async def body(self, digest: str, now: int) -> bytes | None:
        body: bytes | None = await self.adb.run(DB.get_body, digest, now)
        return body

    async def revalidate(
        self, page_key: str, stale: PageEntry, now: int
    ) -> tuple[PageEntry, bytes] | None:
        """A 304: the stored entry, fresh again, and its body; ``None`` if the body is gone."""
        body = await self.adb.run(DB.get_body, stale.digest, now)
        if body is None:
            return None
        page = replace(stale, fetched_at=now)
        await self.adb.run(DB.put_page, page_key, page, now)
        self.hot.put_page(page_key, page)
        return page, body

    async def store(
        self, page_key: str, result: FetchResult, now: int, shot: Shot | None = None
    ) -> tuple[PageEntry, bool]:
        """Store a fetched page (and its screenshot, named in the entry's ``headers_json``).
        Also says whether its body is new to the cache."""
        fields = {
            "url": page_key.split(" ", 1)[1],
            "final_url": result.final_url,
            "status": result.status,
            "content_type": result.content_type,
            "etag": result.etag,
            "last_modified": result.last_modified,
            "fetched_at": now,
            "headers_json": _headers_json(result, now),
        }
        page, new_body = await self.adb.run(
            _db_store_page, page_key, result.body, fields, now, shot
        )
        self.hot.put_page(page_key, page)
        return page, new_body

    def hot_render(self, digest: str, render_key: str) -> Snapshot | None:
        return self.hot.snapshot(digest, render_key)

    async def render(self, digest: str, render_key: str, now: int) -> Snapshot | None:
        """A rendered snapshot from memory, else from the database (then kept in memory)."""
        snap = self.hot.snapshot(digest, render_key)
        if snap is not None:
            return snap
        payload = await self.adb.run(DB.get_render, digest, render_key, now)
        if payload is None:
            return None
        snap = Snapshot.from_payload(payload)
        self.hot.put_snapshot(digest, render_key, snap)
        return snap

    async def store_render(self, render_key: str, snap: Snapshot, now: int) -> None:
        await self.adb.run(_db_store_render, snap.digest, render_key, snap.to_payload(), now)
        self.hot.put_snapshot(snap.digest, render_key, snap)


class Memo(NamedTuple):
    """A served response and what keeps it valid: ``page`` still the in-process entry for
    ``page_key`` (a refetch or revalidation replaces it) and the clock before ``expires_at``."""

    body: bytes
    page_key: str
    page: PageEntry
    expires_at: int


def memo_for(
    cache: PageCache, page_key: str, snap: Snapshot, max_age_s: int, state: CacheState
) -> Memo | None:
    """For a cache hit served from the in-process entry, what keeps its response valid."""
    page = cache.hot.peek_page(page_key)
    if state == "hit" and page is not None and page.digest == snap.digest:
        return Memo(b"", page_key, page, page.fetched_at + max_age_s)
    return None


class ResponseCache:
    """Serialized responses by (caller, options), valid while their ``Memo`` holds.

    Only cache hits are remembered, so the bytes always say "hit"."""

    def __init__(self, hot: HotCache, max_bytes: int, clock: Callable[[], float]) -> None:
        self._hot = hot
        self._clock = clock
        self._responses: BytesLRU[tuple[Principal, FetchOptions], Memo] = BytesLRU(
            max_bytes=max_bytes, size=lambda m: len(m.body)
        )

    def get(self, key: tuple[Principal, FetchOptions]) -> bytes | None:
        memo = self._responses.get(key)
        if memo is None:
            return None
        if self._hot.peek_page(memo.page_key) is memo.page and self._clock() < memo.expires_at:
            return memo.body
        self._responses.pop(key)
        return None

    def put(self, key: tuple[Principal, FetchOptions], valid: Memo, body: bytes) -> None:
        self._responses.put(key, valid._replace(body=body))


def _headers_json(result: FetchResult, now: int) -> str:
    """What a page entry keeps of the response beyond its columns."""
    actions = {"actions": list(result.actions)} if result.actions else {}
    return dumps({"charset": result.charset, **_retry_after(result, now), **actions}).decode()


def _with_shot(headers_json: str, shot: Shot, digest: str) -> str:
    """A page entry's ``headers_json`` naming its screenshot (``snapshot.ShotMeta``)."""
    meta = {
        "digest": digest,
        "type": shot.type,
        "bytes": len(shot.data),
        "width": shot.width,
        "height": shot.height,
        "page_height": shot.page_height,
    }
    return dumps({**loads(headers_json), "screenshot": meta}).decode()


def _retry_after(result: FetchResult, now: int) -> dict[str, int]:
    """``{"retry_after": seconds}`` for a 429/503 answer with a usable Retry-After header
    (delta seconds or an HTTP date), else ``{}``."""
    value = result.headers.get("retry-after", "").strip()
    if result.status not in (429, 503) or not value:
        return {}
    if value.isdigit():
        return {"retry_after": min(int(value), 86400)}
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return {}
    return {"retry_after": max(0, min(int(when - now), 86400))}


# Database steps run as one call on the database thread each (one round trip, not three).


def _db_store_page(
    db: DB, page_key: str, body: bytes, fields: dict[str, Any], now: int, shot: Shot | None
) -> tuple[PageEntry, bool]:
    """Store a fetched body (and screenshot) and its page entry, then keep the cache within
    its budget. Returns the entry and whether the body is new to the cache."""
    with db.transaction():
        if shot is not None:
            digest = db.put_shot(shot.data, shot.type, shot.width, shot.height, now)
            fields = {**fields, "headers_json": _with_shot(fields["headers_json"], shot, digest)}
        digest, new_body = db.put_body_new(body, now)
        page = PageEntry(digest=digest, **fields)
        db.put_page(page_key, page, now)
        db.evict(now)
    return page, new_body


def _db_store_render(db: DB, digest: str, render_key: str, payload: bytes, now: int) -> None:
    with db.transaction():
        db.put_render(digest, render_key, payload, now)
        db.evict(now)
