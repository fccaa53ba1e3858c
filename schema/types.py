"""Column types shared by every table: exact decimals and UTC timestamps.

SQLite has no exact decimal type (SQLAlchemy's ``Numeric`` goes through float there),
so :class:`DecimalType` stores a canonical decimal string on SQLite and ``NUMERIC`` on
PostgreSQL. :class:`UTCDateTime` refuses naive datetimes and always returns aware UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Any

from sqlalchemy import BigInteger, Date, DateTime, Dialect, Integer, LargeBinary, Numeric, String
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
            return unpadded(value)
        return Decimal(value if isinstance(value, str) else str(value))


_ONE = Decimal(1)
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Arithmetic that never rounds: what a column of this type returns may be a sum or an
average with more digits than the default context's 28."""


def unpadded(value: Decimal) -> Decimal:
    """A decimal PostgreSQL returned as its canonical text reads back
    (``Decimal(decimal_to_text(value))``: no trailing zeros, never a positive exponent),
    without the text: a whole number quantized to units, any other normalized (which then
    only strips trailing zeros), both exactly. Called for every decimal PostgreSQL
    returns; under half the time of the text's round trip."""
    if value == value.to_integral_value():
        return value.quantize(_ONE, context=_EXACT) if value else Decimal(0)  # "0", not -0
    return value.normalize(_EXACT)


def within_scale(value: Decimal) -> Decimal:
    """A number read from outside (a filter, a threshold) that the database can compare
    exactly: ``value`` itself, or without its trailing zeros when they run past
    :data:`NUMERIC_SCALE` places; ``ValueError`` when it has more significant places
    (PostgreSQL refuses a parameter such as ``1e-99999``, SQLite would read it as 0.0)."""
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or exponent >= -NUMERIC_SCALE:
        return value
    canonical = unpadded(value)
    places = canonical.as_tuple().exponent
    if isinstance(places, int) and places < -NUMERIC_SCALE:
        raise ValueError(f"more than {NUMERIC_SCALE} decimal places")
    return canonical


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always aware UTC in Python; naive input is refused."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        value = aware_utc(value)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def aware_utc(value: Any) -> datetime:
    """``value`` as an aware UTC datetime; a clear error for anything else (a naive
    datetime included: every time is UTC and must say so)."""
    if not isinstance(value, datetime):
        raise TypeError(f"expected datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        raise ValueError("naive datetime refused: all times are UTC and must say so")
    return value.astimezone(UTC)


EPOCH_DAY = date(1970, 1, 1)


class CompactDate(TypeDecorator[date]):
    """A calendar date stored compactly: on SQLite an integer of days since 1970-01-01
    (2-3 bytes, where the ISO text takes 10), on PostgreSQL a ``date`` (4 bytes already).
    A ``date`` in Python either way; a datetime or anything else is refused. For a column
    of the largest table (an observation's ``fx_date``)."""

    impl = Date
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(Integer())
        return dialect.type_descriptor(Date())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if isinstance(value, datetime) or not isinstance(value, date):
            raise TypeError(f"expected a date, got {type(value).__name__}")
        return (value - EPOCH_DAY).days if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> date | None:
        if isinstance(value, int):
            return EPOCH_DAY + timedelta(days=value)
        return value  # type: ignore[no-any-return]


class UTCMicros(UTCDateTime):
    """A UTC timestamp stored compactly: on SQLite an integer of microseconds since
    1970-01-01 UTC (8 bytes, where :class:`UTCDateTime`'s text takes 26), on PostgreSQL a
    ``timestamptz`` as :class:`UTCDateTime` (8 bytes already). Aware UTC in Python either
    way; naive input is refused. For the columns of the largest tables (an observation's
    validity): SQL reading them on SQLite works on the integer (``unixepoch`` seconds are
    ``value / 1000000``)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(BigInteger())
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None or dialect.name != "sqlite":
            return super().process_bind_param(value, dialect)
        return utc_micros(aware_utc(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if isinstance(value, int):
            return EPOCH + value * MICROSECOND
        return super().process_result_value(value, dialect)


def utc_micros(value: datetime) -> int:
    """An aware datetime as :class:`UTCMicros` stores it on SQLite."""
    return (value - EPOCH) // MICROSECOND


class Digest(TypeDecorator[str]):
    """A hash digest: lowercase hexadecimal text in Python, its bytes in the database
    (BLOB on SQLite, BYTEA on PostgreSQL): half the room of the text, on every row that
    carries one (an observation's payload sha256: 32 bytes instead of 64).

    Only hexadecimal text of an even length is accepted; anything else is refused, never
    stored half-converted."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise TypeError(f"a digest is hexadecimal text, not {type(value).__name__}")
        return digest_bytes(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else bytes(value).hex()


def digest_bytes(text: str) -> bytes:
    """The bytes of a digest written in hexadecimal (what :class:`Digest` stores); a
    clear error for anything that is not such text."""
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) * 2 != len(text) or not raw or text != text.lower():  # fromhex skips spaces
        raise ValueError(f"not a lowercase hexadecimal digest: {text[:80]!r}")
    return raw


def utcnow() -> datetime:
    return datetime.now(UTC)
