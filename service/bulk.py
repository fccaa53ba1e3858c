"""Bulk writes for ingest: COPY on PostgreSQL, one executemany on SQLite.

Values are converted once, per column kind, the way the column types store them
(exact decimals as canonical text on SQLite, UTC timestamps as naive UTC text), so
rows read back through the ORM types are identical to rows written through them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
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
    rows: list[tuple[Any, ...]],
    constants: Mapping[str, Any] | None = None,
) -> None:
    """Insert ``rows`` (tuples in ``columns`` order) into ``table`` in one go.

    ``constants`` are columns that hold the same value in every row (an ingest's
    timestamp, version, source...): rows leave them out. SQLite reads them as literals of
    the statement, bound nowhere; PostgreSQL's COPY gets them at the end of every row."""
    if not rows:
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
    values = ", ".join(("?",) * len(columns) + tuple(map(sqlite_literal, fixed.values())))
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({names}) VALUES ({values})", rows)  # type: ignore[arg-type]


def sqlite_literal(value: Any) -> str:
    """``value`` as an SQLite literal holding exactly what binding it would store."""
    value = _sqlite_value(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
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
