"""The MCP job tools' schemas: ``batch_submit``, ``batch_status``, ``batch_results``,
``crawl`` and ``map``, with the job and outcome objects they return.

The schemas mirror ``sift.options``, ``sift.batch.submit`` and ``sift.crawl.spec`` (the same
names, ranges and defaults as ``/v1/batch``, ``/v1/crawl`` and ``/v1/map``); ``sift.mcp.tools``
still validates every call through the same parsers.
"""

from __future__ import annotations

from typing import Any, Final

import mcp.types as types

from sift.batch.submit import MAX_IDEM_KEY_CHARS
from sift.crawl.globs import MAX_GLOB_CHARS, MAX_GLOBS
from sift.crawl.scope import SCOPES
from sift.crawl.spec import (
    DEFAULT_MAP_LIMIT,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_PAGES,
    MAX_DEPTH,
    MAX_MAP_LIMIT,
    MAX_MAX_PAGES,
)
from sift.mcp.fetch_schema import (
    ACTIONS_FIELD,
    COOKIES_FIELD,
    ENGINE_FIELD,
    FORMAT_FIELD,
    HEADERS_FIELD,
    MAIN_CONTENT_FIELD,
    SCREENSHOT_FIELD,
    SELECTOR_FIELD,
    URL_FIELD,
    WAIT_FOR_FIELD,
)
from sift.options import (
    MAX_EXCLUDES,
    MAX_INT,
    MAX_SELECTOR_CHARS,
    MIN_MAX_BYTES,
)
from sift.render.selector import LIMITS_TEXT

RESULTS_MAX_LIMIT: Final = 100
RESULTS_DEFAULT_LIMIT: Final = 20

_MAX_BYTES_BATCH: Final = {
    "type": "integer",
    "minimum": MIN_MAX_BYTES,
    "maximum": MAX_INT,
    "description": "Largest content kept per page, in UTF-8 bytes (default and ceiling: "
    "your class's cap).",
}

_COUNTS: Final = {
    "type": "object",
    "description": "Targets per state.",
    "properties": {
        k: {"type": "integer"} for k in ("pending", "running", "done", "failed", "cancelled")
    },
    "required": ["pending", "running", "done", "failed", "cancelled"],
}
_JOB_STATUS: Final = {
    "type": "string",
    "enum": ["queued", "running", "done", "partial", "failed", "cancelled"],
    "description": "queued/running: not finished; done: every URL succeeded; partial: some "
    "failed; failed: all failed (or the job failed); cancelled.",
}
_JOB_VIEW_PROPERTIES: Final[dict[str, Any]] = {
    "id": {"type": "string", "description": "The job id, for batch_status and batch_results."},
    "status": _JOB_STATUS,
    "error": {"type": "string", "description": "Why the job failed or was cancelled."},
    "targets_total": {"type": "integer"},
    "targets_done": {"type": "integer", "description": "URLs with an outcome."},
    "counts": _COUNTS,
    "expires_at": {
        "type": "integer",
        "description": "Unix seconds when the job and its results are deleted unless read.",
    },
}
_JOB_VIEW_REQUIRED: Final = ["id", "status", "error", "targets_total", "targets_done", "counts"]
_JOB_ID: Final = {"type": "string", "minLength": 1, "description": "The job id batch_submit gave."}

BATCH_SUBMIT_TOOL: Final = types.Tool(
    name="batch_submit",
    title="Fetch many pages as one job",
    description=(
        "Start a batch job fetching many URLs in the background (politely: per-host limits, "
        "robots.txt, Retry-After). Returns at once with the job id and counts; follow it "
        "with batch_status, then read outcomes with batch_results. The same idempotency_key "
        "returns the same job instead of starting another: it defaults to a digest of urls "
        "and options, so resubmitting the same list is safe; pass a new key to force a new "
        "job."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "urls": {
                "type": "array",
                "items": URL_FIELD,
                "minItems": 1,
                "description": "The URLs to fetch (at most your class's targets-per-job limit).",
            },
            "idempotency_key": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_IDEM_KEY_CHARS,
                "pattern": "^[\\x21-\\x7e]([\\x20-\\x7e]*[\\x21-\\x7e])?$",
                "description": "Printable ASCII key naming this submission.",
            },
            "options": {
                "type": "object",
                "description": "Fetch options applied to every URL.",
                "properties": {
                    "format": FORMAT_FIELD,
                    "main_content": MAIN_CONTENT_FIELD,
                    "selector": SELECTOR_FIELD,
                    "exclude": {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_SELECTOR_CHARS,
                        },
                        "maxItems": MAX_EXCLUDES,
                        "description": f"CSS selectors of elements to drop. {LIMITS_TEXT}",
                    },
                    "max_bytes": _MAX_BYTES_BATCH,
                    "max_age_s": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_INT,
                        "description": "Accept a cached copy at most this many seconds old.",
                    },
                    "engine": ENGINE_FIELD,
                    "wait_for": WAIT_FOR_FIELD,
                    "actions": ACTIONS_FIELD,
                    "headers": HEADERS_FIELD,
                    "cookies": COOKIES_FIELD,
                    "screenshot": SCREENSHOT_FIELD,
                },
                "additionalProperties": False,
            },
        },
        "required": ["urls"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            **_JOB_VIEW_PROPERTIES,
            "created": {
                "type": "boolean",
                "description": "false when an existing job with this key was returned.",
            },
        },
        "required": [*_JOB_VIEW_REQUIRED, "created"],
    },
    annotations=types.ToolAnnotations(
        title="Fetch many pages as one job",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=True,
    ),
)

BATCH_STATUS_TOOL: Final = types.Tool(
    name="batch_status",
    title="Batch job status",
    description=(
        "The status of a batch job and how many of its URLs are pending, running, done, "
        "failed or cancelled. The job is finished when status is done, partial, failed or "
        "cancelled; then read its outcomes with batch_results."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": _JOB_ID},
        "required": ["id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": _JOB_VIEW_PROPERTIES,
        "required": _JOB_VIEW_REQUIRED,
    },
    annotations=types.ToolAnnotations(
        title="Batch job status", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)

_OUTCOME: Final = {
    "type": "object",
    "properties": {
        "idx": {"type": "integer", "description": "Position of the URL in the submission."},
        "url": {"type": "string"},
        "status": {
            "type": "string",
            "enum": ["pending", "running", "done", "failed", "cancelled"],
        },
        "http_status": {"type": "integer"},
        "depth": {"type": "integer", "description": "A crawl's page: its link depth."},
        "parent": {
            "anyOf": [{"type": "integer"}, {"type": "null"}],
            "description": "A crawl's page: idx of the page that linked to it.",
        },
        # anyOf rather than a list of types: portable to single-type schema dialects.
        "title": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "final_url": {"type": "string"},
        "bytes": {"type": "integer", "description": "Content bytes kept by the job."},
        "total_bytes": {"type": "integer", "description": "Content bytes of the whole page."},
        "truncated": {"type": "boolean"},
        "digest": {
            "type": "string",
            "description": "Snapshot id: fetch(url, digest=…) reads it from the cache.",
        },
        "screenshot": {
            "type": "object",
            "description": "format screenshot: the image's digest, type, bytes, width, "
            "height and url (GET it over HTTP with your key).",
        },
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "hint": {"type": "string"},
            },
            "required": ["code", "message", "hint"],
        },
    },
    "required": ["idx", "url", "status"],
}

BATCH_RESULTS_TOOL: Final = types.Tool(
    name="batch_results",
    title="Batch job outcomes",
    description=(
        "A page of a batch job's per-URL outcomes, in submission order: for each URL its "
        "state and either the HTTP status, title, final URL, size and snapshot digest, or "
        "the error (code, message, hint). Content is not included: read a page with "
        "fetch(url, digest=<its digest>, plus the job's format/main_content/selector), which "
        "serves the job's snapshot from the cache without fetching again. Continue with "
        "offset=next_offset until next_offset is null."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": _JOB_ID,
            "offset": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_INT,
                "default": 0,
                "description": "First position (idx) to return.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": RESULTS_MAX_LIMIT,
                "default": RESULTS_DEFAULT_LIMIT,
                "description": "How many outcomes to return.",
            },
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "status": _JOB_STATUS,
            "items": {"type": "array", "items": _OUTCOME},
            "next_offset": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "description": "offset for the next page; null after the last URL.",
            },
        },
        "required": ["id", "status", "items", "next_offset"],
    },
    annotations=types.ToolAnnotations(
        title="Batch job outcomes", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)

_SCOPE: Final = {
    "type": "string",
    "enum": list(SCOPES),
    "default": "prefix",
    "description": "prefix (default): the start URL's host, at its path and below; host: the "
    "whole host; domain: the host without www. and every subdomain.",
}
_GLOBS: Final = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_GLOB_CHARS},
    "maxItems": MAX_GLOBS,
    "description": "URL path globs: * within a segment, ** across segments; a glob not "
    "starting with / matches at any depth (e.g. '/docs/**', '*.html').",
}
_SITEMAP: Final = {
    "type": "boolean",
    "default": True,
    "description": "Also use the site's sitemaps (robots.txt Sitemap lines, /sitemap.xml).",
}

CRAWL_TOOL: Final = types.Tool(
    name="crawl",
    title="Crawl a site section",
    description=(
        "Start a crawl in the background: fetch the start URL, then the pages it links to "
        "(and the site's sitemap URLs) within the scope, breadth first, politely (robots.txt, "
        "per-host limits). It is a batch job: returns at once with the job id; follow it with "
        "batch_status and read the pages with batch_results (each outcome has its depth and "
        "the idx of the page linking to it). The same idempotency_key returns the same job."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "url": URL_FIELD,
            "max_pages": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_MAX_PAGES,
                "default": DEFAULT_MAX_PAGES,
                "description": "Pages at most (capped by your class's targets-per-job limit).",
            },
            "max_depth": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_DEPTH,
                "default": DEFAULT_MAX_DEPTH,
                "description": "Links followed from the start page (0: only the start page).",
            },
            "scope": _SCOPE,
            "include": _GLOBS,
            "exclude": _GLOBS,
            "sitemap": _SITEMAP,
            "idempotency_key": BATCH_SUBMIT_TOOL.input_schema["properties"]["idempotency_key"],
            "options": BATCH_SUBMIT_TOOL.input_schema["properties"]["options"],
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    output_schema=BATCH_SUBMIT_TOOL.output_schema,
    annotations=types.ToolAnnotations(
        title="Crawl a site section",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=True,
    ),
)

MAP_TOOL: Final = types.Tool(
    name="map",
    title="List a site's URLs",
    description=(
        "The URLs of a site found quickly, without fetching every page: the start page's "
        "links and the site's sitemaps, within the scope. Use it to choose pages before "
        "fetching them, or to size a crawl."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "url": URL_FIELD,
            "scope": _SCOPE,
            "include": _GLOBS,
            "exclude": _GLOBS,
            "sitemap": _SITEMAP,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_MAP_LIMIT,
                "default": DEFAULT_MAP_LIMIT,
                "description": "URLs at most.",
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "urls": {"type": "array", "items": {"type": "string"}},
            "count": {"type": "integer"},
            "truncated": {"type": "boolean", "description": "More URLs than limit were found."},
            "complete": {"type": "boolean", "description": "false: stopped at the time limit."},
        },
        "required": ["url", "urls", "count", "truncated", "complete"],
    },
    annotations=types.ToolAnnotations(
        title="List a site's URLs", read_only_hint=True, idempotent_hint=True, open_world_hint=True
    ),
)
