"""A price-history step chart rendered as SVG geometry on the server (no JavaScript).

One point per observation at its ``valid_from``; the line holds each price until the
observation's ``valid_to`` (or the chart's end for the current price) and then steps.
Prices are exact decimals; only screen coordinates are rounded.
"""

from __future__ import annotations

import re
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


SPARK_W, SPARK_H, SPARK_PAD = 120, 28, 2


@dataclass(frozen=True)
class Sparkline:
    """A tiny trend line: ``path`` in a ``width`` x ``height`` box; gaps (days without a
    price) break the line. ``first``/``last``/``low``/``high`` are exact decimals."""

    path: str
    width: int
    height: int
    first: Decimal
    last: Decimal
    low: Decimal
    high: Decimal
    last_x: str
    last_y: str


def _scale(values: Sequence[Decimal | None], width: int, height: int, pad: int) -> Any:
    known = [v for v in values if v is not None]
    low, high = min(known), max(known)
    span = high - low
    step = Decimal(width - 2 * pad) / max(len(values) - 1, 1)
    inner = Decimal(height - 2 * pad)

    def point(i: int, v: Decimal) -> tuple[str, str]:
        y = pad + (inner / 2 if not span else (high - v) / span * inner)
        return _px(pad + step * i), _px(Decimal(y))

    return low, high, point


def sparkline(values: Sequence[Decimal | None]) -> Sparkline | None:
    """Geometry for one value per day (None: no price that day), oldest first."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    low, high, point = _scale(values, SPARK_W, SPARK_H, SPARK_PAD)
    path = _runs(values, point)
    x, y = point(max(i for i, v in enumerate(values) if v is not None), known[-1])
    return Sparkline(_compact(path), SPARK_W, SPARK_H, known[0], known[-1], low, high, x, y)


def _runs(values: Sequence[Decimal | None], point: Any) -> str:
    """A path through the daily values, a run of equal days drawn as one horizontal stroke
    (``H``), a day without a price breaking the line."""
    parts: list[str] = []
    previous: Decimal | None = None
    run_end = ""
    for i, v in enumerate(values):
        if v is not None and v == previous:
            run_end = point(i, v)[0]
            continue
        if run_end:
            parts.append(f"H{run_end}")
            run_end = ""
        if v is not None:
            x, y = point(i, v)
            parts.append(f"{'L' if previous is not None else 'M'}{x} {y}")
        previous = v
    if run_end:
        parts.append(f"H{run_end}")
    return " ".join(parts)


def _compact(path: str) -> str:
    """Drop ``.0`` from coordinates: the overview carries one path per GPU."""
    return re.sub(r"\.0(?=[ LMH]|$)", "", path)


@dataclass
class Series:
    name: str
    path: str
    last: Decimal | None
    color: str
    dash: str


PALETTE = (
    "#0b5cad",
    "#b35900",
    "#1a7f37",
    "#a11d6b",
    "#5a3fb0",
    "#00707a",
    "#8a6d00",
    "#c0392b",
)


@dataclass
class LinesChart:
    """Several daily series on one set of axes (the GPU page's per-provider history)."""

    width: int = WIDTH
    height: int = HEIGHT
    series: list[Series] = field(default_factory=list)
    y_ticks: list[tuple[str, Decimal]] = field(default_factory=list)
    x_ticks: list[tuple[str, str]] = field(default_factory=list)
    left: int = LEFT
    right_edge: int = WIDTH - RIGHT
    top: int = TOP
    bottom_edge: int = HEIGHT - BOTTOM


def lines_chart(
    named: Sequence[tuple[str, Sequence[Decimal | None]]], start: Any, end: Any
) -> LinesChart | None:
    """One line per ``(name, daily values)``; a day without a price breaks that line."""
    known = [v for _, values in named for v in values if v is not None]
    if not known:
        return None
    chart = LinesChart()
    low, high = min(known), max(known)
    if low == high:
        pad = abs(low) / 10 or Decimal(1)
        low, high = low - pad, high + pad
    days = max(len(values) for _, values in named)
    plot_w = Decimal(chart.right_edge - chart.left)
    plot_h = Decimal(chart.bottom_edge - chart.top)

    def xy(i: int, v: Decimal) -> tuple[str, str]:
        x = chart.left + plot_w * i / max(days - 1, 1)
        return _px(x), _px(chart.top + (high - v) / (high - low) * plot_h)

    for n, (name, values) in enumerate(named):
        path = _runs(values, xy)
        last = next((v for v in reversed(values) if v is not None), None)
        color = PALETTE[n % len(PALETTE)]
        dash = "" if n < len(PALETTE) else ("6 3" if n < 2 * len(PALETTE) else "2 2")
        chart.series.append(Series(name, path, last, color, dash))
    middle = (low + high) / 2
    chart.y_ticks = [(xy(0, v)[1], v) for v in (high, middle, low)]
    chart.x_ticks = [
        (_px(Decimal(chart.left)), str(start)),
        (_px(Decimal(chart.right_edge)), str(end)),
    ]
    return chart
