"""A typed Python client for a running sift: ``Client`` (sync) and ``AsyncClient`` (asyncio).

    from sift.client import Client
    with Client("http://127.0.0.1:8080", key="sift_…") as sift:
        page = sift.fetch("https://example.com/", max_bytes=4096)
        print(page.title, page.content)
        for piece in sift.read("https://example.com/long"):   # follows next_offset
            ...
        job = sift.submit(urls, idempotency_key="crawl-42", options={"format": "text"})
        job.wait(progress=lambda v: print(v.targets_done, "/", v.targets_total))
        for item in job.results():                            # every page of results
            print(item.url, item.result.title if item.result else item.error)

Errors raise the same classes the server uses, rebuilt from the error object, so
``except sift.errors.BlockedAddress`` … ``except Blocked`` works remotely as in-process; a
batch target's error is the same kind of exception object, in ``BatchItem.error``. Failing
to reach sift at all raises ``ConnectFailed`` (or ``UpstreamTimeout``), never an httpx error.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal
from urllib.parse import quote

import httpx

from sift.errors import (
    ConnectFailed,
    SiftError,
    UpstreamError,
    UpstreamTimeout,
    all_error_classes,
)

_BY_CODE: dict[str, type[SiftError]] = {cls.code: cls for cls in all_error_classes()}
_CODE_RE: Final = re.compile(r"[a-z][a-z_]{0,62}")
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_POLL_S: Final = 0.5
RESULTS_PAGE_SIZE: Final = 100

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
        return UpstreamError(f"sift answered HTTP {status} without an error object")
    return error_from_object(err)


def _raise_for(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        exc = error_from_response(response.status_code, body)
        if "retry-after" in response.headers:
            exc.headers["Retry-After"] = response.headers["retry-after"]
        raise exc
    if body is None:
        raise UpstreamError(f"sift answered HTTP {response.status_code} without a JSON body")
    return body


def _transport_error(base_url: str, exc: httpx.TransportError) -> SiftError:
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(
            f"sift at {base_url} did not answer in time ({type(exc).__name__})",
            hint="Retry later, or pass a larger timeout_s to the client.",
        )
    return ConnectFailed(
        f"cannot reach sift at {base_url}: {exc or type(exc).__name__}",
        hint="Check that `sift serve` is running at that address.",
    )


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _body(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"url": url, **{k: v for k, v in options.items() if v is not None}}


def _submission(
    urls: Sequence[str | Mapping[str, Any]], options: Mapping[str, Any] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"targets": [u if isinstance(u, str) else dict(u) for u in urls]}
    if options:
        body["options"] = dict(options)
    return body


def _crawl_body(url: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"url": url, **{k: v for k, v in params.items() if v is not None}}


def _job_path(job_id: str) -> str:
    return "/v1/batch/" + quote(job_id, safe="")


class Client:
    """Synchronous client. ``key`` may be None for an anonymous (no callers) server."""

    def __init__(
        self, base_url: str, key: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, headers=_headers(key), timeout=timeout_s)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _exchange(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _transport_error(self.base_url, exc) from exc
        return response.status_code, _raise_for(response)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; the decoded JSON body, or the server's error raised."""
        return self._exchange(method, path, **kwargs)[1]

    def fetch(self, url: str, **options: Any) -> Envelope:
        """``POST /v1/fetch`` with ``options`` (format, max_bytes, offset, digest, …)."""
        return Envelope.from_dict(self.request("POST", "/v1/fetch", json=_body(url, options)))

    def read(self, url: str, **options: Any) -> Iterator[Envelope]:
        """Every slice of one snapshot of ``url``, following ``next_offset`` and ``digest``."""
        env = self.fetch(url, **options)
        yield env
        while env.next_offset is not None:
            more = {**options, "offset": env.next_offset, "digest": env.digest}
            env = self.fetch(url, **more)
            yield env

    def submit(
        self,
        urls: Sequence[str | Mapping[str, Any]],
        *,
        idempotency_key: str,
        options: Mapping[str, Any] | None = None,
    ) -> Job:
        """``POST /v1/batch``: a new job, or (``Job.created`` false) the caller's live job
        with this key. ``urls`` are URL strings or ``{"url", "options"}`` objects;
        ``options`` are defaults for every target."""
        status, body = self._exchange(
            "POST",
            "/v1/batch",
            json=_submission(urls, options),
            headers={"Idempotency-Key": idempotency_key},
        )
        return Job(self, JobView.from_dict(body), created=status == 202)

    def crawl(self, url: str, *, idempotency_key: str, **params: Any) -> Job:
        """``POST /v1/crawl``: a crawl job (``max_pages``, ``max_depth``, ``scope``,
        ``include``, ``exclude``, ``sitemap``, ``options``); follow it like a batch job —
        each ``BatchItem`` has ``depth`` and ``parent``."""
        status, body = self._exchange(
            "POST",
            "/v1/crawl",
            json=_crawl_body(url, params),
            headers={"Idempotency-Key": idempotency_key},
        )
        return Job(self, JobView.from_dict(body), created=status == 202)

    def map(self, url: str, **params: Any) -> dict[str, Any]:
        """``POST /v1/map`` (``scope``, ``include``, ``exclude``, ``sitemap``, ``limit``):
        ``{"url", "urls", "count", "truncated", "complete"}``."""
        result: dict[str, Any] = self.request("POST", "/v1/map", json=_crawl_body(url, params))
        return result

    def job(self, job_id: str) -> Job:
        """An existing job of this caller (``NotFound`` otherwise)."""
        return Job(self, JobView.from_dict(self.request("GET", _job_path(job_id))), created=False)


class Job:
    """A batch job on the server; ``view`` is the state last seen."""

    def __init__(self, client: Client, view: JobView, *, created: bool) -> None:
        self._client = client
        self.view = view
        self.created = created

    @property
    def id(self) -> str:
        return self.view.id

    def status(self) -> JobView:
        """Ask the server for the job's state now."""
        self.view = JobView.from_dict(self._client.request("GET", _job_path(self.id)))
        return self.view

    def wait(
        self,
        progress: Progress | None = None,
        *,
        poll_s: float = DEFAULT_POLL_S,
        timeout_s: float | None = None,
    ) -> JobView:
        """Poll every ``poll_s`` until the job is finished and return its final state.
        ``progress`` is called with the state seen before the first poll and after each
        one. ``TimeoutError`` after ``timeout_s`` (the job goes on)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        view = self.view
        if progress is not None:
            progress(view)
        while not view.finished:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"batch job {self.id} still {view.status} after {timeout_s} s")
            time.sleep(poll_s)
            view = self.status()
            if progress is not None:
                progress(view)
        return view

    def results(self, *, page_size: int = RESULTS_PAGE_SIZE) -> Iterator[BatchItem]:
        """Every target in order, across result pages (pending ones while the job runs)."""
        offset: int | None = 0
        while offset is not None:
            page = self._client.request(
                "GET",
                f"{_job_path(self.id)}/results",
                params={"offset": offset, "limit": page_size},
            )
            for item in page["items"]:
                yield BatchItem.from_dict(item)
            offset = page["next_offset"]

    def results_ndjson(self) -> Iterator[bytes]:
        """The finished targets as the server's NDJSON, raw bytes in chunks as they arrive."""
        http = self._client._http
        try:
            with http.stream("GET", f"{_job_path(self.id)}/results.ndjson") as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for(response)
                yield from response.iter_bytes()
        except httpx.TransportError as exc:
            raise _transport_error(self._client.base_url, exc) from exc

    def cancel(self) -> JobView:
        """Cancel the job (a finished job is left as it is); its state after."""
        self.view = JobView.from_dict(self._client.request("DELETE", _job_path(self.id)))
        return self.view


class AsyncClient:
    """The asyncio twin of ``Client``."""

    def __init__(
        self, base_url: str, key: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=_headers(key), timeout=timeout_s
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _exchange(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise _transport_error(self.base_url, exc) from exc
        return response.status_code, _raise_for(response)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return (await self._exchange(method, path, **kwargs))[1]

    async def fetch(self, url: str, **options: Any) -> Envelope:
        body = await self.request("POST", "/v1/fetch", json=_body(url, options))
        return Envelope.from_dict(body)

    async def read(self, url: str, **options: Any) -> AsyncIterator[Envelope]:
        env = await self.fetch(url, **options)
        yield env
        while env.next_offset is not None:
            more = {**options, "offset": env.next_offset, "digest": env.digest}
            env = await self.fetch(url, **more)
            yield env

    async def submit(
        self,
        urls: Sequence[str | Mapping[str, Any]],
        *,
        idempotency_key: str,
        options: Mapping[str, Any] | None = None,
    ) -> AsyncJob:
        status, body = await self._exchange(
            "POST",
            "/v1/batch",
            json=_submission(urls, options),
            headers={"Idempotency-Key": idempotency_key},
        )
        return AsyncJob(self, JobView.from_dict(body), created=status == 202)

    async def crawl(self, url: str, *, idempotency_key: str, **params: Any) -> AsyncJob:
        status, body = await self._exchange(
            "POST",
            "/v1/crawl",
            json=_crawl_body(url, params),
            headers={"Idempotency-Key": idempotency_key},
        )
        return AsyncJob(self, JobView.from_dict(body), created=status == 202)

    async def map(self, url: str, **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "POST", "/v1/map", json=_crawl_body(url, params)
        )
        return result

    async def job(self, job_id: str) -> AsyncJob:
        view = JobView.from_dict(await self.request("GET", _job_path(job_id)))
        return AsyncJob(self, view, created=False)


class AsyncJob:
    """The asyncio twin of ``Job``."""

    def __init__(self, client: AsyncClient, view: JobView, *, created: bool) -> None:
        self._client = client
        self.view = view
        self.created = created

    @property
    def id(self) -> str:
        return self.view.id

    async def status(self) -> JobView:
        self.view = JobView.from_dict(await self._client.request("GET", _job_path(self.id)))
        return self.view

    async def wait(
        self,
        progress: Progress | None = None,
        *,
        poll_s: float = DEFAULT_POLL_S,
        timeout_s: float | None = None,
    ) -> JobView:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        view = self.view
        if progress is not None:
            progress(view)
        while not view.finished:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"batch job {self.id} still {view.status} after {timeout_s} s")
            await asyncio.sleep(poll_s)
            view = await self.status()
            if progress is not None:
                progress(view)
        return view

    async def results(self, *, page_size: int = RESULTS_PAGE_SIZE) -> AsyncIterator[BatchItem]:
        offset: int | None = 0
        while offset is not None:
            page = await self._client.request(
                "GET",
                f"{_job_path(self.id)}/results",
                params={"offset": offset, "limit": page_size},
            )
            for item in page["items"]:
                yield BatchItem.from_dict(item)
            offset = page["next_offset"]

    async def results_ndjson(self) -> AsyncIterator[bytes]:
        http = self._client._http
        try:
            async with http.stream("GET", f"{_job_path(self.id)}/results.ndjson") as response:
                if response.status_code >= 400:
                    await response.aread()
                    _raise_for(response)
                async for chunk in response.aiter_bytes():
                    yield chunk
        except httpx.TransportError as exc:
            raise _transport_error(self._client.base_url, exc) from exc

    async def cancel(self) -> JobView:
        self.view = JobView.from_dict(await self._client.request("DELETE", _job_path(self.id)))
        return self.view
