"""API fuzzing: schemathesis against the app's own OpenAPI schema, over real HTTP.

Bounded examples per operation. Every response must conform to the schema (status codes,
content types, bodies), sift itself must never answer 500, and a 502/504 must be an upstream
error code (the generated URLs name hosts only the test resolver could know, so they fail
upstream — never anywhere off this machine).
"""

from __future__ import annotations

import asyncio
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
from sift.api.app import create_app
from sift.dcache import DB
from sift.errors import UpstreamError, all_error_classes

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


schema = schemathesis.openapi.from_dict(_openapi())


def no_sift_failure(ctx: Any, response: Any, case: Any) -> bool:
    """sift's own bugs are 500; 502/504 are allowed only as upstream error codes."""
    if response.status_code == 500:
        raise AssertionError(f"500 from sift: {response.text[:300]}")
    if response.status_code in (502, 504):
        code = response.json()["error"]["code"]
        if code not in UPSTREAM_CODES:
            raise AssertionError(f"{response.status_code} with non-upstream code {code}")
    return True


@schema.parametrize()
@settings(
    max_examples=40,
    derandomize=True,  # the same examples every run: CI never flakes on a new one
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_conforms_to_its_schema(case: Any, server: str) -> None:
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
