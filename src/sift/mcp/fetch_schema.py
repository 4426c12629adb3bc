"""The MCP ``fetch`` tool's schema, and the page-option fields the job tools share with it
(``URL_FIELD``, ``FORMAT_FIELD``, ``MAIN_CONTENT_FIELD``, ``SELECTOR_FIELD``,
``SCREENSHOT_FIELD``).

The schemas mirror ``sift.options`` (the same names, ranges and defaults as ``/v1/fetch``);
``sift.mcp.tools`` still validates every call through the same parser, so a schema a client
ignores can never let a bad value through.
"""

from __future__ import annotations

from typing import Final

import mcp.types as types

from sift.browser.actions import (
    ACTION_KINDS,
    MAX_ACTION_TEXT_CHARS,
    MAX_KEY_CHARS,
    MAX_SCROLL_PIXELS,
    MAX_WAIT_MS,
)
from sift.browser.shot import (
    DEFAULT_HEIGHT,
    DEFAULT_QUALITY,
    DEFAULT_WIDTH,
    MAX_SIDE,
    SHOT_TYPES,
)
from sift.config import MAX_ACTION_STEPS
from sift.fetch.credentials import MAX_COOKIES, MAX_HEADERS, MAX_VALUE_BYTES
from sift.mcp.image import VISION_MAX_SIDE
from sift.options import (
    ENGINES,
    FORMATS,
    MAX_EXCLUDES,
    MAX_INT,
    MAX_SELECTOR_CHARS,
    MAX_URL_BYTES,
    MIN_MAX_BYTES,
    URL_PATTERN,
)
from sift.render.selector import LIMITS_TEXT

# A tool result lands in a model's context window: unless the caller asks for more, one
# fetch returns at most this many bytes (and never more than the caller's class cap).
DEFAULT_MAX_BYTES: Final = 32 << 10
_DIGEST_PATTERN: Final = "^sha256:[0-9a-f]{64}$"

URL_FIELD: Final = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_URL_BYTES,
    "pattern": URL_PATTERN,
    "description": "Absolute http:// or https:// URL.",
}
FORMAT_FIELD: Final = {
    "type": "string",
    "enum": list(FORMATS),
    "default": "markdown",
    "description": "markdown: the page as Markdown (default); text: plain text; html: cleaned "
    "HTML; raw: the body as the server sent it, decoded to text; screenshot: the page loaded "
    "in the browser, its Markdown and a picture of it (see screenshot).",
}
SCREENSHOT_FIELD: Final = {
    "type": "object",
    "description": "A picture of the page (implies format screenshot and the browser). The "
    "fetch tool returns it as an image scaled to fit a vision model (at most "
    f"{VISION_MAX_SIDE} px on its longest side); batch and crawl results name it by digest.",
    "properties": {
        "type": {
            "type": "string",
            "enum": list(SHOT_TYPES),
            "default": "png",
            "description": "Image type.",
        },
        "full_page": {
            "type": "boolean",
            "default": False,
            "description": "The whole page down to your class's pixel limit (taller pages "
            "are cut, warning screenshot_cut), not just the viewport.",
        },
        "width": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SIDE,
            "default": DEFAULT_WIDTH,
            "description": "Viewport width in CSS pixels.",
        },
        "height": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SIDE,
            "default": DEFAULT_HEIGHT,
            "description": "Viewport height in CSS pixels.",
        },
        "quality": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100,
            "description": f"jpeg and webp only; default {DEFAULT_QUALITY}.",
        },
    },
    "additionalProperties": False,
}
MAIN_CONTENT_FIELD: Final = {
    "type": "boolean",
    "default": True,
    "description": "true (default): only the page's main content, without navigation, "
    "sidebars, ads and footers. false: the whole visible page.",
}
SELECTOR_FIELD: Final = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_SELECTOR_CHARS,
    "description": "CSS selector: keep only the matching elements (HTML pages), e.g. "
    f"'article' or '#content'. {LIMITS_TEXT}",
}
ENGINE_FIELD: Final = {
    "type": "string",
    "enum": list(ENGINES),
    "default": "auto",
    "description": "auto (default): plain HTTP, and a headless browser when the page looks "
    "like a JavaScript shell; http: never the browser; browser: always load the page in "
    "the browser (slower; for pages that build their text with JavaScript).",
}
WAIT_FOR_FIELD: Final = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_SELECTOR_CHARS,
    "description": "Browser only: CSS selector to wait for before reading the page (for "
    "pages that load their text late), e.g. '#results li'.",
}
HEADERS_FIELD: Final = {
    "type": "object",
    "maxProperties": MAX_HEADERS,
    "additionalProperties": {"type": "string", "maxLength": MAX_VALUE_BYTES},
    "description": "For pages behind a login: your own request headers (name to value, e.g. "
    "Authorization), sent only to the page's origin (scheme, host, port): never after a "
    "redirect elsewhere, never to robots.txt. Hop-by-hop and sift's own fields (Host, "
    "Connection, User-Agent, Cookie, ...) are refused. The result is private to you; to read "
    "on, pass the same headers with offset and digest.",
}
COOKIES_FIELD: Final = {
    "type": "object",
    "maxProperties": MAX_COOKIES,
    "additionalProperties": {"type": "string", "maxLength": MAX_VALUE_BYTES},
    "description": "For pages behind a login: cookies (name to value) sent to the page's "
    "origin only, like headers.",
}
ACTIONS_FIELD: Final = {
    "type": "array",
    "maxItems": MAX_ACTION_STEPS,
    "items": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTION_KINDS)},
            "selector": {"type": "string", "minLength": 1, "maxLength": MAX_SELECTOR_CHARS},
            "text": {"type": "string", "maxLength": MAX_ACTION_TEXT_CHARS},
            "key": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS},
            "to": {"type": "string", "enum": ["bottom", "top"]},
            "pixels": {
                "type": "integer",
                "minimum": -MAX_SCROLL_PIXELS,
                "maximum": MAX_SCROLL_PIXELS,
            },
            "ms": {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_MS},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
    "description": "Browser: steps done on the page, in order, before it is read (the "
    "browser engine is implied). Each step is one object: "
    '{"action": "click", "selector": "#more"}; {"action": "type", "selector": "#q", '
    '"text": "solar"}; {"action": "press", "key": "Enter"}; {"action": "scroll", "to": '
    '"bottom"} or {"action": "scroll", "pixels": 800}; {"action": "wait", "ms": 500}; '
    '{"action": "wait_for", "selector": "#results li"}. A step that cannot be done fails '
    "the call, naming the step (action_failed). Your class allows a limited number of steps.",
}

FETCH_DESCRIPTION: Final = (
    "Fetch a web page and return its content as text (Markdown by default: the main "
    "content, without navigation and ads), and with format screenshot a picture of it too. "
    "Pages are cached, robots.txt is honoured, and "
    "only addresses your caller class may reach are fetched.\n\n"
    f"At most max_bytes bytes (UTF-8) are returned, default {DEFAULT_MAX_BYTES}; the cut "
    "falls on a clean boundary. The result's second part is a footer: title, final URL, "
    "HTTP status, the byte range returned and, when truncated, the exact offset and digest "
    "to pass to read on. Reading on with that offset and digest continues the same "
    "snapshot (no re-download; the text cannot shift between calls). Errors are returned "
    "as tool errors: '<code>: <message>' and a hint saying what to do next."
)

CHANGES_FIELD: Final = {
    "type": "boolean",
    "default": False,
    "description": "Tell what changed since your last fetch of this URL with changes=true: "
    "the footer says new, same, changed (with +added -removed lines) or removed (404/410), "
    "and a changed page's unified diff of its markdown follows the footer. Never compares a "
    "cached copy older than your last snapshot.",
}
TAG_FIELD: Final = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9._:-]{1,64}$",
    "description": "With changes: keep a separate history of this URL under this name.",
}
IGNORE_FIELD: Final = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_SELECTOR_CHARS},
    "maxItems": MAX_EXCLUDES,
    "description": "With changes: CSS selectors of parts to leave out of the comparison "
    "(a clock, a visitor counter); the content returned still has them.",
}

FETCH_TOOL: Final = types.Tool(
    name="fetch",
    title="Fetch a web page",
    description=FETCH_DESCRIPTION,
    input_schema={
        "type": "object",
        "properties": {
            "url": {**URL_FIELD, "description": "Absolute http:// or https:// URL of the page."},
            "format": FORMAT_FIELD,
            "max_bytes": {
                "type": "integer",
                "minimum": MIN_MAX_BYTES,
                "maximum": MAX_INT,
                "description": "Largest slice of content to return, in UTF-8 bytes. Default "
                f"{DEFAULT_MAX_BYTES}; a value above your class's cap is lowered to it (the "
                "footer then warns 'clamped').",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_INT,
                "default": 0,
                "description": "UTF-8 byte offset into the page's content to start at. To read "
                "on, pass the offset from the previous footer, together with its digest.",
            },
            "digest": {
                "type": "string",
                "pattern": _DIGEST_PATTERN,
                "description": "The snapshot to read, from a previous footer (or a batch "
                "result). With it, the same snapshot is read from the cache; without it, "
                "a fresh-enough copy is used or the page is fetched.",
            },
            "main_content": MAIN_CONTENT_FIELD,
            "selector": SELECTOR_FIELD,
            "engine": ENGINE_FIELD,
            "wait_for": WAIT_FOR_FIELD,
            "headers": HEADERS_FIELD,
            "cookies": COOKIES_FIELD,
            "actions": ACTIONS_FIELD,
            "screenshot": SCREENSHOT_FIELD,
            "changes": CHANGES_FIELD,
            "tag": TAG_FIELD,
            "ignore": IGNORE_FIELD,
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(
        title="Fetch a web page",
        read_only_hint=True,
        idempotent_hint=True,
        open_world_hint=True,
    ),
)
