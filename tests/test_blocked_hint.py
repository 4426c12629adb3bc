"""A refused address says what this caller can do about it: a restricted caller is told to
ask for a fleet key, a fleet caller to ask the operator to allow the range. The message stays
the same for every rule (nothing about which rule fired leaks), and nothing is connected to.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from servehelpers import sift_serve, write_config
from sift.errors import Blocked
from sift.fetch import BLOCKED_MESSAGE, Fetcher, FetchPolicy, StaticResolver
from sift.fetch.egress import FLEET_NO_PRIVATE_HINT, FLEET_PRIVATE_HINT, RESTRICTED_HINT
from syncupstream import serve_pages

pytestmark = pytest.mark.slow


def test_blocked_hint_fits_the_callers_class(tmp_path: Path) -> None:
    # Fleet may reach private addresses, but only 127.0.2.0/24: the upstream on 127.0.0.1
    # is outside it. Restricted may never reach loopback.
    config = write_config(tmp_path, 'private_cidrs = ["127.0.2.0/24"]\n')
    with (
        serve_pages({"/p": ("<p>private</p>", "text/html")}) as up,
        sift_serve(tmp_path, config=config) as served,
    ):
        for key, hint in (
            (served.fleet_key, FLEET_PRIVATE_HINT),
            (served.restricted_key, RESTRICTED_HINT),
        ):
            r = httpx.post(
                f"{served.base_url}/v1/fetch",
                json={"url": f"{up.base_url}/p"},
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            )
            assert (r.status_code, r.json()) == (
                403,
                {"error": {"code": "blocked_address", "message": BLOCKED_MESSAGE, "hint": hint}},
            )
        assert up.hits["/p"] == 0


async def test_a_fleet_policy_without_private_access_is_told_how_to_get_it() -> None:
    async with Fetcher(user_agent="sift-test", resolver=StaticResolver({})) as fetcher:
        with pytest.raises(Blocked) as info:
            # Never connected to: refused on the literal address before any I/O.
            await fetcher.fetch("http://127.0.0.1:9/", FetchPolicy(allow_private=False))
    assert (info.value.message, info.value.hint) == (BLOCKED_MESSAGE, FLEET_NO_PRIVATE_HINT)
