"""``Core``: what the MCP tools call, in a module of its own so ``sift serve`` can name it
without importing the MCP SDK (``sift.mcp.http`` imports the SDK on the first ``/mcp``
request)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sift.batch.jobs import BatchJobs
    from sift.service import Service
    from sift.watch.watches import Watches


@dataclass(frozen=True)
class Core:
    """What the tools call: the fetch service, the batch jobs and the watches of this
    process."""

    service: Service
    jobs: BatchJobs
    watches: Watches | None = None
