"""Pydantic models documenting ``/v1/crawl`` and ``/v1/map`` in OpenAPI (the handlers
validate with ``sift.crawl.spec``, which these mirror)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sift.api.batch_schema import BatchOptions
from sift.api.schema import Url, inline_defs
from sift.crawl.globs import MAX_GLOBS
from sift.crawl.spec import (
    DEFAULT_MAP_LIMIT,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_PAGES,
    MAX_DEPTH,
    MAX_MAP_LIMIT,
    MAX_MAX_PAGES,
)

Scope = Literal["host", "domain", "prefix"]
_SCOPE_DOC = (
    "host: the start URL's host and port; domain: the start host (without www.) and its "
    "subdomains; prefix (default): host, and the start URL's path and below."
)
_GLOBS_DOC = (
    "Path globs (* within a segment, ** across segments, ?, [a-z]); a glob not starting "
    "with / matches at any depth. At most {n}."
)


class CrawlRequest(BaseModel):
    """A crawl: validated whole (422 lists each bad field) before anything is stored."""

    model_config = ConfigDict(extra="forbid")

    url: Url
    max_pages: int = Field(
        DEFAULT_MAX_PAGES,
        ge=1,
        le=MAX_MAX_PAGES,
        description="Pages at most (the job's targets), capped by the class's max_targets.",
    )
    max_depth: int = Field(
        DEFAULT_MAX_DEPTH, ge=0, le=MAX_DEPTH, description="Links followed from the start page."
    )
    scope: Scope = Field("prefix", description=_SCOPE_DOC)
    include: list[str] = Field(
        default_factory=list, description=_GLOBS_DOC.format(n=MAX_GLOBS), max_length=MAX_GLOBS
    )
    exclude: list[str] = Field(
        default_factory=list, description=_GLOBS_DOC.format(n=MAX_GLOBS), max_length=MAX_GLOBS
    )
    sitemap: bool = Field(True, description="Also enqueue the URLs of the site's sitemaps.")
    options: BatchOptions | None = Field(  # type: ignore[valid-type]
        None, description="Fetch options for every page."
    )
    webhook: Url | None = Field(
        None,
        description="Where to POST a signed job.finished event when the crawl ends "
        "(docs/batch.md#job-webhooks).",
    )


class MapRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: Url
    scope: Scope = Field("prefix", description=_SCOPE_DOC)
    include: list[str] = Field(default_factory=list, max_length=MAX_GLOBS)
    exclude: list[str] = Field(default_factory=list, max_length=MAX_GLOBS)
    sitemap: bool = True
    limit: int = Field(DEFAULT_MAP_LIMIT, ge=1, le=MAX_MAP_LIMIT)


class MapResult(BaseModel):
    url: str = Field(description="The start URL, normalised.")
    urls: list[str] = Field(description="Start URL, sitemap URLs, then the page's links.")
    count: int
    truncated: bool = Field(description="More URLs were found than limit.")
    complete: bool = Field(description="False when discovery stopped at the time limit.")


def crawl_request_body() -> dict[str, Any]:
    schema = inline_defs(CrawlRequest.model_json_schema())
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def map_request_body() -> dict[str, Any]:
    schema = inline_defs(MapRequest.model_json_schema())
    return {"required": True, "content": {"application/json": {"schema": schema}}}
