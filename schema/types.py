"""Column types shared by every table: exact decimals and UTC timestamps.

SQLite has no exact decimal type (SQLAlchemy's ``Numeric`` goes through float there),
so :class:`DecimalType` stores a canonical decimal string on SQLite and ``NUMERIC`` on
PostgreSQL. :class:`UTCDateTime` refuses naive datetimes and always returns aware UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import DateTime, Dialect, Numeric, String
from sqlalchemy.types import TypeDecorator, TypeEngine


def decimal_to_text(value: Decimal) -> str:
    """Canonical fixed-point text for a decimal (no exponent, no trailing zeros)."""
    text = str(value)
    if text[-1] != "0" and "E" not in text:  # the common case: already canonical
        if text[-1].isdigit():
            return text
        raise ValueError(f"non-finite decimal {value!r} cannot be stored")
    if "E" in text:
        if not value.is_finite():
            raise ValueError(f"non-finite decimal {value!r} cannot be stored")
        text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


NUMERIC_SCALE = 10
"""The decimal places PostgreSQL keeps of a :class:`DecimalType` value (SQLite keeps all):
a record's numbers have no more (``schema.records.MAX_DECIMAL_PLACES``), so what is
stored reads back equal on both databases."""


class DecimalType(TypeDecorator[Decimal]):
    """An exact decimal: NUMERIC(28, 10) on PostgreSQL, canonical text on SQLite."""

    impl = String(40)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Numeric(28, NUMERIC_SCALE, asdecimal=True))
        return dialect.type_descriptor(String(40))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, Decimal):
            if isinstance(value, float):
                raise TypeError("money and quantities are Decimal, never float")
            value = Decimal(str(value))
        if dialect.name == "postgresql":
            return value
        return decimal_to_text(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        if isinstance(value, Decimal):  # NUMERIC(28, 10) pads: drop the padding zeros
            return Decimal(decimal_to_text(value))
        return Decimal(str(value))


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always aware UTC in Python; naive input is refused."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected datetime, got {type(value).__name__}")
        if value.tzinfo is None:
            raise ValueError("naive datetime refused: all times are UTC and must say so")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)
