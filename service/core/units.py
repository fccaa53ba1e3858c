"""Price arithmetic: hours per billing unit, per-GPU-hour figures, exact rounding."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from schema.enums import HOURS, HOURS_PER_MONTH, PricePer, Unit

__all__ = ["HOURS", "HOURS_PER_MONTH", "gpu_hourly", "instance_hourly", "money", "q"]

PLACES = Decimal("1e-10")
ONE = Decimal(1)


def q(value: Decimal) -> Decimal:
    """Round to the 10 decimal places every stored figure keeps (banker's rounding), without
    trailing zeros and never with an exponent: ``20`` (not ``2E+1``), ``525600``, ``0.5``, as
    JSON and CSV show it to people and programs."""
    value = value.quantize(PLACES, rounding=ROUND_HALF_EVEN).normalize()
    # normalized, a whole number has an exponent of 0 or more (2E+1), any other less: the
    # test without as_tuple(), which builds a tuple of every digit (0.55 against 0.96 us a
    # call; an ingest calls this four times per distinct price)
    return value.quantize(ONE) if value == value.to_integral_value() else value


money = q
"""The name the TCO totals use; the same rounding as every figure."""


def instance_hourly(
    amount: Decimal, unit: Unit, price_per: PricePer, gpu_count: Decimal
) -> Decimal:
    """The price of the whole SKU for one hour, in the quoted currency."""
    hourly = amount if unit is Unit.hour else amount / HOURS[unit]  # q() canonicalizes
    if price_per == PricePer.gpu:
        hourly *= gpu_count
    return q(hourly)


def gpu_hourly(instance_hour_amount: Decimal, gpu_count: Decimal) -> Decimal:
    return q(instance_hour_amount / gpu_count)
