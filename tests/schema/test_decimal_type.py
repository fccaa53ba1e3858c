"""``schema.types.DecimalType``: what PostgreSQL's ``NUMERIC(28, 10)`` returns is read as
the canonical text reads back (trailing zeros dropped, never an exponent), on both
databases, and :func:`~schema.types.unpadded` gives exactly what the text's round trip
gives."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select

from schema.types import NUMERIC_SCALE, DecimalType, decimal_to_text, unpadded
from tests.conftest import scratch_pg_database

PLACES = Decimal(1).scaleb(-NUMERIC_SCALE)

AMOUNTS = Table(
    "amounts", MetaData(), Column("id", Integer, primary_key=True), Column("a", DecimalType)
)

EDGES = [
    Decimal("0"),
    Decimal("-0.0"),
    Decimal("100"),
    Decimal("1E+2"),
    Decimal("2.50"),
    Decimal("0.0000000001"),
    Decimal("0.0000001"),
    Decimal("-3.2100"),
    Decimal("99999999.9999999999"),
    Decimal("123456789012345678"),
    Decimal("-123456789012345678.0000000001"),
]


def padded(value: Decimal) -> Decimal:
    """``value`` as PostgreSQL returns a ``NUMERIC(28, 10)``: ten places, zeros padding."""
    return value.quantize(PLACES)


def same(a: Decimal, b: Decimal) -> bool:
    """Equal in value and in representation (sign, digits, exponent): what str() shows."""
    return a.as_tuple() == b.as_tuple()


@given(
    st.decimals(
        min_value=Decimal("-999999999999999999.9999999999"),
        max_value=Decimal("999999999999999999.9999999999"),
        places=NUMERIC_SCALE,
        allow_nan=False,
        allow_infinity=False,
    )
)
def test_unpadded_is_the_canonical_texts_round_trip(value: Decimal) -> None:
    read = padded(value)
    assert same(unpadded(read), Decimal(decimal_to_text(read)))
    assert unpadded(read) == value


@given(
    st.integers(min_value=-(10**45), max_value=10**45),
    st.integers(min_value=0, max_value=20),
    st.integers(min_value=0, max_value=6),
)
def test_unpadded_never_rounds_a_long_figure(digits: int, places: int, zeros: int) -> None:
    """A sum or an average typed as this column can hold more than the default context's
    28 digits: nothing is rounded away, whatever the padding."""
    value = Decimal(f"{digits}E-{places}")  # exact: from text, no context
    read = Decimal(f"{digits * 10**zeros}E-{places + zeros}")  # the same, padded
    assert same(unpadded(read), Decimal(decimal_to_text(read)))
    assert unpadded(read) == value


def test_edges() -> None:
    for value in EDGES:
        read = padded(value)
        assert same(unpadded(read), Decimal(decimal_to_text(read))), value
    assert str(unpadded(padded(Decimal("1E+2")))) == "100"
    assert str(unpadded(padded(Decimal("-0.0")))) == "0"
    assert str(unpadded(padded(Decimal("2.50")))) == "2.5"


def test_both_databases_read_back_the_canonical_values(tmp_path: Path) -> None:
    sqlite = create_engine(f"sqlite:///{tmp_path / 'amounts.db'}")
    with scratch_pg_database() as url:
        for engine in (sqlite, create_engine(url)):
            AMOUNTS.metadata.create_all(engine)
            with engine.begin() as conn:
                conn.execute(insert(AMOUNTS), [{"id": i, "a": v} for i, v in enumerate(EDGES)])
                read = conn.execute(select(AMOUNTS.c.a).order_by(AMOUNTS.c.id)).scalars().all()
            for got, value in zip(read, EDGES, strict=True):
                assert same(got, Decimal(decimal_to_text(value))), (engine.dialect.name, value)
            engine.dispose()
