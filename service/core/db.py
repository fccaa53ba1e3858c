"""Engine and session factory: one engine per process, sessions handed in explicitly."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session


class DatabaseConfigError(Exception):
    """The database URL cannot be used; the message is one line meant for people."""


_USERINFO_PASSWORD = re.compile(r"(//[^/?#@:]*:)[^/?#]*@")
_PARAM_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def shown_url(url: str) -> str:
    """``url`` for messages: a password in it (``user:password@``, or a ``password=``
    parameter) replaced by ``***``, even in a URL that does not parse."""
    return _PARAM_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", url))


def normalize_url(url: str) -> str:
    """Accept plain ``postgresql://`` / ``postgres://`` URLs and use psycopg 3 for them."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise DatabaseConfigError(f"invalid database URL {shown_url(url)!r}: {exc}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise DatabaseConfigError(
            f"unsupported database {parsed.get_backend_name()!r}: use sqlite:/// or postgresql://"
        )
    return parsed.render_as_string(hide_password=False)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy/pysqlite stop issuing its own BEGIN so ours (IMMEDIATE) is the only one.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB}")
    # The temporary schema has a cache of its own, of a few pages unless set: an ingest's
    # staged rows (temp tables, looked up by key in its joins) were read back from the
    # temporary file one page at a time (220,000 reads of a 200,000-offer first ingest).
    cursor.execute(f"PRAGMA temp.cache_size=-{READ_CACHE_KIB}")
    cursor.close()


READ_CACHE_KIB = 65536
"""SQLite page cache per connection (and its temporary schema's): 64 MiB, for reads."""
WRITE_CACHE_KIB = 8192
"""The page cache of an ingest's connection while it writes (see :func:`write_cache`): a
large write fills any cache to its bound with pages it will not read again, and that
memory counts against the ingest's bound (docs/ingest.md, "Memory"). 8 MiB (16 before
2026-12-05): 17 MB less at the peak of a first ingest, within the noise of its time."""


@contextmanager
def write_cache(conn: Connection) -> Iterator[None]:
    """``conn``'s SQLite page caches held to :data:`WRITE_CACHE_KIB` inside the block (a
    smaller cache drops the pages past its bound), then given back their read size."""
    if conn.dialect.name != "sqlite":
        yield
        return
    _cache_size(conn, WRITE_CACHE_KIB)
    try:
        yield
    except BaseException:
        with suppress(DBAPIError):  # a broken connection is discarded by the pool anyway
            _cache_size(conn, READ_CACHE_KIB)
        raise
    _cache_size(conn, READ_CACHE_KIB)


def _cache_size(conn: Connection, kib: int) -> None:
    for schema in ("main", "temp"):
        conn.exec_driver_sql(f"PRAGMA {schema}.cache_size=-{kib}")


def _sqlite_begin(conn: Any) -> None:
    # Writers take the write lock up front (BEGIN IMMEDIATE), so two writers queue on
    # busy_timeout instead of failing when a read transaction tries to upgrade.
    immediate = conn.get_execution_options().get("sqlite_immediate", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def make_engine(url: str, **kwargs: Any) -> Engine:
    url = normalize_url(url)
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    else:
        kwargs.setdefault("pool_pre_ping", True)
        connect_args = dict(kwargs.pop("connect_args", None) or {})
        connect_args["options"] = f"{connect_args.get('options', '')} {NO_JIT}".strip()
        engine = create_engine(url, connect_args=connect_args, **kwargs)
    return engine


NO_JIT = "-c jit=off"
"""PostgreSQL sessions never JIT-compile: the planner's costs of a listing over a large
catalog (an estimate for the whole index, though a walk stops after one page) pass
``jit_above_cost`` and the inlining and optimization thresholds, and compiling took longer
than many listings run (docs/benchmarks.md, "The listing mix")."""


def writer(engine: Engine) -> Engine:
    """The same engine, whose transactions are writers from their first statement."""
    if engine.dialect.name == "sqlite":
        return engine.execution_options(sqlite_immediate=True)
    return engine


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    with Session(writer(engine), expire_on_commit=False) as session:
        yield session
