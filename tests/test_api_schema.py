"""API fuzzing: schemathesis against the app's own OpenAPI schema, over real HTTP.

Bounded examples per operation. Every response must conform to the schema (status codes,
content types, bodies), sift itself must never answer 500, and a 502/504 must be an upstream
error code (the generated URLs name hosts only the test resolver could know, so they fail
upstream — never anywhere off this machine).
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apphelpers import FLEET_KEY, auth, fetcher_for, make_settings
from sift.dcache import DB
from sift.errors import SiftError, UpstreamError, all_error_classes
from sift.fetch.url import validate_url
from sift.options import MAX_SELECTOR_CHARS, MAX_URL_BYTES, MIN_MAX_BYTES, URL_PATTERN
from sift.server.app import create_app

UPSTREAM_CODES = {c.code for c in all_error_classes() if issubclass(c, UpstreamError)}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("schema")
    cfg = make_settings(tmp)
    db = DB.open(cfg.db_path)
    app = create_app(cfg, db, fetcher_for(cfg))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("server failed to start")
        threading.Event().wait(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def _openapi() -> dict[str, Any]:
    """The app's schema, built from a throwaway app over an in-memory database."""
    cfg = make_settings(Path("unused"))
    db = DB.open(":memory:")
    try:
        return create_app(cfg, db, fetcher_for(cfg)).openapi()
    finally:
        db.close()


OPENAPI = _openapi()
schema = schemathesis.openapi.from_dict(OPENAPI)


def _refs(node: Any, path: str = "#") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield path, value
            else:
                yield from _refs(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, f"{path}/{i}")


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    """The node a local JSON pointer names (RFC 6901), or KeyError."""
    assert ref.startswith("#/"), ref
    node: Any = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_every_ref_in_the_openapi_document_resolves() -> None:
    refs = list(_refs(OPENAPI))
    dangling = []
    for where, ref in refs:
        try:
            _resolve(OPENAPI, ref)
        except (KeyError, TypeError):
            dangling.append(f"{where}: {ref}")
    assert dangling == []
    assert len(refs) > 10  # the walk found the document's references


def test_routes_that_take_a_key_declare_bearer_auth() -> None:
    """/docs offers Authorize only if the document declares the scheme (issue 21 §8)."""
    assert OPENAPI["components"]["securitySchemes"]["bearer"]["type"] == "http"
    assert OPENAPI["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    declared = {
        (method.upper(), path): op.get("security")
        for path, ops in OPENAPI["paths"].items()
        for method, op in ops.items()
    }
    open_routes = {("GET", "/healthz")}
    assert {where for where, security in declared.items() if security is None} == open_routes
    keyed = [{"bearer": []}, {}]  # a key, or none on a server without callers (anonymous)
    assert all(declared[where] == keyed for where in declared.keys() - open_routes)
    assert len(declared) == 19  # + screenshots, deliveries and the four watch routes


def test_schema_states_the_limits_the_server_enforces() -> None:
    def body(path: str) -> dict[str, Any]:
        schema: dict[str, Any] = OPENAPI["paths"][path]["post"]["requestBody"]["content"][
            "application/json"
        ]["schema"]
        return schema

    fetch, batch = body("/v1/fetch"), body("/v1/batch")
    url = {"type": "string", "minLength": 1, "maxLength": MAX_URL_BYTES, "pattern": URL_PATTERN}
    target_url, target_spec = batch["properties"]["targets"]["items"]["anyOf"]
    for where in (fetch["properties"]["url"], target_url, target_spec["properties"]["url"]):
        assert {k: where[k] for k in url} == url
    assert fetch["properties"]["max_bytes"]["anyOf"][0]["minimum"] == MIN_MAX_BYTES
    options = batch["properties"]["options"]["anyOf"][0]["properties"]
    assert options["max_bytes"]["anyOf"][0]["minimum"] == MIN_MAX_BYTES
    selector = {"type": "string", "minLength": 1, "maxLength": MAX_SELECTOR_CHARS}
    assert fetch["properties"]["selector"]["anyOf"][0] == selector
    assert fetch["properties"]["exclude"]["items"] == selector


def no_sift_failure(ctx: Any, response: Any, case: Any) -> bool:
    """sift's own bugs are 500; 502/504 are allowed only as upstream error codes."""
    if response.status_code == 500:
        raise AssertionError(f"500 from sift: {response.text[:300]}")
    if response.status_code in (502, 504):
        code = response.json()["error"]["code"]
        if code not in UPSTREAM_CODES:
            raise AssertionError(f"{response.status_code} with non-upstream code {code}")
    return True


SAFE_URL = "http://127.0.0.1:9/"


def _on_loopback(url: Any) -> Any:
    """A generated URL that names an IP address outside loopback, replaced by a closed
    loopback port: the schema's pattern makes generated URLs start with http(s)://, and a
    numeric host such as ``16777217`` is an address. Names are safe as they are (the test
    resolver knows only ``pub.test``, on loopback)."""
    if not isinstance(url, str):
        return url
    try:
        target = validate_url(url.strip())  # stripped first, as sift.options does
    except SiftError:
        return url
    if target.ip is not None and not ipaddress.ip_address(target.ip).is_loopback:
        return SAFE_URL
    return url


def keep_on_loopback(case: Any) -> None:
    """No example may send traffic anywhere but 127.0.0.0/8 (the project's first rule)."""
    if isinstance(case.query, dict) and "url" in case.query:
        case.query["url"] = _on_loopback(case.query["url"])
    body = case.body
    if not isinstance(body, dict):
        return
    if "url" in body:
        body["url"] = _on_loopback(body["url"])
    targets = body.get("targets")
    if isinstance(targets, list):
        for i, target in enumerate(targets):
            if isinstance(target, dict) and "url" in target:
                target["url"] = _on_loopback(target["url"])
            else:
                targets[i] = _on_loopback(target)


def test_generated_urls_stay_on_loopback() -> None:
    assert _on_loopback("http://16777217/") == SAFE_URL  # 1.0.0.1
    assert _on_loopback(" https://[2001:4860::1]:8/x") == SAFE_URL
    assert _on_loopback("http://127.0.0.1:5/") == "http://127.0.0.1:5/"
    assert _on_loopback("http://pub.test/") == "http://pub.test/"


@schema.parametrize()
@settings(
    max_examples=40,
    derandomize=True,  # the same examples every run: CI never flakes on a new one
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_conforms_to_its_schema(case: Any, server: str) -> None:
    keep_on_loopback(case)
    case.call_and_validate(
        base_url=server,
        headers=auth(FLEET_KEY),
        checks=[
            no_sift_failure,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
        timeout=30,
    )
