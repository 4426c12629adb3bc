"""A crawl's additions to the batch store: a job that grows, and its seen-set.

A crawl (docs/crawl.md) is a batch job whose targets are appended while it runs, as pages are
fetched and their links found. Two operations, each one write transaction:

- ``put_crawl_seen(job_id, urls)``: record URLs as seen (the start URL at submission, the
  final URL of a redirect) without enqueuing them.
- ``append_crawl_targets``: enqueue the URLs not yet seen, in the order given, as new
  pending targets ``targets_total, targets_total + 1, …`` of depth ``depth`` found on target
  ``parent``, until the job holds ``max_total`` targets; only while the job is queued or
  running (a cancelled or failed job never grows again). It bumps the lease to ``now``.

The seen-set is the ``crawl_seen`` table (one row per normalised URL per job), so memory does
not grow with the crawl; rows go with their job (``BatchStoreMixin._delete_jobs``). Spec
rules 1–9 hold: ``targets_done`` does not move (new targets are pending), ``targets_total``
grows by exactly the number of targets inserted, and counts still add up to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sift.errors import NotFound
from sift.store.sqlite.host import SqliteHost

_LIVE = ("queued", "running")


class CrawlStoreMixin(SqliteHost):
    """The crawl methods of ``sift.dcache.DB``."""

    def put_crawl_seen(self, job_id: str, urls: Sequence[str]) -> None:
        """Mark ``urls`` seen for ``job_id`` (already seen ones are left alone)."""
        with self._write() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO crawl_seen (job_id, url) VALUES (?, ?)",
                [(job_id, u) for u in urls],
            )

    def append_crawl_targets(
        self,
        job_id: str,
        urls: Sequence[str],
        *,
        options: str,
        depth: int,
        parent: int,
        max_total: int,
        now: int,
        seen: Sequence[str] = (),
    ) -> tuple[int, int]:
        """Enqueue the unseen ``urls`` (see the module docstring); ``seen`` are marked seen
        first, without being enqueued. Returns ``(added, targets_total)``; ``(0, total)`` for
        a job that is no longer live. NotFound for an unknown job."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT status, targets_total FROM batch_job WHERE id = ?", (job_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"batch job {job_id} not found")
            status, total = str(row[0]), int(row[1])
            if status not in _LIVE:
                return 0, total
            conn.executemany(
                "INSERT OR IGNORE INTO crawl_seen (job_id, url) VALUES (?, ?)",
                [(job_id, u) for u in seen],
            )
            added = 0
            for url in urls:
                if total >= max_total:
                    break
                cur = conn.execute(
                    "INSERT OR IGNORE INTO crawl_seen (job_id, url) VALUES (?, ?)", (job_id, url)
                )
                if cur.rowcount == 0:
                    continue  # seen before
                conn.execute(
                    "INSERT INTO batch_target (job_id, idx, url, options, status, depth, parent) "
                    "VALUES (?, ?, ?, ?, 'pending', ?, ?)",
                    (job_id, total, url, options, depth, parent),
                )
                total += 1
                added += 1
            conn.execute(
                "UPDATE batch_job SET targets_total = ?, lease = ? WHERE id = ?",
                (total, now, job_id),
            )
        return added, total
