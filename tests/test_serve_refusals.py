"""Refusals on a real `sift serve` that say what the caller can do about them.

- A refused address: a restricted caller is told to ask for a fleet key, a fleet caller to
  ask the operator to allow the range. The message stays the same for every rule (nothing
  about which rule fired leaks), and nothing is connected to.
- ``max_bytes`` below one 4-byte character is refused up front (422), as the OpenAPI schema
  says, on /v1/fetch and /v1/batch alike: nothing is fetched or stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from servehelpers import Served, sift_serve, write_config
from sift.errors import Blocked
from sift.fetch import BLOCKED_MESSAGE, Fetcher, FetchPolicy, StaticResolver
from sift.fetch.egress import FLEET_NO_PRIVATE_HINT, FLEET_PRIVATE_HINT, RESTRICTED_HINT
from sift.options import MAX_INT, MIN_MAX_BYTES
from syncupstream import SyncUpstream, serve_pages

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # Fleet may reach private addresses, but only 127.0.2.0/24: an upstream on 127.0.0.1
    # is outside it. Restricted may never reach loopback.
    tmp = tmp_path_factory.mktemp("refusals")
    config = write_config(tmp, 'private_cidrs = ["127.0.2.0/24"]\n')
    with sift_serve(tmp, config=config) as s:
        yield s


@pytest.fixture
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages({"/p": ("<p>private</p>", "text/html")}) as up:
        yield up


def _post(served: Served, path: str, key: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "refusal-test"}
    return httpx.post(f"{served.base_url}{path}", json=body, headers=headers, timeout=30)


def test_blocked_hint_fits_the_callers_class(served: Served, upstream: SyncUpstream) -> None:
    for key, hint in (
        (served.fleet_key, FLEET_PRIVATE_HINT),
        (served.restricted_key, RESTRICTED_HINT),
    ):
        r = _post(served, "/v1/fetch", key, {"url": f"{upstream.base_url}/p"})
        assert (r.status_code, r.json()) == (
            403,
            {"error": {"code": "blocked_address", "message": BLOCKED_MESSAGE, "hint": hint}},
        )
    assert upstream.hits["/p"] == 0


@pytest.mark.parametrize("max_bytes", [1, 2, 3])
def test_max_bytes_below_one_character_is_refused_up_front(
    served: Served, upstream: SyncUpstream, max_bytes: int
) -> None:
    url = f"{upstream.base_url}/p"
    problem = f"max_bytes: must be between {MIN_MAX_BYTES} and {MAX_INT}"
    fetch = _post(served, "/v1/fetch", served.fleet_key, {"url": url, "max_bytes": max_bytes})
    assert (fetch.status_code, fetch.json()["error"]["message"]) == (
        422,
        f"invalid options: {problem}",
    )
    batch = _post(
        served,
        "/v1/batch",
        served.fleet_key,
        {"targets": [url], "options": {"max_bytes": max_bytes}},
    )
    assert (batch.status_code, batch.json()["error"]["message"]) == (
        422,
        f"default invalid options: {problem}",
    )
    # The smallest allowed slice passes validation (and is then refused for the address).
    four = _post(served, "/v1/fetch", served.fleet_key, {"url": url, "max_bytes": MIN_MAX_BYTES})
    assert (four.status_code, four.json()["error"]["code"]) == (403, "blocked_address")
    assert upstream.hits["/p"] == 0


async def test_a_fleet_policy_without_private_access_is_told_how_to_get_it() -> None:
    async with Fetcher(user_agent="sift-test", resolver=StaticResolver({})) as fetcher:
        with pytest.raises(Blocked) as info:
            # Never connected to: refused on the literal address before any I/O.
            await fetcher.fetch("http://127.0.0.1:9/", FetchPolicy(allow_private=False))
    assert (info.value.message, info.value.hint) == (BLOCKED_MESSAGE, FLEET_NO_PRIVATE_HINT)
