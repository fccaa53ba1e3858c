"""One offer's price history: its observations, and min / max / last per day or week."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, or_, select

from service.query.sql import OBS, OFFER, NotFound

HISTORY_COLUMNS = (
    OBS.c.id,
    OBS.c.amount,
    OBS.c.currency,
    OBS.c.hourly_amount,
    OBS.c.amount_usd,
    OBS.c.gpu_hour_usd,
    OBS.c.fx_rate,
    OBS.c.fx_date,
    OBS.c.valid_from,
    OBS.c.valid_to,
    OBS.c.version_from,
    OBS.c.version_to,
    OBS.c.crawl_run_id,
    OBS.c.raw_sha256,
)


def offer_history(
    conn: Connection, offer_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[dict[str, Any]]:
    """Every observation of an offer overlapping [start, end], oldest first."""
    exists_stmt = select(OFFER.c.id).where(OFFER.c.id == offer_id)
    if conn.execute(exists_stmt).first() is None:
        raise NotFound(f"offer {offer_id} does not exist")
    stmt = select(*HISTORY_COLUMNS).where(OBS.c.offer_id == offer_id)
    if start is not None:
        stmt = stmt.where(or_(OBS.c.valid_to.is_(None), OBS.c.valid_to > start))
    if end is not None:
        stmt = stmt.where(OBS.c.valid_from <= end)
    stmt = stmt.order_by(OBS.c.valid_from, OBS.c.id)
    result = conn.execute(stmt)
    keys = tuple(result.keys())  # zip, not dict(RowMapping): a busy offer has 10^4 rows
    return [dict(zip(keys, row, strict=True)) for row in result]


Resolution = Literal["day", "week"]
MAX_BUCKETS = 5000


def bucket_start(when: datetime, resolution: Resolution) -> datetime:
    day = when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if resolution == "week":
        return day - timedelta(days=day.weekday())  # ISO weeks start on Monday
    return day


def history_buckets(
    observations: Sequence[dict[str, Any]],
    resolution: Resolution,
    start: datetime | None,
    end: datetime,
) -> list[dict[str, Any]]:
    """min / max / last price (quoted and USD per GPU-hour) per UTC day or ISO week.

    A bucket covers [bucket_start, next bucket_start); an observation counts in every bucket
    its [valid_from, valid_to) overlaps. ``last`` is the price in force at the bucket's end
    (or at ``end`` for the bucket containing it). Buckets where no price was in force are
    omitted.
    """
    if not observations:
        return []
    step = timedelta(days=7 if resolution == "week" else 1)
    first = start if start is not None else observations[0]["valid_from"]
    cursor = bucket_start(max(first, observations[0]["valid_from"]), resolution)
    out: list[dict[str, Any]] = []
    index = 0
    while cursor <= end and len(out) < MAX_BUCKETS:
        stop = cursor + step
        while index < len(observations) and _ends_before(observations[index], cursor):
            index += 1
        inside = []
        for obs in observations[index:]:
            if obs["valid_from"] >= stop or obs["valid_from"] > end:
                break
            if not _ends_before(obs, cursor):
                inside.append(obs)
        if inside:
            amounts = [o["amount"] for o in inside]
            usd = [o["gpu_hour_usd"] for o in inside if o["gpu_hour_usd"] is not None]
            last = inside[-1]
            out.append(
                {
                    "start": cursor,
                    "end": stop,
                    "currency": last["currency"],
                    "min": min(amounts),
                    "max": max(amounts),
                    "last": last["amount"],
                    "min_price_per_gpu_hour_usd": min(usd) if usd else None,
                    "max_price_per_gpu_hour_usd": max(usd) if usd else None,
                    "last_price_per_gpu_hour_usd": last["gpu_hour_usd"],
                    "observations": len(inside),
                }
            )
        cursor = stop
    return out


def _ends_before(observation: dict[str, Any], when: datetime) -> bool:
    return observation["valid_to"] is not None and observation["valid_to"] <= when
