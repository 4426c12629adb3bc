"""The MCP tools sift offers: names, descriptions and JSON schemas, written for a model to
use without guessing. The fetch tool is in ``fetch_schema``, the job tools in ``job_schema``;
this is the catalogue the server lists and checks calls against.
"""

from __future__ import annotations

from typing import Any, Final

from sift.mcp.fetch_schema import FETCH_TOOL
from sift.mcp.job_schema import (
    BATCH_RESULTS_TOOL,
    BATCH_STATUS_TOOL,
    BATCH_SUBMIT_TOOL,
    CRAWL_TOOL,
    MAP_TOOL,
)
from sift.mcp.watch_schema import WATCH_TOOLS

TOOLS: Final = (
    FETCH_TOOL,
    BATCH_SUBMIT_TOOL,
    BATCH_STATUS_TOOL,
    BATCH_RESULTS_TOOL,
    CRAWL_TOOL,
    MAP_TOOL,
    *WATCH_TOOLS,
)


def input_schema(name: str) -> dict[str, Any] | None:
    """The input schema of tool ``name``; None for an unknown tool."""
    for tool in TOOLS:
        if tool.name == name:
            return tool.input_schema
    return None
