"""PostgreSQL for the tests: the server .ci/run starts (scripts/pg_test_server.sh), one schema per test.

Read at import: conftest's isolation removes MEMCTL_* variables while tests run.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

PG_URL = os.environ.get("MEMCTL_TEST_PG_URL")


def require_pg() -> str:
    """The server's URL; skips without one — except on CI, where a missing server is a failure."""
    if PG_URL:
        return PG_URL
    if os.environ.get("CI") == "true":
        pytest.fail("MEMCTL_TEST_PG_URL is unset on CI: .ci/run must start PostgreSQL (scripts/pg_test_server.sh)")
    pytest.skip("no PostgreSQL: eval \"$(scripts/pg_test_server.sh start | sed 's/^/export /')\" to run these")


def with_options(url: str, schema: str) -> str:
    """`url` whose connections use `schema` (then public, where the vector extension lives), named after it in
    pg_stat_activity (a test that cuts its own connections must not cut another worker's)."""
    options = quote(f"-csearch_path={schema},public", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={options}&application_name={schema}"


@contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh schema, dropped afterwards; yields a URL that puts memctl's tables in it."""
    import psycopg

    url = require_pg()
    schema = f"memctl_test_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_options(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def query(sql: str, args: tuple = ()) -> list[tuple]:
    """Run SQL in the schema MEMCTL_STORE points at (the `backend` fixture's); rows if it returns any."""
    import psycopg

    with psycopg.connect(os.environ["MEMCTL_STORE"], autocommit=True) as conn:
        cursor = conn.execute(sql, args)
        return cursor.fetchall() if cursor.description else []
