"""The MCP watch tools' schemas: ``watch`` (create), ``watches`` (list) and ``changes`` (one
watch's recent checks with their diffs). They mirror ``sift.watch.spec`` and the
``/v1/watches`` views; ``sift.mcp.watch_tools`` still validates every call through the same
parser."""

from __future__ import annotations

from typing import Any, Final

import mcp.types as types

from sift.mcp.fetch_schema import FORMAT_FIELD, MAIN_CONTENT_FIELD, SELECTOR_FIELD, URL_FIELD
from sift.options import MAX_EXCLUDES, MAX_SELECTOR_CHARS

CHANGES_MAX_LIMIT: Final = 100
CHANGES_DEFAULT_LIMIT: Final = 10

_WATCH_VIEW: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The watch id (for changes)."},
        "url": {"type": "string"},
        "every_s": {"type": "number", "description": "Seconds between checks."},
        "next_check_at": {"type": "number", "description": "Unix seconds of the next check."},
        # anyOf rather than a list of types: portable to single-type schema dialects.
        "last_checked_at": {
            "anyOf": [{"type": "number"}, {"type": "null"}],
            "description": "Unix seconds of the last check (null: none yet).",
        },
        "last_outcome": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "failed, ok, or the last change status (new, same, changed, "
            "removed); null before the first check.",
        },
        "checks": {"type": "integer"},
        "failures": {"type": "integer"},
        "changes": {"type": "integer", "description": "Checks that saw a change."},
        "webhook": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "The webhook URL (null: none).",
        },
    },
    "required": ["id", "url", "every_s", "next_check_at", "checks", "failures", "changes"],
}

WATCH_TOOL: Final = types.Tool(
    name="watch",
    title="Watch a page",
    description=(
        "Ask sift to re-check a page on a schedule and keep what changed (each check is a "
        "fresh fetch; a change carries a unified diff of the page's text). Read the checks "
        "with changes(id). every is seconds or a duration such as '30m', '6h', '1d', no "
        "shorter than your class allows. ignore lists CSS selectors to drop before "
        "comparing (a clock, a visitor counter). webhook: an https URL that receives a "
        "signed POST on every change; its signing secret is returned once, here."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "url": URL_FIELD,
            "every": {
                "type": "string",
                "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*[smhd]?\\s*$",
                "description": "Time between checks: '3600' or '90s', '15m', '2h', '1d'.",
            },
            "ignore": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_SELECTOR_CHARS},
                "maxItems": MAX_EXCLUDES,
                "description": "CSS selectors dropped before comparing.",
            },
            "webhook": {"type": "string", "description": "http(s) URL to POST changes to."},
            "options": {
                "type": "object",
                "description": "Fetch options of every check.",
                "properties": {
                    "format": FORMAT_FIELD,
                    "main_content": MAIN_CONTENT_FIELD,
                    "selector": SELECTOR_FIELD,
                },
                "additionalProperties": False,
            },
        },
        "required": ["url", "every"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            **_WATCH_VIEW["properties"],
            "webhook_secret": {
                "type": "string",
                "description": "The webhook's signing secret (shown this once).",
            },
        },
        "required": _WATCH_VIEW["required"],
    },
    annotations=types.ToolAnnotations(
        title="Watch a page", read_only_hint=False, idempotent_hint=False, open_world_hint=True
    ),
)

WATCHES_TOOL: Final = types.Tool(
    name="watches",
    title="Your watches",
    description="Your watches: each one's URL, interval, next check and last outcome.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={
        "type": "object",
        "properties": {"items": {"type": "array", "items": _WATCH_VIEW}},
        "required": ["items"],
    },
    annotations=types.ToolAnnotations(
        title="Your watches", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)

CHANGES_TOOL: Final = types.Tool(
    name="changes",
    title="What changed on a watched page",
    description=(
        "The newest checks of one of your watches, newest first: each check's HTTP status "
        "and change (status new, same, changed or removed; for changed, a unified diff of "
        "the page's text with lines added and removed), or why the check failed. "
        "only_changes=true leaves out checks that saw nothing new."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string", "minLength": 1, "description": "The id watch returned."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": CHANGES_MAX_LIMIT,
                "default": CHANGES_DEFAULT_LIMIT,
                "description": "Checks to look at.",
            },
            "only_changes": {"type": "boolean", "default": False},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "url": {"type": "string"},
            "events": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["id", "url", "events"],
    },
    annotations=types.ToolAnnotations(
        title="What changed", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)

WATCH_TOOLS: Final = (WATCH_TOOL, WATCHES_TOOL, CHANGES_TOOL)
