"""sift refuses to fetch from itself: a `listen` host name, and `egress.own_addresses`.

A fleet caller allowed private addresses could otherwise point sift at its own listener
(and through it at its own API, with the server's reach) whenever `listen` was a name
rather than an IP literal, or when sift is reached on a public address in front of a
wildcard bind. Real `sift serve`; the "public address" is a loopback upstream listed in
`egress.own_addresses`, with its hits counted.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from servehelpers import SIFT, Served, sift_serve, write_config
from sift.fetch.egress import listen_addresses
from syncupstream import SyncUpstream, serve_pages

PAGE = "<html><body><article><p>Reachable for fleet callers.</p></article></body></html>"


def _fetch(base_url: str, key: str, url: str) -> httpx.Response:
    return httpx.post(
        f"{base_url}/v1/fetch",
        json={"url": url, "robots": False, "max_age_s": 0},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_listen_names_resolve_to_own_addresses() -> None:
    assert "127.0.0.1:8080" in listen_addresses("localhost", 8080)
    assert listen_addresses("::1", 9) == ["[::1]:9"]
    assert listen_addresses("127.0.0.3", 80) == ["127.0.0.3:80"]


@dataclass
class Rig:
    served: Served
    mine: SyncUpstream  # stands for sift's public address: listed in egress.own_addresses
    other: SyncUpstream


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """sift listening on the name `localhost`, with one upstream listed as its own address."""
    tmp = tmp_path_factory.mktemp("own")
    page = {"/page": (PAGE, "text/html")}
    with serve_pages(page) as mine, serve_pages(page) as other:
        own = mine.base_url.removeprefix("http://")
        config = write_config(tmp, f'[egress]\nown_addresses = ["{own}"]\n')
        with sift_serve(tmp, config=config, listen_host="localhost") as served:
            yield Rig(served, mine, other)


def test_sift_listening_on_a_name_refuses_itself(rig: Rig) -> None:
    served = rig.served
    # The fleet caller reaches loopback in general ...
    ok = _fetch(served.base_url, served.fleet_key, f"{rig.other.base_url}/page")
    assert ok.status_code == 200
    assert ok.json()["content"] == "Reachable for fleet callers."
    # ... but not the address the name `localhost` gave sift's own listener.
    refused = _fetch(served.base_url, served.fleet_key, f"{served.base_url}/healthz")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "blocked_address"


def test_own_addresses_setting_covers_an_address_sift_does_not_bind(rig: Rig) -> None:
    served = rig.served
    before = rig.other.hits["/page"]
    refused = _fetch(served.base_url, served.fleet_key, f"{rig.mine.base_url}/page")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "blocked_address"
    assert rig.mine.hits["/page"] == 0
    ok = _fetch(served.base_url, served.fleet_key, f"{rig.other.base_url}/page")
    assert ok.status_code == 200
    assert rig.other.hits["/page"] == before + 1


def test_bad_own_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            *SIFT,
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--set",
            "egress.own_addresses=203.0.113.9:80,sift.example",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "sift: defaults: egress.own_addresses: bad address 'sift.example'; "
        "use ip, ip:port or [v6]:port"
    ]
