"""Throwaway PostgreSQL databases for tests, the chaos run and benchmarks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

COLLATION = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
"""Databases for tests compare text as most servers do (a language's collation, where
``-`` and case weigh less than letters), not by code point as SQLite does: a query that
relies on the server's order fails here (docs/postgresql.md, "Text order")."""


def create_pg_database(admin_url: str, prefix: str = "gpuatlas_t") -> str:
    """Create an empty database next to ``admin_url``'s; returns its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            try:
                conn.execute(text(f'CREATE DATABASE "{name}" {COLLATION}'))
            except DBAPIError:  # a server without ICU (or before 15): its own default
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            # A test's commit need not wait for its WAL to reach the disk: the server never
            # crashes under a test (SIGKILLs hit clients), and a commit is as visible and
            # as atomic as before; only a server crash could lose the last ones.
            conn.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
    finally:
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def kept_pg_database(admin_url: str, name: str) -> tuple[str, bool]:
    """The database ``name`` next to ``admin_url``'s, kept between runs (a benchmark's
    catalog): its URL, and whether it was there already (else it is created, empty)."""
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
            ).first()
            if not exists:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    return url, exists is not None


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


EMPTY_LARGE_ROWS = 10_000
"""Tables with more rows than this are emptied with TRUNCATE, smaller ones with DELETE."""

_EMPTY = f"""
DO $$
DECLARE t record; n bigint;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables
           WHERE schemaname = 'public' AND tablename <> 'alembic_version' LOOP
    EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %I LIMIT {EMPTY_LARGE_ROWS + 1}) s',
                   t.tablename) INTO n;
    IF n > {EMPTY_LARGE_ROWS} THEN
      EXECUTE format('TRUNCATE %I CASCADE', t.tablename);
    ELSIF n > 0 THEN
      EXECUTE format('DELETE FROM %I', t.tablename);
    END IF;
  END LOOP;
  PERFORM setval(format('%I.%I', schemaname, sequencename), start_value, false)
    FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL;
END $$
"""


@dataclass
class Snapshot:
    """The rows of a database's non-empty tables and its sequences' positions."""

    tables: list[tuple[str, list[str], bytes]] = field(default_factory=list)
    sequences: list[tuple[str, int, bool]] = field(default_factory=list)


def _connect(url: str) -> psycopg.Connection:  # type: ignore[type-arg]
    u = make_url(url)
    return psycopg.connect(
        host=u.host or "127.0.0.1",
        port=u.port or 5432,
        user=u.username or "postgres",
        password=u.password,
        dbname=u.database,
    )


def can_skip_foreign_keys(url: str) -> bool:
    """Whether this role may set ``session_replication_role`` (a superuser, or granted)."""
    with _connect(url) as conn:
        try:
            conn.execute("SET LOCAL session_replication_role = replica")
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True


def empty_database(url: str, restore: Snapshot | None = None) -> None:
    """Empty every table of ``url``'s public schema and restart its sequences, then put
    ``restore``'s rows and sequence positions back, in one transaction.

    Far cheaper than TRUNCATE of every table (a new file for each table and index): only
    tables holding rows are emptied, small ones with DELETE, with foreign-key triggers off
    (``session_replication_role = replica``, which needs a superuser or a grant: see
    :func:`can_skip_foreign_keys`) since every table ends empty or restored whole."""
    with _connect(url) as conn:
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(_EMPTY)
        if restore is not None:
            with conn.cursor() as cur:
                for table, columns, rows in restore.tables:
                    names = ", ".join(f'"{c}"' for c in columns)
                    with cur.copy(f'COPY "{table}" ({names}) FROM STDIN (FORMAT BINARY)') as cp:
                        cp.write(rows)
                for name, value, called in restore.sequences:
                    cur.execute("SELECT setval(%s, %s, %s)", (name, value, called))


def snapshot(url: str) -> Snapshot:
    """The rows of ``url``'s non-empty tables (public schema) and its used sequences."""
    shot = Snapshot()
    with _connect(url) as conn, conn.cursor() as cur:
        tables = [
            r[0]
            for r in cur.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename <> 'alembic_version' ORDER BY tablename"
            ).fetchall()
        ]
        for table in tables:
            if cur.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")').fetchone() != (True,):
                continue
            columns = [
                r[0]
                for r in cur.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                    "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
                    (f'public."{table}"',),
                ).fetchall()
            ]
            names = ", ".join(f'"{c}"' for c in columns)
            data = bytearray()
            with cur.copy(f'COPY "{table}" ({names}) TO STDOUT (FORMAT BINARY)') as cp:
                for block in cp:
                    data += block
            shot.tables.append((table, columns, bytes(data)))
        for name, value in cur.execute(
            "SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences "
            "WHERE schemaname = 'public' AND last_value IS NOT NULL"
        ).fetchall():
            shot.sequences.append((name, value, True))
    return shot
