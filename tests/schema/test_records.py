"""The OfferRecord interchange format: valid records pass, each kind of bad input says why."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from schema.records import OfferRecord, describe_validation_error
from tests.support.factories import record


def reason(**overrides: object) -> str:
    with pytest.raises(ValidationError) as info:
        OfferRecord.model_validate(record(**overrides))
    return describe_validation_error(info.value)


def test_valid_record_normalizes_codes_and_keeps_exact_decimals() -> None:
    r = OfferRecord.model_validate(record(currency="eur", country="de", amount="2.4900"))
    assert r.currency == "EUR" and r.country == "DE"
    assert r.amount == Decimal("2.4900") and isinstance(r.amount, Decimal)
    assert r.key == ("acme", "gpu-0", "r0", "on_demand", "hour")


@pytest.mark.parametrize("value", ["NaN", "sNaN", "Infinity", "-Infinity"])
def test_non_finite_decimal_objects_are_rejected_too(value: str) -> None:
    """Python callers may pass Decimal objects, not text: those are checked alike."""
    for field in ("amount", "gpu_count", "vcpus"):
        with pytest.raises(ValidationError, match="must be finite"):
            OfferRecord.model_validate(record(**{field: Decimal(value)}))


def test_fractional_gpu_count_is_allowed() -> None:
    assert OfferRecord.model_validate(record(gpu_count="0.25")).gpu_count == Decimal("0.25")


def test_json_number_amount_uses_its_shortest_text_not_binary_float() -> None:
    assert OfferRecord.model_validate(record(amount=2.49)).amount == Decimal("2.49")


@pytest.mark.parametrize(
    ("amount", "ok"),
    [
        ("12.3400000000", True),  # ten places, trailing zeros count
        ("12.34000000000", False),
        ("0.0000000001", True),
        ("0.00000000001", False),
        ("1E-10", True),
        ("1e-11", False),
        ("0.000_000_000_1", True),  # underscores: ten places, not thirteen characters
        ("1_0.000_000_000_01", False),
        ("\u0661\u0662.5", True),  # Arabic-Indic digits, as Decimal reads them
        ("+3.", True),
        (".5", True),
        (Decimal("1E-11"), False),
        (Decimal("0.0000000001"), True),
        (2.5, True),
        (25, True),
    ],
)
def test_decimal_places_are_counted_exactly_however_the_number_is_written(
    amount: object, ok: bool
) -> None:
    """At most ten decimal places, whether read off a plain decimal string's text or from
    the parsed number (exponents, underscores, other digits, Decimal objects); the value
    kept is the one written."""
    if ok:
        parsed = OfferRecord.model_validate(record(amount=amount)).amount
        expected = Decimal(repr(amount)) if isinstance(amount, float) else Decimal(amount)  # type: ignore[arg-type]
        assert parsed == expected and str(parsed) == str(expected)
    else:
        assert reason(amount=amount) == "amount: more than 10 decimal places"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"amount": "-1"}, "amount: price must be positive"),
        ({"amount": "0"}, "amount: price must be positive"),
        ({"amount": "abc"}, "amount: unparseable amount"),
        ({"amount": "NaN"}, "amount: amount must be finite"),
        ({"amount": "1e400"}, "amount"),
        ({"amount": True}, "amount: a boolean is not a number"),
        ({"amount": "0.000000000001"}, "amount: more than 10 decimal places"),
        ({"currency": "XYZ"}, "currency: unknown ISO 4217 currency"),
        ({"country": "ZZ"}, "country: unknown ISO 3166-1 alpha-2 country"),
        ({"price_kind": "forever"}, "price_kind"),
        ({"unit": "fortnight"}, "unit"),
        ({"gpu_count": "0"}, "gpu_count"),
        ({"provider": "Bad Provider!"}, "provider: must be a lowercase slug"),
        ({"sku": ""}, "sku"),
        ({"sku": "x" * 201}, "sku"),
        ({"sku": "evil\x00name"}, "sku: contains control"),
        ({"sku": "abc\u202egnp.exe"}, "sku: contains control"),
        # the separators of the ingest's key and state texts (see service.catalog.columns and .diff)
        ({"sku": "a\x1eb"}, "sku: contains control"),
        ({"region": "eu\x1fwest"}, "region: contains control"),
        ({"provider": "acme\x1e"}, "provider"),
        ({"source_url": "javascript:alert(1)"}, "source_url"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"gpu_name_raw": None}, "either gpu_model or gpu_name_raw"),
    ],
)
def test_each_invalid_field_is_rejected_with_a_reason(overrides: dict, expected: str) -> None:
    assert expected in reason(**overrides)


def test_missing_required_fields_are_named() -> None:
    bad = record()
    del bad["amount"], bad["currency"]
    with pytest.raises(ValidationError) as info:
        OfferRecord.model_validate(bad)
    text = describe_validation_error(info.value)
    assert "amount: Field required" in text and "currency: Field required" in text


def test_html_in_names_is_kept_as_text_not_interpreted() -> None:
    r = OfferRecord.model_validate(record(sku="<script>alert(1)</script>"))
    assert r.sku == "<script>alert(1)</script>"


def test_remembered_validators_answer_as_the_first_time() -> None:
    """The value validators remember answers per exact string: a value seen before gets
    the same record, an invalid one the same error, every time."""
    good = record(amount="2.50", currency="eur", country="de", provider="acme")
    first, again = OfferRecord.model_validate(good), OfferRecord.model_validate(good)
    assert first == again and again.amount == Decimal("2.50") and again.currency == "EUR"
    for bad in (
        {"amount": "1e-11"},
        {"currency": "xyz"},
        {"country": "zz"},
        {"provider": "Not A Slug"},
        {"sku": "a\x00b"},
    ):
        errors = []
        for _ in range(2):
            with pytest.raises(ValidationError) as caught:
                OfferRecord.model_validate(record(**bad))
            errors.append(describe_validation_error(caught.value))
        assert errors[0] == errors[1] and errors[0]
    assert OfferRecord.model_validate(record(amount=Decimal("3"))).amount == Decimal("3")


@pytest.mark.parametrize(
    "overrides",
    [
        {"amount": "100000000", "unit": "second", "gpu_count": "1"},
        {"amount": "2000000", "unit": "minute", "gpu_count": "1"},
        {"amount": "100000000", "unit": "hour", "gpu_count": "0.0001"},
        {"amount": "100000000", "unit": "second", "gpu_count": "0.0000000001"},
        {"amount": "100000000", "unit": "second", "gpu_count": "8", "price_per": "gpu"},
    ],
)
def test_a_price_per_gpu_hour_past_the_amounts_bound_is_rejected(overrides: dict) -> None:
    """Each field within its bounds, the three together past 10^8 per GPU-hour: the last
    one stopped a whole ingest (``decimal.InvalidOperation`` rounding 3.6 x 10^21), the
    others made sort keys past the BIGINT range."""
    assert reason(**overrides) == (
        "record: price per GPU-hour is implausibly large (over 100,000,000: amount, unit "
        "and gpu_count together)"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"amount": "27777", "unit": "second", "gpu_count": "1"},  # 10^8 per hour, about
        {"amount": "100000000", "unit": "hour", "gpu_count": "1"},
        {"amount": "27777", "unit": "second", "gpu_count": "8", "price_per": "gpu"},
        {"amount": "0.5", "unit": "hour", "gpu_count": "0.125"},  # a shared slice
        {"amount": "100000000", "unit": "term_3y", "gpu_count": "0.5"},
    ],
)
def test_prices_within_the_bound_pass(overrides: dict) -> None:
    assert OfferRecord.model_validate(record(**overrides))
