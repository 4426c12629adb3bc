"""How a floor above the runner plugs into it: a hook per job kind, called after each fetch.

The runner fetches targets; it knows nothing of what a job of some kind does with a fetched
page. A job kind that grows (a crawl: ``sift.crawl.hook``) registers an ``AfterFetch`` under
its kind where the runner is built (``sift.assembly.runner``), and the runner calls it for
every successful fetch of a target of a job of that kind — after the fetch slot is given
back and before the outcome is written, so the job can never look finished while targets
the page leads to are still to be appended, and the hook never holds a fetch slot.

So the arrow points down: the crawl imports this module, the runner never imports the crawl.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sift.principal import Principal


@dataclass(frozen=True, slots=True)
class Fetched:
    """One target of a job, fetched: what a hook is given."""

    job_id: str
    spec: str  # the job's parameters (``BatchJob.spec``, JSON), as its kind wrote them
    principal: Principal  # the principal the job runs as
    idx: int
    depth: int  # the target's depth (a crawl's link depth; 0 for a submitted target)
    url: str  # the target's URL as queued (the envelope holds the final one)
    envelope: dict[str, Any]  # stored after the hook returns: a hook may add a warning


class AfterFetch(Protocol):
    """Called by the runner after a target of a job of the kind it is registered for was
    fetched successfully (a 429/503 that is retried does not count)."""

    async def after_fetch(self, page: Fetched) -> int:
        """Act on ``page``; return how many targets were appended to its job (0: none).
        Raises ``SiftError`` on failure: the runner logs it and records the page anyway."""
        ...


# The hooks of one runner, by job kind (``BatchJob.kind``): ``{"crawl": CrawlHook(...)}``.
Hooks = Mapping[str, AfterFetch]
