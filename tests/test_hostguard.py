"""DNS rebinding and cross-site requests against a real `sift serve` (api/hostguard.py).

Anonymous mode (no keys): a page on another site can reach a loopback sift through the
browser, so only loopback ``Host`` names are served and a foreign ``Origin`` is refused —
on the framework's routes and on the fast lane alike, before any work is done. With keys,
``/mcp`` still checks ``Origin`` (the MCP transport requires it), and its stateless
endpoint refuses ``GET``/``DELETE`` rather than hold an event stream open.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from servehelpers import Served, sift_serve
from syncupstream import SyncUpstream, serve_pages

PAGE = "<html><body><article><p>Only for loopback pages.</p></article></body></html>"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[SyncUpstream]:
    with serve_pages({"/page": (PAGE, "text/html")}) as up:
        yield up


@pytest.fixture(scope="module")
def anonymous(tmp_path_factory: pytest.TempPathFactory, upstream: SyncUpstream) -> Iterator[Served]:
    """No keys; the anonymous (restricted) caller may reach the upstream (lab settings)."""
    tmp = tmp_path_factory.mktemp("anon")
    port = upstream.base_url.rsplit(":", 1)[1]
    cfg = tmp / "sift.toml"
    cfg.write_text(
        f"[classes.restricted]\nextra_ports = [{port}]\n"
        '[egress]\nextra_public_cidrs = ["127.0.0.1/32"]\n'
        '[listener]\nallowed_origins = ["https://tool.example"]\nallowed_hosts = ["sift.lan"]\n'
    )
    with sift_serve(tmp, config=(cfg, "", "")) as served:
        yield served


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with sift_serve(tmp_path_factory.mktemp("keyed")) as served:
        yield served


def _port(served: Served) -> int:
    return int(served.base_url.rsplit(":", 1)[1])


def _assert_refused(response: httpx.Response, code: str) -> None:
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == code
    assert error["hint"]


def test_anonymous_serves_the_page_to_a_program(anonymous: Served, upstream: SyncUpstream) -> None:
    # The control for the refusals below: the same request without a foreign header works.
    r = httpx.post(
        f"{anonymous.base_url}/v1/fetch", json={"url": f"{upstream.base_url}/page"}, timeout=30
    )
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "Only for loopback pages."


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "localhost:{port}", "LocalHost", "127.0.0.2:{port}", "[::1]:{port}"],
)
def test_anonymous_serves_loopback_hosts(anonymous: Served, host: str) -> None:
    r = httpx.get(
        f"{anonymous.base_url}/healthz",
        headers={"Host": host.format(port=_port(anonymous))},
        timeout=30,
    )
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/healthz"), ("POST", "/v1/fetch"), ("GET", "/v1/fetch"), ("POST", "/mcp")],
)
def test_anonymous_refuses_a_rebound_host(
    anonymous: Served, upstream: SyncUpstream, method: str, path: str
) -> None:
    before = upstream.hits["/page"]
    url = f"{upstream.base_url}/page"
    r = httpx.request(
        method,
        f"{anonymous.base_url}{path}",
        headers={"Host": f"attacker.example:{_port(anonymous)}", **MCP_HEADERS},
        json={"url": url} if path == "/v1/fetch" and method == "POST" else None,
        params={"url": url} if path == "/v1/fetch" and method == "GET" else None,
        timeout=30,
    )
    _assert_refused(r, "host_not_allowed")
    assert (
        r.json()["error"]["message"]
        == f"Host 'attacker.example:{_port(anonymous)}' is not a loopback name"
    )
    assert upstream.hits["/page"] == before


def test_anonymous_refuses_a_request_without_host(anonymous: Served) -> None:
    with socket.create_connection(("127.0.0.1", _port(anonymous)), timeout=30) as sock:
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    assert raw.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert b'"code":"host_not_allowed"' in raw


@pytest.mark.parametrize("origin", ["https://attacker.example", "null", "http://10.0.0.1:8080"])
@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/fetch"), ("POST", "/mcp")])
def test_anonymous_refuses_a_foreign_origin(
    anonymous: Served, upstream: SyncUpstream, origin: str, method: str, path: str
) -> None:
    before = upstream.hits["/page"]
    body = {"url": f"{upstream.base_url}/page"} if path == "/v1/fetch" else INIT
    r = httpx.request(
        method,
        f"{anonymous.base_url}{path}",
        json=body,
        headers={"Origin": origin, **MCP_HEADERS},
        timeout=30,
    )
    _assert_refused(r, "origin_not_allowed")
    assert r.json()["error"]["message"] == f"requests from origin {origin!r} are refused"
    assert upstream.hits["/page"] == before


@pytest.mark.parametrize(
    "origin",
    ["http://localhost:3000", "http://127.0.0.1:5173", "http://[::1]", "https://tool.example"],
)
def test_anonymous_serves_loopback_and_listed_origins(anonymous: Served, origin: str) -> None:
    r = httpx.get(f"{anonymous.base_url}/healthz", headers={"Origin": origin}, timeout=30)
    assert r.status_code == 200


def test_keys_configured_host_is_not_checked_but_mcp_origin_is(keyed: Served) -> None:
    auth = {"Authorization": f"Bearer {keyed.fleet_key}"}
    # A bearer key is never sent by a browser on its own: any Host may carry it.
    r = httpx.get(f"{keyed.base_url}/healthz", headers={"Host": "sift.internal"}, timeout=30)
    assert r.status_code == 200
    refused = httpx.post(
        f"{keyed.base_url}/mcp",
        json=INIT,
        headers={**auth, **MCP_HEADERS, "Origin": "https://attacker.example"},
        timeout=30,
    )
    _assert_refused(refused, "origin_not_allowed")
    served = httpx.post(
        f"{keyed.base_url}/mcp",
        json=INIT,
        headers={**auth, **MCP_HEADERS, "Origin": "http://localhost:6274"},
        timeout=30,
    )
    assert served.status_code == 200
    assert served.json()["result"]["serverInfo"]["name"] == "sift"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_stateless_mcp_refuses_streams_and_sessions(keyed: Served, method: str) -> None:
    r = httpx.request(
        method,
        f"{keyed.base_url}/mcp",
        headers={"Authorization": f"Bearer {keyed.fleet_key}", "Accept": "text/event-stream"},
        timeout=30,
    )
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    assert r.json()["error"]["code"] == "method_not_allowed"
    assert r.json()["error"]["message"] == (
        f"{method} /mcp: sift's MCP endpoint is stateless and takes POST only"
    )


@pytest.mark.parametrize(
    ("site", "method", "path"),
    [
        ("cross-site", "GET", "/v1/fetch"),  # <img src="http://localhost:8080/v1/fetch?url=…">
        ("cross-site", "POST", "/v1/fetch"),
        ("same-site", "GET", "/v1/fetch"),  # a page on another loopback port, no Origin
        ("cross-site", "GET", "/"),  # not a navigation (a script or an image): refused too
    ],
)
def test_anonymous_refuses_a_cross_site_request_without_origin(
    anonymous: Served, upstream: SyncUpstream, site: str, method: str, path: str
) -> None:
    """Issue 24 finding 10: a browser sends no Origin on a cross-site GET, so the Host and
    Origin checks let any web page drive a loopback sift blind; Sec-Fetch-Site tells."""
    before = upstream.hits["/page"]
    url = f"{upstream.base_url}/page"
    r = httpx.request(
        method,
        f"{anonymous.base_url}{path}",
        headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors"},
        json={"url": url} if method == "POST" else None,
        params={"url": url} if path == "/v1/fetch" and method == "GET" else None,
        timeout=30,
    )
    _assert_refused(r, "origin_not_allowed")
    assert r.json()["error"]["message"] == (
        f"{site} requests are refused in anonymous mode (Sec-Fetch-Site: {site}, no allowed Origin)"
    )
    assert "listener.allowed_origins" in r.json()["error"]["hint"]
    assert upstream.hits["/page"] == before


def test_anonymous_console_keeps_working(anonymous: Served, upstream: SyncUpstream) -> None:
    """The console's own requests are same-origin; a typed address is "none"; a link from
    another site may open the console page (a navigation) but not call the API."""
    base, port = anonymous.base_url, _port(anonymous)
    url = f"{upstream.base_url}/page"
    own = {"Sec-Fetch-Site": "same-origin", "Origin": f"http://127.0.0.1:{port}"}
    fetched = httpx.post(f"{base}/v1/fetch", json={"url": url}, headers=own, timeout=30)
    assert (fetched.status_code, fetched.json()["content"]) == (200, "Only for loopback pages.")
    typed = httpx.get(f"{base}/", headers={"Sec-Fetch-Site": "none"}, timeout=30)
    assert typed.status_code == 200
    linked = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    assert httpx.get(f"{base}/", headers=linked, timeout=30).status_code == 200
    assert httpx.get(f"{base}/docs", headers=linked, timeout=30).status_code == 200
    navigated = httpx.get(f"{base}/v1/fetch", params={"url": url}, headers=linked, timeout=30)
    _assert_refused(navigated, "origin_not_allowed")
    # A dev server on another loopback port (same-site, with its allowed Origin) and a
    # listed origin calling cross-site are served, as before.
    dev = {"Sec-Fetch-Site": "same-site", "Origin": "http://localhost:3000"}
    assert httpx.get(f"{base}/healthz", headers=dev, timeout=30).status_code == 200
    tool = {"Sec-Fetch-Site": "cross-site", "Origin": "https://tool.example"}
    assert httpx.get(f"{base}/healthz", headers=tool, timeout=30).status_code == 200


def test_anonymous_console_under_an_allowed_host_name(anonymous: Served) -> None:
    """The console served as http://sift.lan (listener.allowed_hosts) sends its own Origin,
    which is neither loopback nor listed: it is the request's own, so it is served; another
    page under that name's site is not."""
    port = _port(anonymous)
    headers = {"Host": f"sift.lan:{port}", "Sec-Fetch-Site": "same-origin"}
    own = httpx.get(
        f"{anonymous.base_url}/healthz",
        headers={**headers, "Origin": f"http://sift.lan:{port}"},
        timeout=30,
    )
    assert own.status_code == 200
    other = httpx.get(
        f"{anonymous.base_url}/healthz",
        headers={**headers, "Origin": "http://wiki.sift.lan", "Sec-Fetch-Site": "same-site"},
        timeout=30,
    )
    _assert_refused(other, "origin_not_allowed")
    assert (
        other.json()["error"]["message"]
        == "requests from origin 'http://wiki.sift.lan' are refused"
    )
