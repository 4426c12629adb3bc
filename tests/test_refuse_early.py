"""Refused early (issue 21, item 13): a URL the caller's egress policy refuses without a DNS
lookup is refused when the batch or crawl is submitted — 422 ``invalid_request`` naming
each such URL and why — not stored to fail target by target. Through the HTTP API, MCP (over
HTTP here, over stdio in test_mcp_stdio.py) and the Python client.

Loopback only: the refused URLs that could ever be dialled point at a loopback canary (its
accept count stays 0); private and link-local literals appear only in the pure check of
``parse_submission``, where no runner exists that could fetch anything.
"""

from __future__ import annotations

import asyncio
import dataclasses
import types
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from apphelpers import PUBLIC_HOST, PUBLIC_NAME, RESTRICTED_KEY, auth, make_settings, running_app
from batchrig import batch_rig
from mcphelpers import call, error_of, mcp_http_session
from sift.batch.submit import egress_check, parse_submission
from sift.client import AsyncClient
from sift.config import EgressSettings
from sift.errors import BadRequest
from sift.principal import Principal
from upstream import CanaryListener

WHY = "blocked_address (its host, address or port is outside this caller's egress policy)"
AGENT = Principal("agent", "restricted")
# [egress.resolve] names: one mapped to the loopback canary, one to a public test address.
CANARY_NAME = "canary.test"


def refused(total: int, entries: list[tuple[int, str]]) -> str:
    listed = "; ".join(f"[{i}] {url}: {WHY}" for i, url in entries)
    return f"{len(entries)} of {total} targets are refused before any fetch: {listed}"


def start_refused(url: str) -> str:
    return f"the start URL is refused before any fetch: {url}: {WHY}"


@dataclass
class Env:
    base: str
    client: httpx.AsyncClient
    canary: CanaryListener
    port: int  # the canary's port

    def loopback_urls(self) -> list[str]:
        """127.0.0.1 spelled every way a URL may spell it (a name mapped to it is not refused
        at submit for this restricted caller: see the test below)."""
        p = self.port
        return [
            f"http://127.0.0.1:{p}/",
            f"http://127.1:{p}/short",
            f"http://2130706433:{p}/decimal",
            f"http://0177.0.0.1:{p}/octal",
            f"http://0x7f.0.0.1:{p}/hex",
            f"http://[::1]:{p}/v6",
            f"http://[0:0:0:0:0:0:0:1]:{p}/v6-long",
            f"http://[::ffff:127.0.0.1]:{p}/mapped",
            f"http://[::ffff:7f00:1]:{p}/mapped-hex",
        ]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    canary = CanaryListener.on(["127.0.0.1"])
    port = canary._socks[0].getsockname()[1]
    settings = make_settings(tmp_path, upstream_port=port)  # the restricted class may use it
    egress = EgressSettings(
        extra_public_cidrs=("127.0.1.0/24",),
        resolve=types.MappingProxyType({PUBLIC_NAME: (PUBLIC_HOST,), CANARY_NAME: ("127.0.0.1",)}),
    )
    settings = dataclasses.replace(settings, egress=egress)
    try:
        async with (
            running_app(settings) as base,
            httpx.AsyncClient(base_url=base, headers=auth(RESTRICTED_KEY), timeout=30) as client,
        ):
            yield Env(base, client, canary, port)
    finally:
        assert canary.accepted() == 0
        canary.close()


async def test_every_spelling_is_refused_at_submit_over_http(env: Env) -> None:
    urls = env.loopback_urls()
    targets = [f"http://{PUBLIC_NAME}:{env.port}/fine", *urls]
    r = await env.client.post(
        "/v1/batch", json={"targets": targets}, headers={"Idempotency-Key": "a"}
    )
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"] == refused(len(targets), list(enumerate(targets))[1:])
    assert error["hint"] == (
        "This caller may only reach public addresses on allowed ports; ask the operator for "
        "a fleet key if you need more. Remove or fix the listed targets (by index) and submit "
        "again; nothing was stored."
    )
    assert (await env.client.get("/v1/batch")).json()["items"] == []
    # The crawl's and the map's start URL, alike.
    for route in ("/v1/crawl", "/v1/map"):
        for url in (urls[2], urls[-1]):  # decimal, and IPv4-mapped in hex
            r = await env.client.post(route, json={"url": url}, headers={"Idempotency-Key": "c"})
            assert (r.status_code, r.json()["error"]["message"]) == (422, start_refused(url))
    assert (await env.client.get("/v1/batch")).json()["items"] == []


async def test_a_mapped_internal_name_is_not_told_from_an_unknown_one(env: Env) -> None:
    """Refusing a name ``[egress.resolve]`` maps to loopback at submit would tell a
    restricted caller that the name exists inside (issue 24, finding 11): it is accepted
    exactly like a name nobody knows, and both fail alike when fetched."""
    answers = []
    for i, host in enumerate((CANARY_NAME, "nowhere.test")):
        r = await env.client.post(
            "/v1/batch",
            json={"targets": [f"http://{host}:{env.port}/"]},
            headers={"Idempotency-Key": f"m{i}"},
        )
        assert r.status_code == 202, r.text
        answers.append(await _finished_error(env, r.json()["id"]))
    assert answers[0] == answers[1] != {}
    assert answers[0]["code"] == "dns_failure"


async def _finished_error(env: Env, job_id: str) -> dict[str, str]:
    """The error object of the job's one target once the app's runner has run it, with the
    host name taken out (each answer names its own)."""
    for _ in range(2000):
        view = (await env.client.get(f"/v1/batch/{job_id}")).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.01)  # the job runs in the app's runner
    items = (await env.client.get(f"/v1/batch/{job_id}/results")).json()["items"]
    error: dict[str, str] = items[0]["error"]
    return {
        k: v.replace(CANARY_NAME, "NAME").replace("nowhere.test", "NAME") for k, v in error.items()
    }


async def test_a_name_that_needs_dns_is_judged_when_fetched_as_before(env: Env) -> None:
    """Everything but the refusals without DNS stays as it was: accepted, then the fetch
    says what is wrong (here: the name does not resolve)."""
    url = f"http://nowhere.test:{env.port}/"
    r = await env.client.post(
        "/v1/batch", json={"targets": [url]}, headers={"Idempotency-Key": "d"}
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    for _ in range(2000):
        view = (await env.client.get(f"/v1/batch/{job_id}")).json()
        if view["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.01)  # the job runs in the app's runner
    assert view["status"] == "failed"
    items = (await env.client.get(f"/v1/batch/{job_id}/results")).json()["items"]
    assert items[0]["error"]["code"] == "dns_failure"


async def test_refused_over_mcp_and_through_the_client(env: Env) -> None:
    urls = env.loopback_urls()
    async with mcp_http_session(env.base, RESTRICTED_KEY) as session:
        sub = error_of(await call(session, "batch_submit", {"urls": urls[:3]}))
        assert (sub["code"], sub["message"]) == (
            "invalid_request",
            refused(3, list(enumerate(urls[:3]))),
        )
        crawl = error_of(await call(session, "crawl", {"url": urls[-1]}))
        assert crawl["message"] == start_refused(urls[-1])
    async with AsyncClient(env.base, RESTRICTED_KEY) as client:
        with pytest.raises(BadRequest) as info:
            await client.submit(urls[5:8], idempotency_key="e")
        assert type(info.value) is BadRequest
        assert info.value.message == refused(3, [(0, urls[5]), (1, urls[6]), (2, urls[7])])
        with pytest.raises(BadRequest) as crawl_info:
            await client.crawl(urls[0], idempotency_key="f")
        assert crawl_info.value.message == start_refused(urls[0])
    assert (await env.client.get("/v1/batch")).json()["items"] == []


async def test_private_link_local_ports_and_local_names_pure(tmp_path: Path) -> None:
    """The whole decision, without a runner: nothing here can be fetched. Fleet callers get
    their own policy's answer (allow_private in the test config: only sift's own ranges and
    forbidden ones are refused)."""
    async with batch_rig(tmp_path) as rig:
        refused_urls = [
            "http://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://0xa9fea9fe/",  # 169.254.169.254 in hex
            "http://192.168.000001.1/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://[::ffff:10.0.0.1]/",
            "http://0.0.0.0/",
            f"http://{PUBLIC_NAME}:25/",  # a public name on a port restricted may not use
            "http://localhost/",
            "http://intranet/",  # single label: a search domain would complete it
        ]
        targets: list[Any] = [f"http://{PUBLIC_NAME}/", *refused_urls, "no-scheme"]
        limits = rig.settings.classes.get("restricted")
        with pytest.raises(BadRequest) as info:
            parse_submission({"targets": targets}, AGENT, limits, egress_check(rig.service, AGENT))
        listed = "; ".join(f"[{i}] {url}: {WHY}" for i, url in enumerate(refused_urls, 1))
        assert info.value.message == (
            f"12 of 13 targets are refused before any fetch: {listed}; "
            "[12] The URL has no scheme; use http:// or https://."
        )
        fleet = Principal("indexer", "fleet")
        fleet_check = egress_check(rig.service, fleet)
        fleet_limits = rig.settings.classes.get("fleet")
        ok = parse_submission({"targets": refused_urls[:7]}, fleet, fleet_limits, fleet_check)
        assert [t.url for t in ok][:2] == [
            "http://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
        ]
        with pytest.raises(BadRequest) as never:
            parse_submission({"targets": ["http://0.0.0.0/"]}, fleet, fleet_limits, fleet_check)
        assert never.value.message == refused(1, [(0, "http://0.0.0.0/")])
        assert await rig.jobs.store.live_batch_jobs_total() == 0
