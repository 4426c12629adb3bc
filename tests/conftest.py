"""Project-wide fixtures. Upstream servers live in tests/upstream.py, PostgreSQL in
tests/pgserver.py."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from _pytest.nodeid import NodeId

from pgserver import PgServer, fresh_database, start_server
from servehelpers import closed_port
from sift.store.postgres.schema import migrate

REPO = Path(__file__).resolve().parent.parent
PG_TEMPLATE = "sift_template"


# The files that take longest (measured: docs/testing.md, "Where the time goes"), longest
# first. Under `--dist loadfile` each file runs whole on one worker, handed out in collection
# order; started last, one of these would run on alone while the other workers sit idle.
LONGEST_FIRST = (
    "test_mcp_inspector.py",
    "test_cluster.py",
    "test_console_browser.py",
    "test_readme.py",
    "test_watch_serve.py",
    "test_api_schema.py",
    "test_browser.py",
    "test_mcp_stdio.py",
    "test_batch_crash.py",
    "test_cli_fetch.py",
    "test_crawl_restart.py",
    "test_browser_actions.py",
    "test_render_model.py",
    "test_mcp_handover.py",
    "test_docs_demos.py",
    "test_hostguard.py",
    "test_isolation.py",
    "test_cli.py",
    "test_map_bounds.py",
    "test_render_bounds.py",
    "test_browser_canary.py",
    "test_changes_api.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist hands out files with the most tests first by default (a file of 40 quick
    tests before one of 2 slow ones); take them in the order collected (``LONGEST_FIRST``)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    missing = [name for name in LONGEST_FIRST if not (REPO / "tests" / name).exists()]
    assert not missing, f"LONGEST_FIRST names files that are gone: {missing}"


def _file_rank(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every test an id of its own, and start the longest files first.

    schemathesis names each API operation's test ``test_x[POST /v1/batch]`` but leaves them
    all the node id ``…::test_x``, and pytest-xdist schedules by node id: under ``make
    test`` only one operation of the fuzz test ran. A duplicated id takes the item's full
    name instead. Within a file the order is kept."""
    items.sort(key=_file_rank)
    seen = collections.Counter(item.nodeid for item in items)
    for item in items:
        if seen[item.nodeid] > 1 and item.parent is not None:
            # pytest has no public setter; the assertion below catches a pytest that moved it.
            item._id = NodeId.parse(f"{item.parent.nodeid}::{item.name}")
    again = collections.Counter(item.nodeid for item in items)
    duplicated = sorted(nodeid for nodeid, n in again.items() if n > 1)
    assert not duplicated, f"tests sharing a node id: {duplicated}"


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL for the session (fails under CI, skips elsewhere, when there is none),
    with a template database that already holds sift's batch schema."""
    server = start_server()
    try:
        with server.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_TEMPLATE}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{PG_TEMPLATE}"')
        with psycopg.connect(server.url(PG_TEMPLATE), autocommit=True) as conn:
            migrate(conn)
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh, migrated database of its own for this test."""
    with fresh_database(pg_server, PG_TEMPLATE) as url:
        yield url


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for the whole test (see ``closed_port``):
    unlike a port that merely was free a moment ago, no other process can take it."""
    with closed_port() as port:
        yield port
