"""Bulk writes for ingest: COPY on PostgreSQL, one executemany on SQLite.

Values are converted once, per column kind, the way the column types store them
(exact decimals as canonical text on SQLite, UTC timestamps as naive UTC text), so
rows read back through the ORM types are identical to rows written through them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Table

from schema.types import decimal_to_text

SQLITE_DATETIME = "%Y-%m-%d %H:%M:%S.%f"


@lru_cache(maxsize=256)  # an ingest stamps one "now" on every row: format it once
def _datetime_text(value: datetime) -> str:
    if value.tzinfo is None:
        raise ValueError("naive datetime refused: all times are UTC and must say so")
    return value.astimezone(UTC).strftime(SQLITE_DATETIME)


# Values bound through the DBAPI directly (bulk writes only: SQLAlchemy's own types convert
# before binding) are stored exactly as DecimalType / UTCDateTime / Date store them.
sqlite3.register_adapter(Decimal, decimal_to_text)
sqlite3.register_adapter(datetime, _datetime_text)
sqlite3.register_adapter(date, date.isoformat)


def bulk_insert(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    rows: Iterable[tuple[Any, ...]],
    constants: Mapping[str, Any] | None = None,
) -> None:
    """Insert ``rows`` (tuples in ``columns`` order) into ``table`` in one go.

    ``constants`` are columns that hold the same value in every row (an ingest's
    timestamp, version, source...): rows leave them out. SQLite reads them as literals of
    the statement, bound nowhere; PostgreSQL's COPY gets them at the end of every row.

    ``rows`` may be an iterator. PostgreSQL then copies each row as it comes: the server
    stores the rows already sent while the caller builds the next ones (on another core),
    instead of waiting for the whole list. If the iterator raises, the COPY is abandoned
    and the error propagates; the caller's transaction must then be rolled back."""
    if isinstance(rows, list) and not rows:
        return
    fixed = dict(constants or {})
    names = ", ".join((*columns, *fixed))
    if conn.dialect.name == "postgresql":
        driver: Any = conn.connection.driver_connection
        tail = tuple(fixed.values())
        with (
            driver.cursor() as cursor,
            cursor.copy(f"COPY {table.name} ({names}) FROM STDIN") as copy,
        ):
            write = copy.write_row
            if tail:
                for row in rows:
                    write((*row, *tail))
            else:
                for row in rows:
                    write(row)
        return
    listed = rows if isinstance(rows, list) else list(rows)
    if not listed:
        return
    values = ", ".join(("?",) * len(columns) + tuple(map(sqlite_literal, fixed.values())))
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({names}) VALUES ({values})", listed)  # type: ignore[arg-type]


def sqlite_literal(value: Any) -> str:
    """``value`` as an SQLite literal holding exactly what binding it would store."""
    value = _sqlite_value(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, str):
        if "\x00" in value:  # a NUL cannot be written in a quoted literal
            return f"CAST(X'{value.encode().hex()}' AS TEXT)"
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no SQLite literal for {type(value).__name__}")


def bulk_update(
    conn: Connection, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> None:
    """Set ``columns[1:]`` of the row whose ``columns[0]`` (its key) is ``row[0]``, for
    every row. PostgreSQL: COPY into a temporary table, then one ``UPDATE ... FROM``;
    SQLite: one executemany of the UPDATE by key."""
    if not rows:
        return
    key, *names = columns
    if conn.dialect.name == "postgresql":
        staging = f"bulk_{table.name}"
        listed = ", ".join(columns)
        driver: Any = conn.connection.driver_connection
        with driver.cursor() as cursor:
            cursor.execute(
                f"CREATE TEMPORARY TABLE {staging} ON COMMIT DROP AS "
                f"SELECT {listed} FROM {table.name} WITH NO DATA"
            )
            with cursor.copy(f"COPY {staging} ({listed}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            assignments = ", ".join(f"{name} = s.{name}" for name in names)
            cursor.execute(
                f"UPDATE {table.name} AS t SET {assignments} FROM {staging} AS s "
                f"WHERE t.{key} = s.{key}"
            )
            cursor.execute(f"DROP TABLE {staging}")
        return
    assignments = ", ".join(f"{name} = ?" for name in names)
    conn.exec_driver_sql(
        f"UPDATE {table.name} SET {assignments} WHERE {key} = ?",
        [(*row[1:], row[0]) for row in rows],  # type: ignore[arg-type]
    )


@contextmanager
def staged(
    conn: Connection,
    name: str,
    columns: Sequence[str],
    rows: list[tuple[Any, ...]],
    *,
    numbered: bool = False,
) -> Iterator[str]:
    """SQLite: ``rows`` in a temporary table of the caller's transaction, for the body to
    join; yields its name and drops it afterwards.

    The first column is an integer key, the INTEGER PRIMARY KEY (rows are looked up by
    it); with ``numbered`` the rows leave it out and are numbered 1, 2, ... in order. The
    other columns have no declared type, so every value keeps exactly the storage class
    it was bound with and a later ``INSERT ... SELECT`` stores it as binding it there
    would.

    SQLite only: binding is most of what a row costs there, and staging binds each
    distinct value once. PostgreSQL copies whole rows into the tables instead, while they
    are built (:func:`bulk_insert` with an iterator), which measured faster there."""
    if conn.dialect.name != "sqlite":
        raise ValueError(f"staging tables are for SQLite, not {conn.dialect.name}")
    table = f"temp.{name}"
    listed = ", ".join(columns[1:])
    conn.exec_driver_sql(f"CREATE TEMP TABLE {name} ({columns[0]} INTEGER PRIMARY KEY, {listed})")
    if rows:
        bound = columns[1:] if numbered else columns
        marks = ", ".join("?" * len(bound))
        conn.exec_driver_sql(
            f"INSERT INTO {table} ({', '.join(bound)}) VALUES ({marks})",
            rows,  # type: ignore[arg-type]
        )
    yield table
    # Only after success: on an error the caller's rollback takes the table away (SQLite
    # may already have rolled back by itself, and a statement now would hide the error).
    conn.exec_driver_sql(f"DROP TABLE {table}")


REBUILD_MIN_ROWS = 20_000
"""Below this many new rows, updating a table's indexes row by row is cheap enough."""
REBUILD_SHARE = 4
"""A load that adds a ``1/REBUILD_SHARE`` share of a table's rows rebuilds its indexes."""


def indexes_worth_rebuilding(adding: int, holding: int) -> bool:
    """Whether inserting ``adding`` rows into a table of about ``holding`` rows is faster
    with its secondary indexes built afresh afterwards (one sort each) than updated row
    by row: when the insert adds a quarter of a table of some size, e.g. a first ingest
    or a new source's first crawl."""
    return adding >= max(REBUILD_MIN_ROWS, holding // REBUILD_SHARE)


@contextmanager
def indexes_deferred(conn: Connection, tables: Sequence[str]) -> Iterator[None]:
    """SQLite: drop the secondary indexes of ``tables`` for the body, then create them
    again from their exact stored DDL, in the caller's transaction (which must be open).

    Only plain (non-unique) indexes are deferred: unique ones keep checking every row
    as it is inserted. Readers never see the gap: in WAL mode they read the last
    committed schema, and a rollback (or a killed process) restores the indexes with
    everything else: when the body fails they are left to the caller's rollback, which
    must follow (SQLite may already have rolled back by itself, and recreating them now
    would only hide the error). Statistics ANALYZE kept for the deferred indexes are
    restored as they were. On PostgreSQL this does nothing: dropping an index there
    locks readers out of the table until the transaction ends."""
    if conn.dialect.name != "sqlite" or not tables:
        yield
        return
    marks = ", ".join("?" * len(tables))
    indexes = [
        (name, sql)
        for name, sql in conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            f"AND tbl_name IN ({marks}) ORDER BY name",
            tuple(tables),
        )
        if not sql.lstrip().upper().startswith("CREATE UNIQUE")
    ]
    if not indexes:
        yield
        return
    names = tuple(name for name, _ in indexes)
    stats = _saved_stats(conn, names)
    for name in names:
        conn.exec_driver_sql(f'DROP INDEX "{name}"')
    yield
    for _, sql in indexes:
        conn.exec_driver_sql(sql)
    _restore_stats(conn, names, stats)


_STAT_TABLES = ("sqlite_stat1", "sqlite_stat4")


def _saved_stats(conn: Connection, names: tuple[str, ...]) -> dict[str, list[Any]]:
    present = {
        name
        for (name,) in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sqlite_stat%'"
        )
    }
    marks = ", ".join("?" * len(names))
    return {
        table: list(conn.exec_driver_sql(f"SELECT * FROM {table} WHERE idx IN ({marks})", names))
        for table in _STAT_TABLES
        if table in present
    }


def _restore_stats(conn: Connection, names: tuple[str, ...], stats: dict[str, list[Any]]) -> None:
    marks = ", ".join("?" * len(names))
    for table, rows in stats.items():
        conn.exec_driver_sql(f"DELETE FROM {table} WHERE idx IN ({marks})", names)
        for row in rows:
            values = tuple(row)
            conn.exec_driver_sql(
                f"INSERT INTO {table} VALUES ({', '.join('?' * len(values))})", values
            )


def bulk_binder(conn: Connection) -> Callable[[Any], Any]:
    """How :func:`bulk_insert` binds a value on this connection, as a function.

    A value shared by many rows (the ingest's timestamp, an FX rate, a memoized price)
    is converted once with it instead of once per row: stored text on SQLite (exactly
    what the adapters above produce), the value itself on PostgreSQL (COPY dumps it)."""
    if conn.dialect.name == "postgresql":
        return _as_is
    return _sqlite_value


def _as_is(value: Any) -> Any:
    return value


def _sqlite_value(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or value is None:
        return value
    if kind is bool:  # stored as 1/0 either way; an int binds without adaptation
        return int(value)
    if isinstance(value, Decimal):
        return decimal_to_text(value)
    if isinstance(value, datetime):
        return _datetime_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):  # a StrEnum member: its text, bound without adaptation
        return str.__str__(value)
    return value
