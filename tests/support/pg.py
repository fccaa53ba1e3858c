"""Throwaway PostgreSQL databases for tests, the chaos run and benchmarks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


def create_pg_database(admin_url: str, prefix: str = "gpuatlas_t") -> str:
    """Create an empty database next to ``admin_url``'s; returns its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
            # A test's commit need not wait for its WAL to reach the disk: the server never
            # crashes under a test (SIGKILLs hit clients), and a commit is as visible and
            # as atomic as before; only a server crash could lose the last ones.
            conn.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
    finally:
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_pg_database(admin_url: str, url: str) -> None:
    """Drop ``url``'s database, disconnecting whoever still uses it."""
    name = make_url(url).database
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def pg_database(admin_url: str, prefix: str = "gpuatlas_t") -> Iterator[str]:
    """A new database next to ``admin_url``'s for the body (its URL), dropped after it."""
    url = create_pg_database(admin_url, prefix)
    try:
        yield url
    finally:
        drop_pg_database(admin_url, url)
