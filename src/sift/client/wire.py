"""The client's wire models: what sift's JSON answers become (``Envelope``, ``JobView``,
``BatchItem``) and the exceptions its error objects stand for. Declared once, read by both
twins (``sync.Client`` and ``aio.AsyncClient``) through ``core``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from sift.errors import SiftError, SiftUnavailable, all_error_classes

_BY_CODE: dict[str, type[SiftError]] = {cls.code: cls for cls in all_error_classes()}
_CODE_RE: Final = re.compile(r"[a-z][a-z_]{0,62}")

JobState = Literal["queued", "running", "done", "partial", "failed", "cancelled"]
TargetState = Literal["pending", "running", "done", "failed", "cancelled"]
LIVE_STATES: Final = frozenset({"queued", "running"})
Progress = Callable[["JobView"], object]


@dataclass(frozen=True)
class Envelope:
    """One fetch result (see DESIGN.md); ``links`` only when requested."""

    url: str
    final_url: str
    status: int
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
    cache: str
    digest: str
    engine: str = "http"  # "http" or "browser": which engine built the content
    warnings: list[str] = field(default_factory=list)
    links: list[dict[str, str]] | None = None
    page_type: str | None = None  # HTML with main_content: article, forum, product …
    metadata: dict[str, Any] = field(default_factory=dict)  # description, author, dates …
    actions: list[dict[str, Any]] | None = None  # with actions=[…]: each step's outcome
    # format "screenshot": digest, type, bytes, width, height, url (Client.screenshot reads it)
    screenshot: dict[str, Any] | None = None
    # With changes=True: status (new, same, changed, removed), previous_fetched_at,
    # previous_digest, diff, added, removed, truncated (docs/watches.md).
    change: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Envelope:
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        return cls(**known, extra={k: v for k, v in data.items() if k not in names})


@dataclass(frozen=True)
class JobView:
    """A batch job's state as the server reported it (``GET /v1/batch/{id}``)."""

    id: str
    status: JobState
    error: str
    targets_total: int
    targets_done: int
    counts: dict[str, int]
    created_at: int
    lease: int
    expires_at: int
    kind: str = "batch"  # "crawl" for a job started by crawl()
    # Only in the answer that created a job with a webhook: the whsec_ secret its
    # job.finished event is signed with (verify it with sift.client.verify_webhook).
    webhook_secret: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """True once the job is done, partial, failed or cancelled."""
        return self.status not in LIVE_STATES

    def to_dict(self) -> dict[str, Any]:
        """The server's JSON object, unchanged."""
        return dict(self.raw)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobView:
        names = {f.name for f in fields(cls)} - {"raw"}
        return cls(**{k: v for k, v in data.items() if k in names}, raw=dict(data))


@dataclass(frozen=True)
class BatchItem:
    """One target of a job, in submission order: ``result`` when done, ``error`` (the
    rebuilt exception, never raised) when failed or cancelled, neither while pending."""

    idx: int
    url: str
    status: TargetState
    result: Envelope | None = None
    error: SiftError | None = None
    depth: int | None = None  # a crawl's target: its link depth (0: the start page)
    parent: int | None = None  # a crawl's target: the idx of the page linking to it

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchItem:
        result = data.get("result")
        error = data.get("error")
        return cls(
            idx=data["idx"],
            url=data["url"],
            status=data["status"],
            result=Envelope.from_dict(result) if isinstance(result, dict) else None,
            error=error_from_object(error) if isinstance(error, dict) else None,
            depth=data.get("depth"),
            parent=data.get("parent"),
        )


def error_from_object(err: Mapping[str, Any]) -> SiftError:
    """The exception an ``{"code", "message", "hint"}`` object stands for."""
    code = str(err.get("code", "internal_error"))
    cls = _BY_CODE.get(code, SiftError)
    exc = cls(str(err.get("message", "")), hint=str(err.get("hint", "")))
    if cls is SiftError and _CODE_RE.fullmatch(code):
        # A code outside the tree (a batch target's "cancelled" or "interrupted") is kept on
        # the instance: a class made per code would join the error tree.
        exc.__dict__["code"] = code
    return exc


def error_from_response(status: int, body: Any) -> SiftError:
    """Rebuild the server's exception from its ``{"error": {...}}`` body."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return SiftUnavailable(
            f"HTTP {status} came back without sift's error object (a proxy in front of a "
            "stopped sift, or not sift)"
        )
    return error_from_object(err)
