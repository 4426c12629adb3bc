"""The synchronous client: ``Client`` and its ``Job``. Every call is built and read by
``core``; this module only sends it (``httpx.Client``) and sleeps (``time.sleep``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from sift.client import core
from sift.client import watches as wcalls
from sift.client.wire import BatchItem, Envelope, JobView, Progress

T = TypeVar("T")


class Client:
    """Synchronous client. ``key`` may be None for an anonymous (no callers) server."""

    def __init__(
        self, base_url: str, key: str | None = None, *, timeout_s: float = core.DEFAULT_TIMEOUT_S
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=core.auth_headers(key), timeout=timeout_s
        )

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
            raise core.transport_error(self.base_url, exc) from exc
        return response.status_code, core.raise_for(response)

    def _send(self, call: core.Call[T]) -> T:
        return call.read(*self._exchange(call.method, call.path, **call.kwargs()))

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; the decoded JSON body, or the server's error raised."""
        return self._exchange(method, path, **kwargs)[1]

    def fetch(self, url: str, **options: Any) -> Envelope:
        """``POST /v1/fetch`` with ``options`` (format, max_bytes, offset, digest, …;
        ``changes=True``, ``tag``, ``ignore``: the envelope's ``change``)."""
        return self._send(core.fetch_call(url, options))

    def screenshot(self, shot: Envelope | Mapping[str, Any] | str) -> bytes:
        """The image of a ``format="screenshot"`` fetch (its envelope, its ``screenshot``
        object or the digest): ``GET /v1/screenshots/{digest}``, this caller's only."""
        try:
            response = self._http.get(core.screenshot_path(shot))
        except httpx.TransportError as exc:
            raise core.transport_error(self.base_url, exc) from exc
        return core.image_of(response)

    def read(self, url: str, **options: Any) -> Iterator[Envelope]:
        """Every slice of one snapshot of ``url``, following ``next_offset`` and ``digest``."""
        env = self.fetch(url, **options)
        yield env
        while (more := core.next_slice(options, env)) is not None:
            env = self.fetch(url, **more)
            yield env

    def submit(
        self,
        urls: Sequence[str | Mapping[str, Any]],
        *,
        idempotency_key: str,
        options: Mapping[str, Any] | None = None,
        webhook: str | None = None,
    ) -> Job:
        """``POST /v1/batch``: a new job, or (``Job.created`` false) the caller's live job
        with this key. ``urls`` are URL strings or ``{"url", "options"}`` objects;
        ``options`` are defaults for every target; ``webhook``: a URL that gets a signed
        ``job.finished`` event when the job ends (its secret: ``job.view.webhook_secret``,
        in this answer only)."""
        view, created = self._send(core.submit_call(urls, idempotency_key, options, webhook))
        return Job(self, view, created=created)

    def crawl(self, url: str, *, idempotency_key: str, **params: Any) -> Job:
        """``POST /v1/crawl``: a crawl job (``max_pages``, ``max_depth``, ``scope``,
        ``include``, ``exclude``, ``sitemap``, ``options``); follow it like a batch job —
        each ``BatchItem`` has ``depth`` and ``parent``."""
        view, created = self._send(core.crawl_call(url, idempotency_key, params))
        return Job(self, view, created=created)

    def map(self, url: str, **params: Any) -> dict[str, Any]:
        """``POST /v1/map`` (``scope``, ``include``, ``exclude``, ``sitemap``, ``limit``):
        ``{"url", "urls", "count", "truncated", "complete"}``."""
        return self._send(core.map_call(url, params))

    def create_watch(
        self,
        url: str,
        every: float | str,
        *,
        options: dict[str, Any] | None = None,
        ignore: Sequence[str] | None = None,
        webhook: str | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/watches``: check ``url`` every ``every`` (seconds or "30m", "2h")."""
        return self._send(
            wcalls.create_call(url, every, options=options, ignore=ignore, webhook=webhook)
        )

    def list_watches(self) -> list[dict[str, Any]]:
        return self._send(wcalls.list_call())

    def get_watch(self, watch_id: str, *, events: int = 20) -> dict[str, Any]:
        """The watch and its newest ``events`` checks (changes with diffs), newest first."""
        return self._send(wcalls.get_call(watch_id, events))

    def delete_watch(self, watch_id: str) -> dict[str, Any]:
        return self._send(wcalls.delete_call(watch_id))

    def job(self, job_id: str) -> Job:
        """An existing job of this caller (``NotFound`` otherwise)."""
        return Job(self, self._send(core.job_call(job_id)), created=False)


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
        self.view = self._client._send(core.job_call(self.id))
        return self.view

    def wait(
        self,
        progress: Progress | None = None,
        *,
        poll_s: float = core.DEFAULT_POLL_S,
        timeout_s: float | None = None,
    ) -> JobView:
        """Poll every ``poll_s`` until the job is finished and return its final state.
        ``progress`` is called with the state seen before the first poll and after each
        one. ``TimeoutError`` after ``timeout_s`` (the job goes on)."""
        waiter = core.Waiter(self.id, progress, timeout_s)
        view = self.view
        while not waiter.done(view):
            time.sleep(poll_s)
            view = self.status()
        return view

    def results(self, *, page_size: int = core.RESULTS_PAGE_SIZE) -> Iterator[BatchItem]:
        """Every target in order, across result pages (pending ones while the job runs)."""
        offset: int | None = 0
        while offset is not None:
            items, offset = self._client._send(core.results_call(self.id, offset, page_size))
            yield from items

    def results_ndjson(self) -> Iterator[bytes]:
        """The finished targets as the server's NDJSON, raw bytes in chunks as they arrive."""
        http = self._client._http
        try:
            with http.stream("GET", core.ndjson_path(self.id)) as response:
                if response.status_code >= 400:
                    response.read()
                    core.raise_for(response)
                yield from response.iter_bytes()
        except httpx.TransportError as exc:
            raise core.transport_error(self._client.base_url, exc) from exc

    def cancel(self) -> JobView:
        """Cancel the job (a finished job is left as it is); its state after."""
        self.view = self._client._send(core.cancel_call(self.id))
        return self.view
