"""Bulk writes for ingest: COPY on PostgreSQL, one executemany on SQLite.

Values are converted once, per column kind, the way the column types store them
(exact decimals as canonical text on SQLite, UTC timestamps as naive UTC text), so
rows read back through the ORM types are identical to rows written through them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
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
    conn: Connection, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> None:
    """Insert ``rows`` (tuples in ``columns`` order) into ``table`` in one go."""
    if not rows:
        return
    names = ", ".join(columns)
    if conn.dialect.name == "postgresql":
        driver: Any = conn.connection.driver_connection
        with (
            driver.cursor() as cursor,
            cursor.copy(f"COPY {table.name} ({names}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        return
    placeholders = ", ".join("?" for _ in columns)
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({names}) VALUES ({placeholders})", rows)  # type: ignore[arg-type]


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
    if isinstance(value, Decimal):
        return decimal_to_text(value)
    if isinstance(value, datetime):
        return _datetime_text(value)
    if isinstance(value, date):
        return value.isoformat()
    return value
