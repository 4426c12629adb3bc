"""The crawl's hook into the batch runner: after a page of a crawl job is fetched, grow the job.

Registered under the job kind ``"crawl"`` where the runner is built
(``sift.assembly.runner``); the runner calls it through ``sift.batch.hooks.AfterFetch`` and
never imports the crawl. What it does is ``Crawler.after_page`` (``crawl.crawler``): follow
the page's in-scope links (and, from the start page, the sitemaps) and append the new ones.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from sift.batch.hooks import Fetched
from sift.crawl.crawler import MAX_REMEMBERED_JOBS, Crawler
from sift.crawl.spec import CrawlSpec

KIND: Final = "crawl"


class CrawlHook:
    """``AfterFetch`` for crawl jobs. Keeps each live crawl's parsed parameters (bounded)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._specs: OrderedDict[str, CrawlSpec] = OrderedDict()

    async def after_fetch(self, page: Fetched) -> int:
        spec = self._spec(page.job_id, page.spec)
        return await self.crawler.after_page(
            page.job_id, spec, page.principal, page.idx, page.depth, page.url, page.envelope
        )

    def _spec(self, job_id: str, text: str) -> CrawlSpec:
        spec = self._specs.get(job_id)
        if spec is None:
            spec = self._specs[job_id] = CrawlSpec.from_json(text)
            if len(self._specs) > MAX_REMEMBERED_JOBS:
                self._specs.popitem(last=False)
        else:
            self._specs.move_to_end(job_id)
        return spec
