"""Pydantic models documenting the watch API in OpenAPI (the handlers do not use them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from sift.api.schema import FetchRequest, Url, inline_defs
from sift.watch.spec import MAX_EVERY_S

# Fetch options a watch stores: those of /v1/fetch minus what a watch sets itself and the
# credentials it never stores (sift.watch.spec).
_NOT_IN_WATCH = frozenset({"url", "headers", "cookies", "max_age_s", "changes", "tag", "ignore"})
WatchOptions: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "WatchOptions",
    __config__=ConfigDict(extra="forbid"),
    __doc__="Fetch options (see /v1/fetch) of every check, without url, max_age_s, headers "
    "and cookies. Unknown options are refused (422).",
    **{
        n: (f.annotation, f) for n, f in FetchRequest.model_fields.items() if n not in _NOT_IN_WATCH
    },
)


class WatchCreate(BaseModel):
    """A watch: checked every ``every`` through the normal pipeline."""

    model_config = ConfigDict(extra="forbid")

    url: Url
    every: float | str = Field(
        description='Seconds, or "90s", "15m", "2h", "1d"; at least the class\'s '
        f"min_interval_s, at most {MAX_EVERY_S:g} s."
    )
    options: WatchOptions | None = None  # type: ignore[valid-type]
    ignore: list[str] | None = Field(
        None, description="CSS selectors dropped before comparing (a clock, a counter)."
    )
    webhook: str | None = Field(
        None, description="An http(s) URL that receives a signed POST on every change."
    )


class WatchError(BaseModel):
    code: str
    message: str
    hint: str | None


class WatchEventView(BaseModel):
    """One check: its HTTP status and change (with its diff), or why it failed."""

    seq: int
    checked_at: float = Field(description="Unix seconds.")
    outcome: Literal["ok", "failed"]
    http_status: int | None
    change: dict[str, Any] | None = Field(
        description="The envelope's change: status new|same|changed|removed, the previous "
        "fetch's time and digest, and for changed a unified diff."
    )
    error: WatchError | None


class WatchView(BaseModel):
    id: str
    url: str
    every_s: float
    options: dict[str, Any]
    ignore: list[str]
    webhook: str | None
    created_at: float = Field(description="Unix seconds.")
    next_check_at: float = Field(description="Unix seconds of the next due check.")
    last_checked_at: float | None
    last_outcome: str | None = Field(
        description="failed, ok, or the last change status (new, same, changed, removed)."
    )
    checks: int
    failures: int
    changes: int


class WatchCreated(WatchView):
    webhook_secret: str | None = Field(
        None, description="The webhook's signing secret (whsec_…), returned this once."
    )


class WatchDetail(WatchView):
    events: list[WatchEventView] = Field(description="The newest check events, newest first.")


class WatchList(BaseModel):
    """The caller's watches, oldest first; other callers' watches never appear."""

    items: list[WatchView]


class WatchDeleted(BaseModel):
    id: str
    deleted: Literal[True]


def create_request_body() -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": inline_defs(WatchCreate.model_json_schema())}},
    }
