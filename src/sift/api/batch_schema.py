"""Pydantic models documenting the batch API in OpenAPI (the handlers do not use them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from sift.api.schema import ErrorBody, FetchEnvelope, FetchRequest, Url, inline_defs
from sift.batch.submit import MAX_IDEM_KEY_CHARS

# The fetch options without ``url``: what ``options`` holds, per target and as defaults.
BatchOptions: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "BatchOptions",
    __config__=ConfigDict(extra="forbid"),
    __doc__="Fetch options (see /v1/fetch), without url. Unknown options are refused (422).",
    **{name: (f.annotation, f) for name, f in FetchRequest.model_fields.items() if name != "url"},
)


class BatchTargetSpec(BaseModel):
    """A target with its own options, merged over the job's default options."""

    model_config = ConfigDict(extra="forbid")

    url: Url
    options: BatchOptions | None = None  # type: ignore[valid-type]


class BatchSubmit(BaseModel):
    """A batch: every target is validated before anything is stored."""

    model_config = ConfigDict(extra="forbid")

    targets: list[Url | BatchTargetSpec] = Field(
        min_length=1, description="URLs, or {url, options} objects; at most the class's limit."
    )
    options: BatchOptions | None = Field(  # type: ignore[valid-type]
        None, description="Default options for every target."
    )
    webhook: Url | None = Field(
        None,
        description="Where to POST a signed job.finished event when the job ends (docs/batch.md"
        "#job-webhooks); checked against the caller's egress policy like a target.",
    )


class BatchCounts(BaseModel):
    pending: int
    running: int
    done: int
    failed: int
    cancelled: int


class BatchJobView(BaseModel):
    """A job's state: cheap, no results in it."""

    id: str
    kind: Literal["batch", "crawl"] = Field(description="crawl: a job started by /v1/crawl.")
    status: Literal["queued", "running", "done", "partial", "failed", "cancelled"]
    error: str = Field(description="Why the job failed or was cancelled; empty otherwise.")
    targets_total: int
    targets_done: int = Field(description="Targets with an outcome (done, failed, cancelled).")
    counts: BatchCounts
    created_at: int = Field(description="Unix seconds.")
    lease: int = Field(description="Unix seconds of the last submit, result, read or cancel.")
    expires_at: int = Field(description="Unix seconds when the job is deleted unless touched.")
    webhook_secret: str | None = Field(
        None,
        description="Only in the answer that created a job with a webhook: the whsec_ secret "
        "its events are signed with (never shown again).",
    )
    crawl: dict[str, Any] | None = Field(
        None,
        description="A crawl's parameters: url, scope, max_pages, max_depth, include, "
        "exclude, sitemap.",
    )


class BatchJobList(BaseModel):
    """The caller's newest jobs, newest first; other callers' jobs never appear."""

    items: list[BatchJobView]


class BatchItem(BaseModel):
    """One target: ``result`` when done, ``error`` when failed or cancelled."""

    idx: int
    url: str
    status: Literal["pending", "running", "done", "failed", "cancelled"]
    depth: int | None = Field(None, description="A crawl's target: its link depth.")
    parent: int | None = Field(
        None, description="A crawl's target: the idx of the page linking to it (start: null)."
    )
    result: FetchEnvelope | None = None
    error: ErrorBody | None = None


class BatchResultsPage(BaseModel):
    items: list[BatchItem]
    next_offset: int | None = Field(description="Where the next page starts; null at the end.")


def submit_request_body() -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": inline_defs(BatchSubmit.model_json_schema())}},
    }


def idempotency_parameter() -> list[dict[str, Any]]:
    return [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": True,
            "description": "Resubmitting with the same key while the job is live returns it "
            "(200) instead of creating another.",
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_IDEM_KEY_CHARS,
                "pattern": "^[\\x21-\\x7e]([\\x20-\\x7e]*[\\x21-\\x7e])?$",
            },
        }
    ]
