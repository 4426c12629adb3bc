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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every test an id of its own. schemathesis names each API operation's test
    ``test_x[POST /v1/batch]`` but leaves them all the node id ``…::test_x``, and
    pytest-xdist schedules by node id: under ``make test`` only one operation of the fuzz
    test ran. A duplicated id takes the item's full name instead."""
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
