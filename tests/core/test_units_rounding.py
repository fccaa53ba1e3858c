"""``q``, the rounding every stored figure goes through (10 places, banker's rounding, no
trailing zeros, never an exponent), and ``sort_key_e10``, the integer key of a figure:
each checked against its definition as it was written until 2026-12-05 (``as_tuple()``,
``scaleb(10)``), digit for digit, on generated decimals."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schema.prices import SORT_KEY_MAX, sort_key_e10
from service.core.units import PLACES, q


def _by_definition(value: Decimal) -> Decimal:
    value = value.quantize(PLACES, rounding=ROUND_HALF_EVEN).normalize()
    exponent = value.as_tuple().exponent
    return value.quantize(Decimal(1)) if isinstance(exponent, int) and exponent > 0 else value


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("20", "20"),
        ("20.00", "20"),
        ("2E+1", "20"),
        ("1E+5", "100000"),
        ("525600", "525600"),
        ("0.5", "0.5"),
        ("0", "0"),
        ("0E-12", "0"),
        ("-0", "-0"),
        ("0.00000000005", "0"),  # half to even: 0
        ("0.00000000015", "2E-10"),
        ("1.23456789015", "1.2345678902"),
        ("-3.50", "-3.5"),
    ],
)
def test_q_shows_each_figure_as_people_read_it(value: str, shown: str) -> None:
    assert str(q(Decimal(value))) == shown
    assert str(q(Decimal(value))) == str(_by_definition(Decimal(value)))


@given(
    st.one_of(
        st.decimals(
            allow_nan=False,
            allow_infinity=False,
            places=None,
            min_value=-(10**15),
            max_value=10**15,
        ),
        st.builds(
            lambda n, e: Decimal(n).scaleb(e), st.integers(-(10**9), 10**9), st.integers(-14, 8)
        ),
    )
)
def test_q_is_its_definition_digit_for_digit(value: Decimal) -> None:
    try:
        expected = _by_definition(value)
    except InvalidOperation:  # beyond the context's precision: both refuse it
        with pytest.raises(InvalidOperation):
            q(value)
        return
    got = q(value)
    assert str(got) == str(expected)
    assert got.as_tuple() == expected.as_tuple()


def test_q_refuses_what_cannot_be_a_figure() -> None:
    with pytest.raises(InvalidOperation):
        q(Decimal("Infinity"))
    assert q(Decimal("NaN")).is_nan()  # kept as it is, as before; records never hold one


def _key_by_definition(value: Decimal) -> int:
    key = int(value.scaleb(10))
    return max(-SORT_KEY_MAX, min(SORT_KEY_MAX, key))


@given(
    st.one_of(
        st.decimals(allow_nan=False, allow_infinity=False, places=10),
        st.builds(
            lambda n, e: Decimal(n).scaleb(e), st.integers(-(10**30), 10**30), st.integers(-20, 20)
        ),
    )
)
def test_the_sort_key_is_its_definition(value: Decimal) -> None:
    """``sort_key_e10`` multiplies by 1E+10 instead of ``scaleb(10)``: the same integer for
    every decimal, the saturation at the BIGINT range included."""
    assert sort_key_e10(value) == _key_by_definition(value)


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("9.385", 93_850_000_000),
        ("0.0000000001", 1),
        ("-2.5", -25_000_000_000),
        ("1E+12", SORT_KEY_MAX),
        ("-1E+12", -SORT_KEY_MAX),
    ],
)
def test_the_sort_key_of_a_few_amounts(value: str, key: int) -> None:
    assert sort_key_e10(Decimal(value)) == key
    assert sort_key_e10(None) is None
