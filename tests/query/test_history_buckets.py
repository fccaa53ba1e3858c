"""Issue 20, item 5: day and week buckets grouped by the database (``offer_buckets``) give
what the Python walk over every observation gave (:func:`walk`, the code they replaced),
on SQLite and PostgreSQL.

Offers of a real ingest get seeded random histories written straight into
``price_observation``: changes within one day, at and either side of UTC midnight and the
Monday of a week, rows of no length (at midnight: in no bucket; within a day: counted),
gaps (an offer withdrawn, then back), closed and open-ended last rows, one price or
several, USD prices missing; each read over every window the route passes (none, from
before, inside, after and at a bucket boundary, in another time zone, an end before the
first price)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, func, select

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.query.history import (
    MAX_BUCKETS,
    Resolution,
    bucket_start,
    offer_buckets,
    offer_history,
)
from service.query.sql import OBS, OFFER, RUN
from tests.support.factories import records

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)
BASE = datetime(2026, 8, 3, tzinfo=UTC)  # a Monday, midnight UTC
AMOUNTS = tuple(Decimal(a) for a in ("1.5", "2", "0.0001234", "10.25", "1.49999", "1.51"))
STEPS = (  # what separates one price from the next
    timedelta(0),
    timedelta(microseconds=1),
    timedelta(minutes=7),
    timedelta(hours=1),
    timedelta(hours=23, minutes=59, seconds=59, microseconds=999999),
    timedelta(days=1),
    timedelta(days=3, hours=5),
    timedelta(days=7),
    timedelta(days=16),
)


def walk(
    observations: Sequence[dict[str, Any]],
    resolution: Resolution,
    start: datetime | None,
    end: datetime,
) -> list[dict[str, Any]]:
    """The buckets as the route computed them before: a walk over every observation."""
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


def history(rng: random.Random, first: datetime) -> list[tuple[datetime, datetime | None]]:
    """Disjoint [valid_from, valid_to) ranges, oldest first (an offer's observations)."""
    ranges: list[tuple[datetime, datetime | None]] = []
    at = first
    for _ in range(rng.randint(1, 40)):
        length = rng.choice(STEPS)
        gap = rng.choice(STEPS) if rng.random() < 0.2 else timedelta(0)
        ranges.append((at, at + length))
        at += length + gap
    if rng.random() < 0.5:  # still in force
        ranges[-1] = (ranges[-1][0], None)
    return ranges


def seed_histories(engine: Engine, settings: Settings) -> list[int]:
    """Offers of a real ingest, each given a random history; returns their ids."""
    load_reference(engine, REFERENCE_DIR)
    assert ingest(engine, settings, CrawlResult(source="acme", records=records(40)))
    rng = random.Random(5)
    starts = [  # midnight, a microsecond either side of it, mid-day, Sunday night
        BASE,
        BASE - timedelta(microseconds=1),
        BASE + timedelta(microseconds=1),
        BASE + timedelta(hours=13, minutes=17),
        BASE - timedelta(minutes=30),
    ]
    with engine.begin() as conn:
        offers = [int(r[0]) for r in conn.execute(select(OFFER.c.id).order_by(OFFER.c.id))]
        run = int(conn.execute(select(func.min(RUN.c.id))).scalar_one())
        next_id = int(conn.execute(select(func.max(OBS.c.id))).scalar_one()) + 1
        conn.execute(OBS.delete())
        rows = []
        for n, offer_id in enumerate(offers):
            first = starts[n % len(starts)] + timedelta(days=rng.randint(0, 20))
            ranges = history(rng, first)
            if n == 0:  # no length, at midnight, then one within the day
                midnight = BASE + timedelta(days=2)
                ranges = [(midnight, midnight), (midnight + timedelta(hours=2),) * 2]
                ranges.append((midnight + timedelta(hours=2), None))
            for k, (valid_from, valid_to) in enumerate(ranges):
                amount = rng.choice(AMOUNTS)
                usd = None if rng.random() < 0.15 else amount * Decimal("1.08")
                rows.append(
                    {
                        "id": next_id,
                        "offer_id": offer_id,
                        "amount": amount,
                        "currency": rng.choice(("USD", "EUR")),
                        "gpu_hour_usd": usd,
                        "valid_from": valid_from,
                        "valid_to": valid_to,
                        "version_from": k + 1,
                        "version_to": None if valid_to is None else k + 2,
                        "crawl_run_id": run,
                    }
                )
                next_id += 1
        conn.execute(OBS.insert(), rows)
    return offers


def windows(first: datetime) -> list[tuple[datetime | None, datetime | None]]:
    """(from, to) as the route receives them (``to`` None: now)."""
    plus5 = timezone(timedelta(hours=5))
    return [
        (None, None),
        (None, first - timedelta(days=1)),  # ends before the first price
        (first - timedelta(days=3), None),
        (first + timedelta(days=2, hours=7), None),
        (bucket_start(first + timedelta(days=9), "week"), first + timedelta(days=30)),
        (bucket_start(first + timedelta(days=4), "day"), first + timedelta(days=4, hours=3)),
        (
            (first + timedelta(days=5)).astimezone(plus5),
            (NOW - timedelta(days=3)).astimezone(plus5),
        ),
        (NOW + timedelta(days=1), NOW + timedelta(days=2)),  # after everything
    ]


def test_buckets_grouped_by_the_database_match_the_walk(engine: Engine, settings: Settings) -> None:
    offers = seed_histories(engine, settings)
    compared = nonempty = 0
    with engine.connect() as conn:
        for offer_id in offers:
            first = offer_history(conn, offer_id)[0]["valid_from"]
            for start, end in windows(first):
                rows = offer_history(conn, offer_id, start, end)
                for resolution in ("day", "week"):
                    expected = walk(rows, resolution, start, end or NOW)  # type: ignore[arg-type]
                    got = offer_buckets(conn, offer_id, resolution, start, end or NOW)  # type: ignore[arg-type]
                    assert got == expected, (offer_id, resolution, start, end)
                    compared += 1
                    nonempty += bool(expected)
    assert nonempty > compared // 2  # most windows hold prices: the comparison is not empty


def test_a_price_of_no_length_at_midnight_is_in_no_bucket(
    engine: Engine, settings: Settings
) -> None:
    offer_id = seed_histories(engine, settings)[0]
    with engine.connect() as conn:
        days = offer_buckets(conn, offer_id, "day", None, NOW)
    midnight = BASE + timedelta(days=2)
    assert days[0]["start"] == midnight
    assert days[0]["observations"] == 2  # the one within the day and the one in force
    assert all(d["observations"] == 1 for d in days[1:])
    assert days[-1]["start"] == bucket_start(NOW, "day")
