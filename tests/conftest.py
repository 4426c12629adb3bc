"""Project-wide fixtures. Upstream servers live in tests/upstream.py, PostgreSQL in
tests/pgserver.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgserver import PgServer, fresh_database, start_server
from servehelpers import closed_port
from sift.store.postgres.schema import migrate

REPO = Path(__file__).resolve().parent.parent
PG_TEMPLATE = "sift_template"


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
