"""One offer's price history: its observations, and min / max / last per day or week."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any, Literal

from sqlalchemy import (
    Connection,
    Date,
    DateTime,
    Integer,
    Select,
    String,
    bindparam,
    case,
    cast,
    func,
    or_,
    select,
)
from sqlalchemy.sql.elements import ColumnElement

from service.query.sql import (
    MICROS_PER_SECOND,
    OBS,
    OBS_AMOUNT_USD,
    OBS_CRAWL_RUN,
    OBS_FX_RATE,
    OBS_HOURLY_AMOUNT,
    OBS_VALID_FROM,
    OBS_VALID_TO,
    OFFER,
    RUN_PAYLOAD,
    NotFound,
    unix_seconds,
    with_versions,
)

HISTORY_COLUMNS = (
    OBS.c.id,
    OBS.c.amount,
    OBS.c.currency,
    OBS_HOURLY_AMOUNT.label("hourly_amount"),
    OBS_AMOUNT_USD.label("amount_usd"),
    OBS.c.gpu_hour_usd,
    OBS_FX_RATE.label("fx_rate"),
    OBS.c.fx_date,
    OBS_VALID_FROM.label("valid_from"),
    OBS_VALID_TO.label("valid_to"),
    OBS.c.version_from,
    OBS.c.version_to,
    OBS_CRAWL_RUN.label("crawl_run_id"),
    RUN_PAYLOAD.c.sha256.label("raw_sha256"),
    RUN_PAYLOAD.c.url.label("raw_url"),
)


def offer_history(
    conn: Connection, offer_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[dict[str, Any]]:
    """Every observation of an offer overlapping [start, end], oldest first. Raises
    :class:`NotFound` for an offer that does not exist."""
    params: dict[str, Any] = {"offer_id": offer_id}
    if start is not None:
        params["start"] = start
    if end is not None:
        params["end"] = end
    result = conn.execute(_history_statement(start is not None, end is not None), params)
    keys = tuple(result.keys())  # zip, not dict(RowMapping): a busy offer has 10^4 rows
    rows = [dict(zip(keys, row, strict=True)) for row in result]
    if not rows:
        _must_exist(conn, offer_id)
    return rows


@cache
def _history_statement(from_start: bool, to_end: bool) -> Select[Any]:
    """The statement of :func:`offer_history`, built once per kind of window (as
    :func:`_groups_statement`): building it and its cache key took as long as a typical
    offer's read (0.16 of 0.36 ms on SQLite, 0.37 of 1.0 ms on PostgreSQL), with
    parameters ``offer_id`` and, when bounded, ``start`` and ``end``."""
    where = [OBS.c.offer_id == bindparam("offer_id")]
    if from_start:
        after = bindparam("start", type_=OBS.c.valid_to.type)
        where.append(or_(OBS.c.version_to.is_(None), after < OBS_VALID_TO))
    if to_end:
        where.append(bindparam("end", type_=OBS.c.valid_from.type) >= OBS_VALID_FROM)
    return (
        select(*HISTORY_COLUMNS)
        .select_from(
            with_versions(OBS.outerjoin(RUN_PAYLOAD, RUN_PAYLOAD.c.id == OBS.c.payload_id))
        )
        .where(*where)
        .order_by(OBS_VALID_FROM, OBS.c.id)
    )


def _must_exist(conn: Connection, offer_id: int) -> None:
    """Raise :class:`NotFound` unless the offer exists. Asked only when a read found none
    of its observations (an observation's offer exists: a foreign key), so a history
    costs one statement, not two: a round trip less on PostgreSQL."""
    exists_stmt = select(OFFER.c.id).where(OFFER.c.id == offer_id)
    if conn.execute(exists_stmt).first() is None:
        raise NotFound(f"offer {offer_id} does not exist")


Resolution = Literal["day", "week"]
MAX_BUCKETS = 5000


class TooManyBuckets(ValueError):
    """The range asked holds more than :data:`MAX_BUCKETS` buckets with a price."""


def bucket_start(when: datetime, resolution: Resolution) -> datetime:
    day = when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if resolution == "week":
        return day - timedelta(days=day.weekday())  # ISO weeks start on Monday
    return day


# --- buckets: min / max / last price per UTC day or ISO week ------------------------------


@dataclass
class _Group:
    """Observations of one bucket with one price (or the bucket's last observation)."""

    amount: Decimal
    currency: str
    usd: Decimal | None
    count: int
    last: bool  # the bucket's last observation (by valid_from, id) is in this group
    last_to: datetime | None  # that observation's valid_to


def offer_buckets(
    conn: Connection,
    offer_id: int,
    resolution: Resolution,
    start: datetime | None,
    end: datetime,
) -> list[dict[str, Any]]:
    """min / max / last price (quoted and USD per GPU-hour) per UTC day or ISO week of the
    observations overlapping [start, end], oldest bucket first.

    A bucket covers [bucket_start, next bucket_start); an observation counts in every bucket
    its [valid_from, valid_to) overlaps. ``last`` is the price in force at the bucket's end
    (or at ``end`` for the bucket containing it). Buckets where no price was in force are
    omitted; more than ``MAX_BUCKETS`` raise :class:`TooManyBuckets` (never cut short).

    The database groups the observations: one statement returns, per bucket they start
    in, one row per distinct price (amount, currency, USD per GPU-hour) with its count,
    and the bucket's last observation (by ``valid_from``, ``id``) flagged with its
    ``valid_to``: a few rows per bucket instead of every observation (a price that moves
    every hour has 24 a day). Decimals are compared here, exactly (SQLite keeps them as
    text). An offer's observations cover disjoint times, so the only one in force in a
    bucket that started before it is the last one of an earlier bucket, carried while its
    ``valid_to`` is after the bucket's start. (``tests/query/test_history_buckets.py``
    holds it to the walk over every observation that it replaced.)
    """
    groups = _bucket_groups(conn, offer_id, resolution, start, end)
    if not groups:
        _must_exist(conn, offer_id)
        return []
    step = timedelta(days=7 if resolution == "week" else 1)
    cursor = min(groups)
    if start is not None and bucket_start(start, resolution) > cursor:
        cursor = bucket_start(start, resolution)
        _fold_into_first(groups, cursor)
    keys = sorted(groups)
    out: list[dict[str, Any]] = []
    carry: _Group | None = None  # the last observation of an earlier bucket
    index = 0
    while cursor <= end:
        if carry is not None and carry.last_to is not None and carry.last_to <= cursor:
            carry = None
        while index < len(keys) and keys[index] < cursor:
            index += 1
        here = groups.get(cursor, [])
        if carry is None and not here:  # nothing in force: on to the next bucket with starts
            if index == len(keys):
                break
            cursor = keys[index]
            continue
        if len(out) == MAX_BUCKETS:
            raise TooManyBuckets(f"more than {MAX_BUCKETS} {resolution} buckets hold a price")
        if not here and carry is not None:
            out.append(_held(cursor, step, carry))
        else:
            out.append(_bucket(cursor, cursor + step, ([carry] if carry else []) + here))
        last = next((g for g in reversed(here) if g.last), None)
        if last is not None:
            carry = _Group(last.amount, last.currency, last.usd, 1, True, last.last_to)
        cursor += step
    return out


def _fold_into_first(groups: dict[datetime, list[_Group]], first: datetime) -> None:
    """Observations started before the first bucket overlap ``start`` (the statement's
    condition), so they count in the first bucket; the last of them is the latest earlier
    bucket's last."""
    earlier = sorted(b for b in groups if b < first)
    folded = []
    for b in earlier:
        for group in groups.pop(b):
            group.last = group.last and b == earlier[-1]
            folded.append(group)
    groups[first] = folded + groups.get(first, [])


def _held(start: datetime, step: timedelta, carry: _Group) -> dict[str, Any]:
    """A bucket where one price held throughout (most buckets of most offers)."""
    return {
        "start": start,
        "end": start + step,
        "currency": carry.currency,
        "min": carry.amount,
        "max": carry.amount,
        "last": carry.amount,
        "min_price_per_gpu_hour_usd": carry.usd,
        "max_price_per_gpu_hour_usd": carry.usd,
        "last_price_per_gpu_hour_usd": carry.usd,
        "observations": 1,
    }


def _bucket(start: datetime, stop: datetime, inside: list[_Group]) -> dict[str, Any]:
    amounts = [g.amount for g in inside]
    usd = [g.usd for g in inside if g.usd is not None]
    last = [g for g in inside if g.last][-1]
    return {
        "start": start,
        "end": stop,
        "currency": last.currency,
        "min": min(amounts),
        "max": max(amounts),
        "last": last.amount,
        "min_price_per_gpu_hour_usd": min(usd) if usd else None,
        "max_price_per_gpu_hour_usd": max(usd) if usd else None,
        "last_price_per_gpu_hour_usd": last.usd,
        "observations": sum(g.count for g in inside),
    }


def _bucket_groups(
    conn: Connection,
    offer_id: int,
    resolution: Resolution,
    start: datetime | None,
    end: datetime,
) -> dict[datetime, list[_Group]]:
    """Per bucket (by ``valid_from``): its observations grouped by price, the last flagged.

    An observation of no length at a bucket's very start (``valid_to`` = ``valid_from`` =
    midnight) overlaps no bucket: it is left out."""
    stmt = _groups_statement(conn.dialect.name, resolution, start is not None)
    params = {"offer_id": offer_id, "start": start, "end": end}
    groups: dict[datetime, list[_Group]] = {}
    latest: dict[datetime, tuple[datetime, int, _Group]] = {}
    for b, amount, currency, usd, count, last_from, last_id, last_to in conn.execute(stmt, params):
        day = b if isinstance(b, date) else date.fromisoformat(b)
        when = datetime(day.year, day.month, day.day, tzinfo=UTC)
        group = _Group(amount, currency, usd, int(count), False, last_to)
        groups.setdefault(when, []).append(group)
        if when not in latest or (last_from, last_id) > latest[when][:2]:
            latest[when] = (last_from, last_id, group)
    for _, _, group in latest.values():  # the bucket's last observation, by valid_from, id
        group.last = True
    return groups


@cache
def _groups_statement(dialect: str, resolution: Resolution, from_start: bool) -> Select[Any]:
    """The statement of :func:`_bucket_groups`, built once (a typical offer's whole read
    costs less than building it), with parameters ``offer_id``, ``start`` and ``end``.

    Per (bucket, price): the count, the latest ``valid_from`` and ``id`` (which group holds
    the bucket's last observation), and the latest ``valid_to``, null if one is open (an
    offer's observations are disjoint, so the last one ends last: that is its
    ``valid_to``). A plain GROUP BY: a window ranking the rows cost SQLite more than the
    rows' reads."""
    bucket = _bucket_of(dialect, resolution)
    where = [
        OBS.c.offer_id == bindparam("offer_id"),
        bindparam("end", type_=OBS.c.valid_from.type) >= OBS_VALID_FROM,
        or_(OBS.c.version_to.is_(None), _start_of(dialect, bucket) < OBS_VALID_TO),
    ]
    if from_start:  # as offer_history: overlapping [start, end]
        after = bindparam("start", type_=OBS.c.valid_to.type)
        where.append(or_(OBS.c.version_to.is_(None), after < OBS_VALID_TO))
    b = bucket.label("b")
    ends = case((func.count(OBS.c.version_to) == func.count(), func.max(OBS_VALID_TO)))
    return (
        select(
            b,
            OBS.c.amount,
            OBS.c.currency,
            OBS.c.gpu_hour_usd,
            func.count(),
            func.max(OBS_VALID_FROM),
            func.max(OBS.c.id),
            ends,
        )
        .select_from(with_versions(OBS))
        .where(*where)
        .group_by(b, OBS.c.amount, OBS.c.currency, OBS.c.gpu_hour_usd)
    )


def _bucket_of(dialect: str, resolution: Resolution) -> ColumnElement[Any]:
    """The UTC day (or the Monday of the ISO week) of ``valid_from``, as a date (PostgreSQL)
    or ISO text (SQLite, from its integer microseconds: ``schema.types.UTCMicros``)."""
    if dialect == "postgresql":
        utc = func.timezone("UTC", OBS_VALID_FROM)
        return cast(func.date_trunc(resolution, utc), Date)
    # whole seconds first (integer division: a time's own second, never rounded up to the
    # next day as SQLite's date functions round microseconds to milliseconds)
    day = func.date(unix_seconds(OBS_VALID_FROM), "unixepoch")
    if resolution == "week":  # back six days, then on to the next Monday (or this one)
        return cast(func.date(day, "-6 days", "weekday 1"), String)
    return cast(day, String)


def _start_of(dialect: str, bucket: ColumnElement[Any]) -> ColumnElement[Any]:
    """The bucket's first instant, comparable with ``valid_to`` (SQLite: microseconds)."""
    if dialect == "postgresql":
        return func.timezone("UTC", cast(bucket, DateTime))
    return cast(func.strftime("%s", bucket), Integer) * MICROS_PER_SECOND
