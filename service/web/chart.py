"""A price-history step chart rendered as SVG geometry on the server (no JavaScript).

One point per observation at its ``valid_from``; the line holds each price until the
observation's ``valid_to`` (or the chart's end for the current price) and then steps.
Prices are exact decimals; only screen coordinates are rounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

WIDTH = 720
HEIGHT = 260
LEFT, RIGHT, TOP, BOTTOM = 84, 16, 16, 36
PIXEL = Decimal("0.1")


@dataclass(frozen=True)
class ChartPoint:
    x: str
    y: str
    amount: Decimal
    at: datetime
    observation_id: int


@dataclass
class Chart:
    width: int = WIDTH
    height: int = HEIGHT
    path: str = ""
    points: list[ChartPoint] = field(default_factory=list)
    y_ticks: list[tuple[str, Decimal]] = field(default_factory=list)
    x_ticks: list[tuple[str, datetime]] = field(default_factory=list)
    currency: str = ""
    left: int = LEFT
    right_edge: int = WIDTH - RIGHT
    top: int = TOP
    bottom_edge: int = HEIGHT - BOTTOM


def _px(value: Decimal) -> str:
    return str(value.quantize(PIXEL, rounding=ROUND_HALF_EVEN))


def step_chart(observations: Sequence[dict[str, Any]], end: datetime) -> Chart | None:
    """Geometry for ``observations`` (oldest first; quoted ``amount`` over time) up to ``end``."""
    if not observations:
        return None
    chart = Chart(currency=str(observations[-1]["currency"]))
    start = observations[0]["valid_from"]
    last = observations[-1]
    stop = max(end, last["valid_from"], *(o["valid_to"] or start for o in observations))
    if last["valid_to"] is not None:
        stop = max(last["valid_to"], last["valid_from"])
    if stop <= start:
        stop = start + timedelta(days=1)
    span = Decimal(str((stop - start).total_seconds()))
    amounts = [Decimal(o["amount"]) for o in observations]
    low, high = min(amounts), max(amounts)
    if low == high:
        pad = abs(low) / 10 or Decimal(1)
        low, high = low - pad, high + pad
    plot_w = Decimal(chart.right_edge - chart.left)
    plot_h = Decimal(chart.bottom_edge - chart.top)

    def x_of(when: datetime) -> Decimal:
        offset = Decimal(str((when - start).total_seconds()))
        return chart.left + offset / span * plot_w

    def y_of(amount: Decimal) -> Decimal:
        return chart.top + (high - amount) / (high - low) * plot_h

    parts: list[str] = []
    previous_end: datetime | None = None
    for obs, amount in zip(observations, amounts, strict=True):
        x0, y = x_of(obs["valid_from"]), y_of(amount)
        x1 = x_of(obs["valid_to"] or stop)
        if previous_end is not None and previous_end == obs["valid_from"]:
            parts.append(f"V{_px(y)}")
        else:
            parts.append(f"M{_px(x0)},{_px(y)}")
        parts.append(f"H{_px(x1)}")
        previous_end = obs["valid_to"]
        chart.points.append(ChartPoint(_px(x0), _px(y), amount, obs["valid_from"], obs["id"]))
    chart.path = " ".join(parts)
    middle = (low + high) / 2
    chart.y_ticks = [(_px(y_of(v)), v.normalize()) for v in (high, middle, low)]
    chart.x_ticks = [(_px(x_of(start)), start), (_px(x_of(stop)), stop)]
    return chart
