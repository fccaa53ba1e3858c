"""Catalog words as people say them: price kinds and payment options."""

from __future__ import annotations

KIND_LABELS = {
    "on_demand": "On-demand",
    "spot": "Spot",
    "low_priority": "Low priority",
    "interruptible": "Interruptible",
    "reserved_1m": "1-month reserved",
    "reserved_6m": "6-month reserved",
    "reserved_1y": "1-year reserved",
    "reserved_3y": "3-year reserved",
    "monthly": "Monthly",
    "weekly": "Weekly",
    "serverless": "Serverless (billed while running)",
    "serverless_active": "Serverless, always on",
}
TERM_UNITS = {"term_1y", "term_3y"}


def price_kind_label(kind: str | None, unit: str | None = None) -> str:
    """``reserved_1y`` -> "1-year reserved"; with the unit the price is quoted in, the
    payment option too: a whole term paid at once is "all upfront", a reserved price per
    hour or month "no upfront" (billed as used, as AWS names it)."""
    if not kind:
        return "—"
    label = KIND_LABELS.get(kind, kind.replace("_", " ").capitalize())
    if kind.startswith("reserved_") and unit:
        if unit in TERM_UNITS:
            return f"{label}, all upfront"
        if unit in ("hour", "month", "second", "minute", "day"):
            return f"{label}, no upfront"
    return label
