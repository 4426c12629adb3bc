"""A typed Python client for a running sift: ``Client`` (sync) and ``AsyncClient`` (asyncio).

    from sift.client import Client
    with Client("http://127.0.0.1:8080", key="sift_…") as sift:
        page = sift.fetch("https://example.com/", max_bytes=4096)
        print(page.title, page.content)
        for piece in sift.read("https://example.com/long"):   # follows next_offset
            ...

Errors raise the same classes the server uses, rebuilt from the error object, so
``except sift.errors.BlockedAddress`` … ``except Blocked`` works remotely as in-process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import httpx

from sift.errors import SiftError, UpstreamError, all_error_classes

_BY_CODE: dict[str, type[SiftError]] = {cls.code: cls for cls in all_error_classes()}
DEFAULT_TIMEOUT_S = 60.0


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
    warnings: list[str] = field(default_factory=list)
    links: list[dict[str, str]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Envelope:
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        return cls(**known, extra={k: v for k, v in data.items() if k not in names})


def error_from_response(status: int, body: Any) -> SiftError:
    """Rebuild the server's exception from its ``{"error": {...}}`` body."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return UpstreamError(f"sift answered HTTP {status} without an error object")
    code = str(err.get("code", "internal_error"))
    cls = _BY_CODE.get(code, SiftError)
    exc = cls(str(err.get("message", "")), hint=str(err.get("hint", "")))
    return exc


def _raise_for(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        raise error_from_response(response.status_code, body)
    return body


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _body(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"url": url, **{k: v for k, v in options.items() if v is not None}}


class Client:
    """Synchronous client. ``key`` may be None for an anonymous (no callers) server."""

    def __init__(
        self, base_url: str, key: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=_headers(key), timeout=timeout_s
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; the decoded JSON body, or the server's error raised."""
        return _raise_for(self._http.request(method, path, **kwargs))

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


class AsyncClient:
    """The asyncio twin of ``Client``."""

    def __init__(
        self, base_url: str, key: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=_headers(key), timeout=timeout_s
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return _raise_for(await self._http.request(method, path, **kwargs))

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
