"""The asyncio client: ``AsyncClient`` and its ``AsyncJob``, twins of ``sync.Client`` and
``sync.Job``. Every call is built and read by ``core``; this module only sends it
(``httpx.AsyncClient``) and sleeps (``asyncio.sleep``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from sift.client import core
from sift.client import watches as wcalls
from sift.client.wire import BatchItem, Envelope, JobView, Progress

T = TypeVar("T")


class AsyncClient:
    """The asyncio twin of ``Client``."""

    def __init__(
        self, base_url: str, key: str | None = None, *, timeout_s: float = core.DEFAULT_TIMEOUT_S
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=core.auth_headers(key), timeout=timeout_s
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
            raise core.transport_error(self.base_url, exc) from exc
        return response.status_code, core.raise_for(response)

    async def _send(self, call: core.Call[T]) -> T:
        return call.read(*await self._exchange(call.method, call.path, **call.kwargs()))

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return (await self._exchange(method, path, **kwargs))[1]

    async def fetch(self, url: str, **options: Any) -> Envelope:
        return await self._send(core.fetch_call(url, options))

    async def screenshot(self, shot: Envelope | Mapping[str, Any] | str) -> bytes:
        try:
            response = await self._http.get(core.screenshot_path(shot))
        except httpx.TransportError as exc:
            raise core.transport_error(self.base_url, exc) from exc
        return core.image_of(response)

    async def read(self, url: str, **options: Any) -> AsyncIterator[Envelope]:
        env = await self.fetch(url, **options)
        yield env
        while (more := core.next_slice(options, env)) is not None:
            env = await self.fetch(url, **more)
            yield env

    async def submit(
        self,
        urls: Sequence[str | Mapping[str, Any]],
        *,
        idempotency_key: str,
        options: Mapping[str, Any] | None = None,
        webhook: str | None = None,
    ) -> AsyncJob:
        view, created = await self._send(core.submit_call(urls, idempotency_key, options, webhook))
        return AsyncJob(self, view, created=created)

    async def crawl(self, url: str, *, idempotency_key: str, **params: Any) -> AsyncJob:
        view, created = await self._send(core.crawl_call(url, idempotency_key, params))
        return AsyncJob(self, view, created=created)

    async def map(self, url: str, **params: Any) -> dict[str, Any]:
        return await self._send(core.map_call(url, params))

    async def create_watch(
        self,
        url: str,
        every: float | str,
        *,
        options: dict[str, Any] | None = None,
        ignore: Sequence[str] | None = None,
        webhook: str | None = None,
    ) -> dict[str, Any]:
        return await self._send(
            wcalls.create_call(url, every, options=options, ignore=ignore, webhook=webhook)
        )

    async def list_watches(self) -> list[dict[str, Any]]:
        return await self._send(wcalls.list_call())

    async def get_watch(self, watch_id: str, *, events: int = 20) -> dict[str, Any]:
        return await self._send(wcalls.get_call(watch_id, events))

    async def delete_watch(self, watch_id: str) -> dict[str, Any]:
        return await self._send(wcalls.delete_call(watch_id))

    async def job(self, job_id: str) -> AsyncJob:
        return AsyncJob(self, await self._send(core.job_call(job_id)), created=False)


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
        self.view = await self._client._send(core.job_call(self.id))
        return self.view

    async def wait(
        self,
        progress: Progress | None = None,
        *,
        poll_s: float = core.DEFAULT_POLL_S,
        timeout_s: float | None = None,
    ) -> JobView:
        waiter = core.Waiter(self.id, progress, timeout_s)
        view = self.view
        while not waiter.done(view):
            await asyncio.sleep(poll_s)
            view = await self.status()
        return view

    async def results(self, *, page_size: int = core.RESULTS_PAGE_SIZE) -> AsyncIterator[BatchItem]:
        offset: int | None = 0
        while offset is not None:
            items, offset = await self._client._send(core.results_call(self.id, offset, page_size))
            for item in items:
                yield item

    async def results_ndjson(self) -> AsyncIterator[bytes]:
        http = self._client._http
        try:
            async with http.stream("GET", core.ndjson_path(self.id)) as response:
                if response.status_code >= 400:
                    await response.aread()
                    core.raise_for(response)
                async for chunk in response.aiter_bytes():
                    yield chunk
        except httpx.TransportError as exc:
            raise core.transport_error(self._client.base_url, exc) from exc

    async def cancel(self) -> JobView:
        self.view = await self._client._send(core.cancel_call(self.id))
        return self.view
