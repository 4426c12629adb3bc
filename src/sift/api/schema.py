"""Pydantic models that document the API shapes in OpenAPI (the hot path does not use them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sift.options import MAX_EXCLUDES, MAX_INT, MAX_SELECTOR_CHARS, MAX_URL_BYTES
from sift.render.selector import LIMITS_TEXT


class FetchRequest(BaseModel):
    """Options of one fetch. Unknown options are refused (422)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1, max_length=MAX_URL_BYTES, description="Absolute http(s) URL to fetch."
    )
    format: Literal["markdown", "text", "html", "raw"] = Field(
        "markdown", description="markdown, text, cleaned main-content html, or the raw body."
    )
    main_content: bool = Field(True, description="Main content only (false: the whole page).")
    selector: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_SELECTOR_CHARS,
        description=f"CSS selector to keep. {LIMITS_TEXT}",
    )
    exclude: list[Annotated[str, Field(min_length=1, max_length=MAX_SELECTOR_CHARS)]] = Field(
        default_factory=list,
        max_length=MAX_EXCLUDES,
        description=f"CSS selectors to drop. {LIMITS_TEXT}",
    )
    links: bool = Field(False, description="Return the page's links.")
    max_bytes: int | None = Field(
        None, ge=1, le=MAX_INT, description="Largest content slice; clamped to the class cap."
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


class Link(BaseModel):
    text: str
    url: str


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
    links: list[Link] | None = None
    retry_after: int | None = Field(
        None,
        description="Only for an upstream 429/503 with Retry-After: seconds after fetched_at "
        "it asked clients to wait.",
    )
    warnings: list[str]


class Health(BaseModel):
    ok: bool
    version: str


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
    429: "Quota exceeded",
    500: "Bug in sift",
    502: "Upstream failure",
    503: "Server at capacity",
    504: "Upstream timeout",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorEnvelope, "description": text}
    for status, text in _ERROR_STATUSES.items()
}


def fetch_request_body() -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": FetchRequest.model_json_schema()}},
    }


def fetch_query_parameters() -> list[dict[str, Any]]:
    """``GET /v1/fetch`` takes the same options as query parameters."""
    schema = FetchRequest.model_json_schema()
    params = []
    for name, prop in schema["properties"].items():
        prop = {k: v for k, v in prop.items() if k not in ("title", "default")}
        params.append(
            {
                "name": name,
                "in": "query",
                "required": name == "url",
                "schema": prop,
                "description": prop.pop("description", ""),
                **({"explode": True, "style": "form"} if name == "exclude" else {}),
            }
        )
    return params
