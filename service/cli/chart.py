"""The price chart under ``gpuatlas history``: unicode block bars, exact in Decimal."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from service.cli.output import text

CHART_HEIGHT = 8
CHART_MAX_POINTS = 120
BLOCKS = " ▁▂▃▄▅▆▇█"


def chart(values: Sequence[Decimal], height: int = CHART_HEIGHT) -> list[str]:
    """A bar chart in unicode blocks, one column per value, ``height`` rows, lowest at 1/8.

    Exact: the scaling is done in Decimal. The bottom row has a block for every value.
    """
    if not values:
        return []
    low, high = min(values), max(values)
    steps = height * 8
    span = high - low
    levels = [steps // 2 if not span else 1 + int((v - low) * (steps - 1) / span) for v in values]
    rows = []
    for row in range(height - 1, -1, -1):
        rows.append("".join(BLOCKS[max(0, min(8, level - row * 8))] for level in levels))
    return rows


def render_chart(
    values: Sequence[Decimal], first: str, last: str, unit: str, *, height: int = CHART_HEIGHT
) -> list[str]:
    """The chart with its y-axis (max at the top, min at the bottom) and the first/last dates."""
    note = ""
    if len(values) > CHART_MAX_POINTS:
        note = f"  (last {CHART_MAX_POINTS} of {len(values)} points)"
        values = values[-CHART_MAX_POINTS:]
    rows = chart(values, height)
    high, low = text(max(values)), text(min(values))
    width = max(len(high), len(low))
    out = [f"{unit}{note}"]
    for index, row in enumerate(rows):
        label = low if index == len(rows) - 1 else high if index == 0 and high != low else ""
        out.append(f"{label:>{width}} ┤{row}")
    out.append(" " * width + " └" + "─" * len(values))
    gap = max(1, len(values) - len(first) - len(last) + 2)
    out.append(" " * (width + 1) + first + (" " * gap + last if last != first else ""))
    return out
