"""Pydantic models that document the API shapes in OpenAPI (the hot path does not use them)."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from sift.browser.actions import (
    MAX_ACTION_TEXT_CHARS,
    MAX_KEY_CHARS,
    MAX_SCROLL_PIXELS,
    MAX_WAIT_MS,
    ActionKind,
)
from sift.browser.shot import DEFAULT_HEIGHT, DEFAULT_QUALITY, DEFAULT_WIDTH, MAX_SIDE
from sift.config import MAX_ACTION_STEPS
from sift.fetch.credentials import (
    MAX_COOKIES,
    MAX_HEADERS,
    MAX_NAME_CHARS,
    MAX_TOTAL_BYTES,
    MAX_VALUE_BYTES,
)
from sift.options import (
    MAX_EXCLUDES,
    MAX_INT,
    MAX_SELECTOR_CHARS,
    MAX_URL_BYTES,
    MIN_MAX_BYTES,
    URL_PATTERN,
)
from sift.render.selector import LIMITS_TEXT

# The constraints the server enforces (sift.options, sift.fetch.url), stated once for every
# place a URL or a selector appears. maxLength counts characters; the server's limit is in
# UTF-8 bytes, which only differ for non-ASCII URLs.
Url = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_URL_BYTES,
        pattern=URL_PATTERN,
        description=f"Absolute http:// or https:// URL, at most {MAX_URL_BYTES} bytes.",
    ),
]
Selector = Annotated[str, Field(min_length=1, max_length=MAX_SELECTOR_CHARS)]
FieldName = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
]
HeaderValue = Annotated[str, Field(max_length=MAX_VALUE_BYTES, pattern=r"^[\t\x20-\x7e]*$")]
CookieValue = Annotated[str, Field(max_length=MAX_VALUE_BYTES)]
# Options a query string never carries (GET /v1/fetch refuses them: URLs end up in logs).
BODY_ONLY_OPTIONS: Final = ("headers", "cookies", "screenshot")  # secrets, and an object


class PageAction(BaseModel):
    """One page action (docs/browser.md#page-actions): only the fields of its kind."""

    model_config = ConfigDict(extra="forbid")

    action: ActionKind = Field(
        description="click (selector), type (selector, text), press (key; selector: focus it "
        "first), scroll (to, or pixels), wait (ms), wait_for (selector)."
    )
    selector: Selector | None = Field(None, description="click, type, wait_for; press: optional.")
    text: str | None = Field(
        None, max_length=MAX_ACTION_TEXT_CHARS, description="type: the text to enter."
    )
    key: str | None = Field(
        None,
        max_length=MAX_KEY_CHARS,
        description="press: a key name (Enter, ArrowDown, a, Control+A).",
    )
    to: Literal["bottom", "top"] | None = Field(None, description="scroll: to the bottom or top.")
    pixels: int | None = Field(
        None,
        ge=-MAX_SCROLL_PIXELS,
        le=MAX_SCROLL_PIXELS,
        description="scroll: by this many pixels (negative: up).",
    )
    ms: int | None = Field(None, ge=1, le=MAX_WAIT_MS, description="wait: milliseconds.")


class ActionOutcome(BaseModel):
    """How one page action went (a failing step is an error, not an outcome)."""

    step: int
    action: str
    ok: bool
    ms: int = Field(description="The step's time, the page settling after it included.")
    downloads_refused: int | None = Field(None, description="Downloads it started, cancelled.")


class ScreenshotOptions(BaseModel):
    """What picture to take (format screenshot); every field has a default."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["png", "jpeg", "webp"] = Field("png", description="Image type.")
    full_page: bool = Field(
        False,
        description="The whole page, cut at the class's screenshot_max_pixels (warning "
        "screenshot_cut); false: the viewport.",
    )
    width: int = Field(DEFAULT_WIDTH, ge=1, le=MAX_SIDE, description="Viewport width, CSS px.")
    height: int = Field(DEFAULT_HEIGHT, ge=1, le=MAX_SIDE, description="Viewport height, CSS px.")
    quality: int | None = Field(
        None, ge=1, le=100, description=f"jpeg and webp only (default {DEFAULT_QUALITY})."
    )


class FetchRequest(BaseModel):
    """Options of one fetch. Unknown options are refused (422)."""

    model_config = ConfigDict(extra="forbid")

    url: Url
    format: Literal["markdown", "text", "html", "raw", "screenshot"] = Field(
        "markdown",
        description="markdown, text, cleaned main-content html, the raw body, or screenshot: "
        "the page's markdown and a picture of it, both from one browser load.",
    )
    main_content: bool = Field(True, description="Main content only (false: the whole page).")
    selector: Selector | None = Field(None, description=f"CSS selector to keep. {LIMITS_TEXT}")
    exclude: list[Selector] = Field(
        default_factory=list,
        max_length=MAX_EXCLUDES,
        description=f"CSS selectors to drop. {LIMITS_TEXT}",
    )
    links: bool = Field(False, description="Return the page's links.")
    max_bytes: int | None = Field(
        None,
        ge=MIN_MAX_BYTES,
        le=MAX_INT,
        description="Largest content slice in UTF-8 bytes (at least one 4-byte character); "
        "clamped to the class cap.",
    )
    offset: int = Field(0, ge=0, le=MAX_INT, description="UTF-8 byte offset to read from.")
    digest: str | None = Field(
        None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="Read the snapshot with this digest (continuations).",
    )
    max_age_s: int | None = Field(
        None, ge=0, le=MAX_INT, description="Use a cached copy younger than this; 0 = fresh."
    )
    timeout_s: float | None = Field(
        None, gt=0, le=86400, description="Total fetch deadline; clamped to the class limit."
    )
    robots: bool = Field(True, description="Obey robots.txt (only fleet may pass false).")
    engine: Literal["auto", "http", "browser"] = Field(
        "auto",
        description="http: plain HTTP; browser: load the page in the guarded headless browser; "
        "auto: HTTP, then the browser when the page looks like a JavaScript shell.",
    )
    wait_for: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_SELECTOR_CHARS,
        description="Browser only: CSS selector to wait for before reading the page.",
    )
    headers: dict[FieldName, HeaderValue] | None = Field(
        None,
        max_length=MAX_HEADERS,
        description="Your own request headers (name → value, e.g. Authorization), sent only "
        "to the requested URL's origin: never after a redirect to another origin, never to "
        "robots.txt, in the browser only on requests to that origin. Hop-by-hop, framing and "
        "sift's own fields (Host, Connection, User-Agent, Cookie, …) are refused; at most "
        f"{MAX_TOTAL_BYTES} bytes with cookies. The result is private to you. POST only. "
        "See docs/fetching.md#pages-behind-a-login.",
    )
    cookies: dict[FieldName, CookieValue] | None = Field(
        None,
        max_length=MAX_COOKIES,
        description="Your own cookies (name → value), sent as a Cookie header to the requested "
        "URL's origin only, like headers. POST only.",
    )
    actions: list[PageAction] = Field(
        default_factory=list,
        max_length=MAX_ACTION_STEPS,
        description="Page actions run in order in the browser before the page is read (the "
        "browser engine implied; at most the class's max_actions). In a GET query: JSON text.",
    )
    screenshot: ScreenshotOptions | None = Field(
        None,
        description="The picture to take; implies format screenshot (POST only: a query "
        "string takes format=screenshot with the defaults).",
    )
    changes: bool = Field(
        False,
        description="Compare with your last changes=true fetch of this URL (under tag): the "
        "envelope gains change (new, same, changed with a diff of the markdown, removed). "
        "Never answered from a cached copy older than that snapshot. See docs/watches.md.",
    )
    tag: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._:-]{1,64}$",
        description="changes only: a history of its own for this URL (watch:* is reserved).",
    )
    ignore: list[Selector] = Field(
        default_factory=list,
        max_length=MAX_EXCLUDES,
        description="changes only: CSS selectors left out of the comparison (a clock, a "
        f"counter); the content returned keeps them. {LIMITS_TEXT}",
    )


class Link(BaseModel):
    text: str
    url: str


class ScreenshotView(BaseModel):
    digest: str = Field(description="sha256 of the image bytes.")
    type: Literal["png", "jpeg", "webp"]
    bytes: int
    width: int
    height: int
    url: str = Field(
        description="/v1/screenshots/{digest}: the image, for the callers it was given to."
    )


class Change(BaseModel):
    """What changed since the caller's last ``changes`` fetch of the URL (docs/watches.md)."""

    status: Literal["new", "same", "changed", "removed"] = Field(
        description="new: no history; same: the compared markdown is unchanged; changed: see "
        "diff; removed: the page now answers 404 or 410."
    )
    previous_fetched_at: int | None = Field(
        description="When the previous snapshot was last seen (unix seconds); null if new."
    )
    previous_digest: str | None = Field(
        description="The digest of the page at the previous snapshot (the digest its "
        "envelope carried); null if new."
    )
    diff: str | None = Field(
        description="changed only: a unified diff (--- previous, +++ current) of the "
        "rendered markdown, ignore selectors left out."
    )
    added: int = Field(description="Lines added (the whole diff, also past a cut).")
    removed: int = Field(description="Lines removed (the whole diff, also past a cut).")
    truncated: bool = Field(
        description="The diff covers part of the change only (history.diff_max_lines, "
        "history.diff_max_bytes)."
    )


class FetchEnvelope(BaseModel):
    """The result of one fetch: the same shape from every route and in batch results."""

    url: str
    final_url: str
    status: int = Field(description="The upstream's HTTP status (404 pages are content too).")
    content_type: str
    title: str | None
    lang: str | None
    format: str
    content: str
    offset: int
    bytes: int
    total_bytes: int
    truncated: bool
    next_offset: int | None
    fetched_at: int
    cache: Literal["hit", "miss", "revalidated"]
    digest: str
    engine: Literal["http", "browser"] = Field(description="Which engine built this content.")
    links: list[Link] | None = None
    page_type: str | None = Field(
        None,
        description="HTML with main_content only: article, forum, product, listing, "
        "collection, service, documentation or other (docs/rendering.md).",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="HTML only: what the page declares about itself (description, author, "
        "published, modified, site_name, canonical_url, image, lang, keywords); absent "
        "fields are omitted.",
    )
    screenshot: ScreenshotView | None = Field(
        None, description="format screenshot: the picture taken (GET its url, same key)."
    )
    retry_after: int | None = Field(
        None,
        description="Only for an upstream 429/503 with Retry-After: seconds after fetched_at "
        "it asked clients to wait.",
    )
    actions: list[ActionOutcome] | None = Field(
        None, description="With actions: each step's outcome, in order."
    )
    change: Change | None = Field(
        None,
        description="With changes=true: what changed since your last snapshot of this URL "
        "(null for an upstream 429 or 5xx answer, which is not recorded).",
    )
    warnings: list[str]


class Health(BaseModel):
    ok: bool
    version: str
    browser: Literal["absent", "ready", "broken"] = Field(
        description="absent: no Chromium (or disabled); ready: usable; broken: it failed to "
        "start or keeps dying."
    )


class ErrorBody(BaseModel):
    code: str = Field(description="Stable snake_case code; see docs/errors.md.")
    message: str
    hint: str = Field(description="What to do next.")


class ErrorEnvelope(BaseModel):
    error: ErrorBody


_ERROR_STATUSES = {
    401: "Missing or unknown bearer key",
    403: "Blocked address or robots.txt",
    404: "Unknown route or job",
    410: "Snapshot no longer cached",
    413: "Request too large",
    422: "Invalid request",
    429: "Quota exceeded, or too many of this caller's fetches in flight (rate_limited)",
    500: "Bug in sift",
    502: "Upstream failure",
    503: "Server at capacity",
    504: "Upstream timeout",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorEnvelope, "description": text}
    for status, text in _ERROR_STATUSES.items()
}


# Bearer keys, declared so that /docs offers "Authorize" and its "Try it out" sends the key.
BEARER: Final = "bearer"
SECURITY_SCHEMES: Final[dict[str, Any]] = {
    BEARER: {
        "type": "http",
        "scheme": "bearer",
        "description": "A caller key (`sift keys add`), sent as `Authorization: Bearer <key>`. "
        "A server with no callers configured also serves requests without a key, as the "
        "anonymous restricted caller.",
    }
}


def keyed() -> dict[str, Any]:
    """What a route that takes a key adds to its ``openapi_extra``: a bearer key, or none
    (the anonymous caller, on a server with no callers configured). A fresh dict each time:
    FastAPI puts it into the document as it is."""
    return {"security": [{BEARER: []}, {}]}


def declare_bearer_auth(app: FastAPI) -> None:
    """Add ``SECURITY_SCHEMES`` to ``app``'s OpenAPI document (routes reference it through
    ``keyed()`` in their ``openapi_extra``)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            document.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


def inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` references replaced by the definitions themselves.

    Pydantic points nested models at ``#/$defs/…`` of the model's own schema; placed inside
    an OpenAPI document, that pointer would resolve against the document root, where there
    is no ``$defs``. The definitions here are not recursive, so inlining always ends.
    """
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: dict[str, Any] = walk(schema)
    return out


def fetch_request_body() -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": inline_defs(FetchRequest.model_json_schema())}},
    }


def fetch_query_parameters() -> list[dict[str, Any]]:
    """``GET /v1/fetch`` takes the same options as query parameters."""
    schema = inline_defs(FetchRequest.model_json_schema())
    params = []
    for name, prop in schema["properties"].items():
        if name in BODY_ONLY_OPTIONS:
            continue
        prop = {k: v for k, v in prop.items() if k not in ("title", "default")}
        if name == "actions":  # a list of objects: JSON text in the query
            description = prop.pop("description", "")
            content = {"application/json": {"schema": prop}}
            params.append(
                {"name": name, "in": "query", "content": content, "description": description}
            )
            continue
        params.append(
            {
                "name": name,
                "in": "query",
                "required": name == "url",
                "schema": prop,
                "description": prop.pop("description", ""),
                **({"explode": True, "style": "form"} if name in ("exclude", "ignore") else {}),
            }
        )
    return params
