"""The core both client twins share: every API call built as a ``Call`` (what to send, how to
read the answer), the answer checked and errors rebuilt, transport failures translated, and
the bookkeeping of waiting on a job. ``sync.Client`` and ``aio.AsyncClient`` differ only in
how they send a ``Call`` and how they sleep (httpx's way: one core, two thin front ends)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar
from urllib.parse import quote

import httpx

from sift.client.wire import BatchItem, Envelope, JobView, Progress, error_from_response
from sift.errors import SiftError, SiftTimeout, SiftUnavailable

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_POLL_S: Final = 0.5
RESULTS_PAGE_SIZE: Final = 100

T = TypeVar("T")
# A submitted job: its state and whether this call created it (202) or found it (200).
Submitted = tuple[JobView, bool]
# One page of a job's results: the items and the offset of the next page (None: the last).
ResultsPage = tuple[list[BatchItem], int | None]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API call: the request to send and ``read``, which turns the answer's status and
    decoded JSON body into the result."""

    method: str
    path: str
    read: Callable[[int, Any], T]
    json: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    headers: dict[str, str] | None = None

    def kwargs(self) -> dict[str, Any]:
        """The httpx request arguments this call sets."""
        given = {"json": self.json, "params": self.params, "headers": self.headers}
        return {k: v for k, v in given.items() if v is not None}


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def raise_for(response: httpx.Response) -> Any:
    """The decoded JSON body of a successful answer; the server's error rebuilt and raised
    otherwise (``Retry-After`` kept on it). An answer that is not sift's (no JSON, no error
    object: a proxy in front of a stopped sift) raises ``SiftUnavailable``."""
    try:
        body = response.json()
    except ValueError:
        body = None
    where = _origin(response)
    if response.status_code >= 400:
        err = body.get("error") if isinstance(body, dict) else None
        if not isinstance(err, dict):
            raise SiftUnavailable(
                f"sift at {where} is not answering: HTTP {response.status_code} came back "
                "without sift's error object (a proxy in front of a stopped sift, or not sift)"
            )
        exc = error_from_response(response.status_code, body)
        if "retry-after" in response.headers:
            exc.headers["Retry-After"] = response.headers["retry-after"]
        raise exc
    if body is None:
        raise SiftUnavailable(
            f"sift at {where} answered HTTP {response.status_code} without a JSON body "
            "(is that address sift?)"
        )
    return body


def _origin(response: httpx.Response) -> str:
    url = response.request.url
    return f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"


def transport_error(base_url: str, exc: httpx.TransportError) -> SiftError:
    """The client-side error an httpx transport failure stands for (raised ``from`` it):
    ``SiftTimeout`` when sift did not answer in time, ``SiftUnavailable`` when it could not
    be reached at all. Never an ``UpstreamError``: those are sift's reports on the target."""
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        return SiftTimeout(
            f"sift at {base_url} did not answer in time ({type(exc).__name__}); the target "
            "site's own errors come back from sift as upstream_* errors instead"
        )
    return SiftUnavailable(
        f"cannot reach sift at {base_url} ({type(exc).__name__}: {exc or 'no detail'}); "
        "sift itself is down or unreachable, the target site was never asked"
    )


def job_path(job_id: str) -> str:
    return "/v1/batch/" + quote(job_id, safe="")


def _given(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"url": url, **{k: v for k, v in options.items() if v is not None}}


def _envelope(_status: int, body: Any) -> Envelope:
    return Envelope.from_dict(body)


def _submitted(status: int, body: Any) -> Submitted:
    return JobView.from_dict(body), status == 202


def _view(_status: int, body: Any) -> JobView:
    return JobView.from_dict(body)


def _mapping(_status: int, body: Any) -> dict[str, Any]:
    result: dict[str, Any] = body
    return result


def _page(_status: int, body: Any) -> ResultsPage:
    return [BatchItem.from_dict(item) for item in body["items"]], body["next_offset"]


def fetch_call(url: str, options: Mapping[str, Any]) -> Call[Envelope]:
    """``POST /v1/fetch`` with ``options`` (those set to None are left out)."""
    return Call("POST", "/v1/fetch", _envelope, json=_given(url, options))


def next_slice(options: Mapping[str, Any], env: Envelope) -> dict[str, Any] | None:
    """The options that fetch the slice after ``env`` of the same snapshot, or None when
    ``env`` was the last."""
    if env.next_offset is None:
        return None
    return {**options, "offset": env.next_offset, "digest": env.digest}


def screenshot_path(shot: Envelope | Mapping[str, Any] | str) -> str:
    """Where a screenshot is: given a ``format="screenshot"`` envelope, its ``screenshot``
    object, or the image's digest."""
    if isinstance(shot, Envelope):
        if shot.screenshot is None:
            raise ValueError("this envelope has no screenshot (fetch with format='screenshot')")
        shot = shot.screenshot
    digest = shot if isinstance(shot, str) else str(shot["digest"])
    return "/v1/screenshots/" + quote(digest, safe=":")


def image_of(response: httpx.Response) -> bytes:
    """The image bytes of a screenshot answer; the server's error raised otherwise."""
    if response.status_code >= 400:
        raise_for(response)
    return response.content


def submit_call(
    urls: Sequence[str | Mapping[str, Any]],
    idempotency_key: str,
    options: Mapping[str, Any] | None,
    webhook: str | None = None,
) -> Call[Submitted]:
    """``POST /v1/batch``: ``urls`` are URL strings or ``{"url", "options"}`` objects;
    ``webhook``: where the signed ``job.finished`` event goes."""
    body: dict[str, Any] = {"targets": [u if isinstance(u, str) else dict(u) for u in urls]}
    if options:
        body["options"] = dict(options)
    if webhook is not None:
        body["webhook"] = webhook
    return Call(
        "POST", "/v1/batch", _submitted, json=body, headers={"Idempotency-Key": idempotency_key}
    )


def crawl_call(url: str, idempotency_key: str, params: Mapping[str, Any]) -> Call[Submitted]:
    """``POST /v1/crawl`` with ``params`` (those set to None are left out)."""
    return Call(
        "POST",
        "/v1/crawl",
        _submitted,
        json=_given(url, params),
        headers={"Idempotency-Key": idempotency_key},
    )


def map_call(url: str, params: Mapping[str, Any]) -> Call[dict[str, Any]]:
    """``POST /v1/map`` with ``params`` (those set to None are left out)."""
    return Call("POST", "/v1/map", _mapping, json=_given(url, params))


def job_call(job_id: str) -> Call[JobView]:
    """``GET /v1/batch/{id}``: the job's state."""
    return Call("GET", job_path(job_id), _view)


def cancel_call(job_id: str) -> Call[JobView]:
    """``DELETE /v1/batch/{id}``: cancel the job; its state after."""
    return Call("DELETE", job_path(job_id), _view)


def results_call(job_id: str, offset: int, page_size: int) -> Call[ResultsPage]:
    """``GET /v1/batch/{id}/results``: one page of targets, in order."""
    return Call(
        "GET",
        f"{job_path(job_id)}/results",
        _page,
        params={"offset": offset, "limit": page_size},
    )


def ndjson_path(job_id: str) -> str:
    """Where a job's finished targets stream as NDJSON."""
    return f"{job_path(job_id)}/results.ndjson"


class Waiter:
    """The bookkeeping of waiting on a job, shared by ``Job.wait`` and ``AsyncJob.wait``:
    each state seen goes to ``progress``; past ``timeout_s`` a live job raises
    ``TimeoutError`` (the job goes on)."""

    def __init__(self, job_id: str, progress: Progress | None, timeout_s: float | None) -> None:
        self._job_id = job_id
        self._progress = progress
        self._timeout_s = timeout_s
        self._deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def done(self, view: JobView) -> bool:
        """Report ``view``; True once the job is finished, False to poll again."""
        if self._progress is not None:
            self._progress(view)
        if view.finished:
            return True
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise TimeoutError(
                f"batch job {self._job_id} still {view.status} after {self._timeout_s} s"
            )
        return False
