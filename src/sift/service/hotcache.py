"""An in-process LRU in front of the SQLite content cache, for the cache-hit hot path.

It holds page entries (small, bounded by count) and rendered snapshots (bounded by the
bytes of their content). It is only ever a copy: losing it costs a database read, never
data. Single-threaded by design: only the event loop touches it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from sift.dcache import PageEntry

if TYPE_CHECKING:
    from sift.snapshot import Snapshot


class HotCache:
    """``max_bytes`` bounds the snapshot bytes held; ``max_pages`` the page entries."""

    def __init__(self, *, max_bytes: int, max_pages: int = 50_000) -> None:
        self.max_bytes = max_bytes
        self.max_pages = max_pages
        self._pages: OrderedDict[str, PageEntry] = OrderedDict()
        self._snaps: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self.bytes = 0

    def peek_page(self, key: str) -> PageEntry | None:
        """The entry for ``key`` without touching its recency."""
        return self._pages.get(key)

    def page(self, key: str) -> PageEntry | None:
        page = self._pages.get(key)
        if page is not None:
            self._pages.move_to_end(key)
        return page

    def put_page(self, key: str, page: PageEntry) -> None:
        self._pages[key] = page
        self._pages.move_to_end(key)
        while len(self._pages) > self.max_pages:
            self._pages.popitem(last=False)

    def snapshot(self, digest: str, render_key: str) -> Snapshot | None:
        snap = self._snaps.get((digest, render_key))
        if snap is not None:
            self._snaps.move_to_end((digest, render_key))
        return snap

    def put_snapshot(self, digest: str, render_key: str, snap: Snapshot) -> None:
        size = len(snap.content_bytes)
        if size > self.max_bytes:
            return
        old = self._snaps.pop((digest, render_key), None)
        if old is not None:
            self.bytes -= len(old.content_bytes)
        self._snaps[(digest, render_key)] = snap
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, evicted = self._snaps.popitem(last=False)
            self.bytes -= len(evicted.content_bytes)


K = TypeVar("K")
V = TypeVar("V")


class BytesLRU(Generic[K, V]):
    """A least-recently-used map bounded by the summed ``size`` of its values."""

    def __init__(self, *, max_bytes: int, size: Callable[[V], int]) -> None:
        self.max_bytes = max_bytes
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self.bytes = 0

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def pop(self, key: K) -> None:
        value = self._items.pop(key, None)
        if value is not None:
            self.bytes -= self._size(value)

    def put(self, key: K, value: V) -> None:
        size = self._size(value)
        if size > self.max_bytes:
            return
        self.pop(key)
        self._items[key] = value
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, evicted = self._items.popitem(last=False)
            self.bytes -= self._size(evicted)
