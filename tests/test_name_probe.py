"""A restricted caller cannot tell an internal name from one that does not exist (issue 24,
finding 11).

Before: a name resolving to a private address was answered ``403 blocked_address`` and an
unknown one ``502 dns_failure``, so a restricted key could map the internal DNS zone by
probing names (``gitlab.corp``: 403, it exists). Now both get one answer, the same status,
code, message (but for the name the caller sent) and hint, through every route that resolves
a caller's URL. The lab: ``internal.test`` is mapped by ``[egress.resolve]`` to a loopback
canary on a port the restricted class may use (so only the address rule refuses it); the
resolver behind knows no other name. The canary must never see a connection.
"""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any

import httpx

from apphelpers import RESTRICTED_KEY, auth, make_settings, running_app
from sift.config import EgressSettings
from upstream import CanaryListener, reserve_port


def _same_but_the_name(refused: dict[str, Any], unknown: dict[str, Any]) -> None:
    assert refused == {
        "error": {
            **unknown["error"],
            "message": unknown["error"]["message"].replace("nosuch.test", "internal.test"),
        }
    }


async def test_restricted_cannot_tell_refused_names_from_unknown_ones(tmp_path: Path) -> None:
    port, socks = reserve_port(["127.0.0.1"])
    canary = CanaryListener(socks.values())
    settings = make_settings(tmp_path, upstream_port=port)
    egress = EgressSettings(
        extra_public_cidrs=settings.egress.extra_public_cidrs,
        resolve=types.MappingProxyType({"internal.test": ("127.0.0.1",)}),
    )
    settings = dataclasses.replace(settings, egress=egress)
    headers = auth(RESTRICTED_KEY)
    try:
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client,
        ):
            answers: dict[str, list[httpx.Response]] = {}
            for name in ("internal.test", "nosuch.test"):
                url = f"http://{name}:{port}/"
                answers[name] = [
                    await client.post("/v1/fetch", json={"url": url}),
                    await client.get("/v1/fetch", params={"url": url}),  # robots now cached
                    await client.post(
                        "/v1/crawl", json={"url": url}, headers={"Idempotency-Key": name}
                    ),
                    await client.post("/v1/map", json={"url": url}),
                ]
        for refused, unknown in zip(answers["internal.test"], answers["nosuch.test"], strict=True):
            assert refused.status_code == unknown.status_code == 502
            _same_but_the_name(refused.json(), unknown.json())
        fetched = answers["nosuch.test"][0].json()["error"]
        assert fetched["code"] == "dns_failure"
        crawl = answers["nosuch.test"][2].json()["error"]
        assert crawl == {
            "code": "dns_failure",
            "message": "The host name 'nosuch.test' does not resolve to an address this caller "
            "may reach.",
            "hint": "Check the host name: this caller reaches public addresses only, and this "
            "name resolves to none of them (or to nothing at all).",
        }
        assert canary.accepted() == 0
    finally:
        for sock in socks.values():
            sock.close()
