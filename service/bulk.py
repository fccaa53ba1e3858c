"""Bulk writes for ingest: COPY on PostgreSQL, one executemany on SQLite.

Values are converted once, per column kind, the way the column types store them
(exact decimals as canonical text on SQLite, UTC timestamps as naive UTC text), so
rows read back through the ORM types are identical to rows written through them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Date, Table

from schema.types import DecimalType, UTCDateTime, decimal_to_text

SQLITE_DATETIME = "%Y-%m-%d %H:%M:%S.%f"


def _sqlite_converter(column_type: Any) -> Callable[[Any], Any] | None:
    if isinstance(column_type, DecimalType):
        memo: dict[Any, str | None] = {None: None}

        def convert_decimal(value: Any) -> str | None:
            text = memo.get(value)
            if text is None and value is not None:
                text = decimal_to_text(value)
                if len(memo) < 4096:  # repeated figures (counts, FX rates) convert once
                    memo[value] = text
            return text

        return convert_decimal
    if isinstance(column_type, UTCDateTime):
        cache: dict[datetime, str] = {}

        def convert(value: datetime | None) -> str | None:
            if value is None:
                return None
            text = cache.get(value)
            if text is None:
                if value.tzinfo is None:
                    raise ValueError("naive datetime refused")
                text = value.astimezone(UTC).strftime(SQLITE_DATETIME)
                cache[value] = text
            return text

        return convert
    if isinstance(column_type, Date):
        return lambda v: None if v is None else v.isoformat()
    return None


def bulk_insert(
    conn: Connection, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> None:
    """Insert ``rows`` (tuples in ``columns`` order) into ``table`` in one go."""
    if not rows:
        return
    names = ", ".join(columns)
    if conn.dialect.name == "postgresql":
        driver = conn.connection.driver_connection
        with (
            driver.cursor() as cursor,
            cursor.copy(  # type: ignore[union-attr]
                f"COPY {table.name} ({names}) FROM STDIN"
            ) as copy,
        ):
            for row in rows:
                copy.write_row(row)
        return
    converters = [_sqlite_converter(table.c[name].type) for name in columns]
    if any(converters):
        active = [(i, c) for i, c in enumerate(converters) if c is not None]
        converted = []
        for row in rows:
            values = list(row)
            for index, convert in active:
                values[index] = convert(values[index])
            converted.append(tuple(values))
        rows = converted  # type: ignore[assignment]
    placeholders = ", ".join("?" for _ in columns)
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({names}) VALUES ({placeholders})", rows)  # type: ignore[arg-type]
