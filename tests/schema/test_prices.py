"""Price strings as pricing pages print them (crawlers.normalize.prices)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlers.normalize.prices import (
    Price,
    UnparseablePrice,
    is_no_price,
    parse_number,
    parse_price,
    parse_unit,
    to_decimal,
)
from schema.enums import Unit

D = Decimal


@pytest.mark.parametrize(
    ("text", "amount", "currency", "unit", "per_gpu", "floor"),
    [
        ("$2.49/hr", "2.49", "USD", Unit.hour, None, False),
        ("$2.49 per GPU/hour", "2.49", "USD", Unit.hour, True, False),
        ("$2.99 / GPU / hr", "2.99", "USD", Unit.hour, True, False),
        ("$20.72 / hr", "20.72", "USD", Unit.hour, None, False),
        ("€1,80 HT / heure", "1.80", "EUR", Unit.hour, None, False),
        ("from $1,299/mo", "1299", "USD", Unit.month, None, True),
        ("¥12.5/小时", "12.5", "CNY", Unit.hour, None, False),
        ("12.5元/小时", "12.5", "CNY", Unit.hour, None, False),
        ("¥300/時間", "300", "JPY", Unit.hour, None, False),
        ("1 299,50 € / mois", "1299.50", "EUR", Unit.month, None, False),
        ("1.299,50 €/Monat", "1299.50", "EUR", Unit.month, None, False),
        ("US$ 2.49/h", "2.49", "USD", Unit.hour, None, False),
        ("2,49 €/h", "2.49", "EUR", Unit.hour, None, False),
        ("0,125 €/min", "0.125", "EUR", Unit.minute, None, False),
        ("£0.90 per hour", "0.90", "GBP", Unit.hour, None, False),
        ("EUR 1,80/h", "1.80", "EUR", Unit.hour, None, False),
        ("2.49 USD/GPU-hour", "2.49", "USD", Unit.hour, True, False),
        ("$1.89/H100/hour", "1.89", "USD", Unit.hour, True, False),
        ("$29.10/h", "29.10", "USD", Unit.hour, None, False),
        ("$0.00025/s", "0.00025", "USD", Unit.second, None, False),
        ("$3.90/GPU-hr", "3.90", "USD", Unit.hour, True, False),
        ("$2.89 per instance per hour", "2.89", "USD", Unit.hour, False, False),
        ("Starts from $2.25/hour", "2.25", "USD", Unit.hour, None, True),
        ("from $1.55", "1.55", "USD", None, None, True),
        ("as low as $1.99/GPU/hr", "1.99", "USD", Unit.hour, True, True),
        ("à partir de 0,79 €/h", "0.79", "EUR", Unit.hour, None, True),
        ("$2.49+", "2.49", "USD", None, None, True),
        ("$ \u00a02.20 per Hour", "2.20", "USD", Unit.hour, None, False),
        ("\u00a0$1.90\u00a0\u00a0", "1.90", "USD", None, None, False),
        ("$\u200b1.99", "1.99", "USD", None, None, False),  # zero-width space
        ("2 GPUs: $5.00/hr", "5.00", "USD", Unit.hour, None, False),  # the priced number
        ("$2.24*", "2.24", "USD", None, None, False),
        ("$4.99¹", "4.99", "USD", None, None, False),  # superscript footnote, not a digit
        ("$42.00", "42.00", "USD", None, None, False),
        ("2.49", "2.49", "USD", None, None, False),  # the page's currency by default
    ],
)
def test_price_strings(
    text: str, amount: str, currency: str, unit: Unit | None, per_gpu: bool | None, floor: bool
) -> None:
    price = parse_price(text, currency="USD")
    assert price is not None
    assert (price.amount, price.currency, price.unit, price.per_gpu, price.floor) == (
        D(amount),
        currency,
        unit,
        per_gpu,
        floor,
    )
    assert isinstance(price.amount, Decimal)


def test_range_keeps_lower_bound_as_floor() -> None:
    price = parse_price("$2.49 - $3.10/hr")
    assert price == Price(D("2.49"), "USD", Unit.hour, None, True, D("3.10"), "$2.49 - $3.10/hr")
    assert parse_price("€1,80 – 2,40 €/h") == Price(
        D("1.80"), "EUR", Unit.hour, None, True, D("2.40"), "€1,80 – 2,40 €/h"
    )
    reversed_range = parse_price("$3.10 to $2.49 per hour")
    assert reversed_range is not None
    assert (reversed_range.amount, reversed_range.upper) == (D("2.49"), D("3.10"))
    with pytest.raises(UnparseablePrice, match="two currencies"):
        parse_price("$2.49 - €3.10/hr")


@pytest.mark.parametrize(
    "text",
    [
        "Contact sales",
        "CONTACT SALES",
        "Contact us",
        "contact our sales team",
        "––",
        "–",
        "—",
        "-",
        "n/a",
        "N/A",
        "",
        "   ",
        "\u00a0",
        "Coming soon",
        "Sold out",
        "On request",
        "Sur demande",
        "🔜",
        None,
    ],
)
def test_no_price_markers(text: str | None) -> None:
    assert is_no_price(text)
    assert parse_price(text) is None


@pytest.mark.parametrize(
    "text",
    ["$abc", "Pricing varies", "$O.55", "$1.2.3/hr", "¥12.5/h", "$0", "$0.00/hr", "12,34,567"],
)
def test_unreadable_prices_raise(text: str) -> None:
    with pytest.raises(UnparseablePrice):
        parse_price(text, currency="USD")


def test_yen_follows_the_page_currency() -> None:
    assert parse_price("¥12.5/h", currency="CNY") == Price(
        D("12.5"), "CNY", Unit.hour, text="¥12.5/h"
    )
    assert parse_price("¥1,200/h", currency="JPY") == Price(
        D("1200"), "JPY", Unit.hour, text="¥1,200/h"
    )


def test_dollar_follows_a_dollar_page_currency() -> None:
    assert parse_price("$2.49/hr", currency="CAD").currency == "CAD"  # type: ignore[union-attr]
    assert parse_price("$2.49/hr", currency="EUR").currency == "USD"  # type: ignore[union-attr]
    assert parse_price("C$2.49/hr").currency == "CAD"  # type: ignore[union-attr]


def test_defaults_from_the_column_header_and_text_wins() -> None:
    unit, per_gpu = parse_unit("PRICE/GPU/HR*")
    assert (unit, per_gpu) == (Unit.hour, True)
    price = parse_price("$4.99", currency="USD", unit=unit, per_gpu=per_gpu)
    assert price == Price(D("4.99"), "USD", Unit.hour, True, text="$4.99")
    monthly = parse_price("$99/month", unit=Unit.hour, per_gpu=False)
    assert monthly is not None and monthly.unit is Unit.month and monthly.per_gpu is False


@pytest.mark.parametrize(
    ("header", "unit", "per_gpu"),
    [
        ("On-Demand Price (Per Hour)", Unit.hour, None),
        ("Preemptible, GPU-hour", Unit.hour, True),
        ("GPU-hour (Effective October 1, 2026)", Unit.hour, True),
        ("Inference Single GPU Price(Per Hour)", Unit.hour, True),
        ("Pricing Per Hour", Unit.hour, None),
        ("On demand price", None, None),
        ("RAM, GB", None, None),
        ("Price / month", Unit.month, None),
        ("$5 an hour", Unit.hour, None),  # "an" is English, not French "per year"
        ("$99/m", None, None),  # "/m" is minute or month: not guessed
        ("", None, None),
    ],
)
def test_units_from_headers(header: str, unit: Unit | None, per_gpu: bool | None) -> None:
    assert parse_unit(header) == (unit, per_gpu)


@pytest.mark.parametrize(
    ("token", "decimal_comma", "value"),
    [
        ("1,299", None, "1299"),
        ("1.299", None, "1.299"),
        ("1.299", True, "1299"),
        ("1,80", None, "1.80"),
        ("0,125", None, "0.125"),
        ("1,234,567", None, "1234567"),
        ("1.234.567", None, "1234567"),
        ("1,234.50", None, "1234.50"),
        ("1.234,50", None, "1234.50"),
        ("1 234,50", None, "1234.50"),
        ("1'234.50", None, "1234.50"),
        ("1,299", True, "1.299"),
        ("12", None, "12"),
    ],
)
def test_separators(token: str, decimal_comma: bool | None, value: str) -> None:
    assert to_decimal(token, decimal_comma=decimal_comma) == D(value)


def test_spec_numbers() -> None:
    assert parse_number("1,920 GiB") == D(1920)
    assert parse_number("4,096") == D(4096)
    assert parse_number("208") == D(208)
    assert parse_number("16-192") is None  # a range is not one figure
    assert parse_number("") is None
    assert parse_number(None) is None


# ---------------------------------------------------------------- properties

amounts = st.decimals(min_value=D("0.01"), max_value=D("99999.99"), places=2)
SYMBOLS = [("$", "USD"), ("€", "EUR"), ("£", "GBP"), ("US$", "USD")]
UNITS = [
    ("/hr", Unit.hour),
    ("/hour", Unit.hour),
    (" per hour", Unit.hour),
    ("/mo", Unit.month),
    (" / month", Unit.month),
    ("/GPU/hr", Unit.hour),
    ("/min", Unit.minute),
    ("", None),
]


def _us(amount: Decimal) -> str:
    return f"{amount:,.2f}"


def _european(amount: Decimal, group: str) -> str:
    return f"{amount:,.2f}".replace(",", "\u0000").replace(".", ",").replace("\u0000", group)


@given(
    amount=amounts,
    symbol=st.sampled_from(SYMBOLS),
    unit=st.sampled_from(UNITS),
    floor=st.booleans(),
)
def test_round_trip_us_convention(
    amount: Decimal, symbol: tuple[str, str], unit: tuple[str, Unit | None], floor: bool
) -> None:
    text = f"{'from ' if floor else ''}{symbol[0]}{_us(amount)}{unit[0]}"
    price = parse_price(text)
    assert price is not None
    assert (price.amount, price.currency, price.unit, price.floor) == (
        amount,
        symbol[1],
        unit[1],
        floor,
    )


@given(
    amount=amounts,
    group=st.sampled_from([".", " ", "\u00a0", "\u202f"]),
    unit=st.sampled_from(UNITS[:5]),
)
def test_round_trip_european_convention(
    amount: Decimal, group: str, unit: tuple[str, Unit | None]
) -> None:
    text = f"{_european(amount, group)} €{unit[0]}"
    price = parse_price(text, decimal_comma=True)
    assert price is not None
    assert (price.amount, price.currency, price.unit) == (amount, "EUR", unit[1])


@given(st.text(max_size=40))
def test_never_crashes_otherwise(text: str) -> None:
    try:
        price = parse_price(text, currency="USD")
    except UnparseablePrice:
        return
    assert price is None or (price.amount > 0 and isinstance(price.amount, Decimal))
