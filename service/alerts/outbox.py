"""The alert outbox: events written by the ingest transaction that caused them.

:func:`enqueue_for_diff` runs inside ingest's one transaction, right after the catalog
writes: a rolled-back or quarantined ingest therefore leaves no event, and a committed
one leaves every event, for the dispatcher to deliver at least once. The catalog does
not import this module: :func:`service.alerts.listeners.install` registers it as its
listener (see :mod:`service.catalog.diff_listener`) where a process starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, select

from schema.alerts import AlertEvent, Channel, EventStatus
from schema.catalog import Region
from schema.prices import Offer, PriceObservation
from service.alerts.matching import Compiled, OfferChange, describe, load_index
from service.catalog.bulk import bulk_insert
from service.catalog.columns import ATTRIBUTES, OBS_COLUMNS
from service.catalog.diff import Diff
from service.catalog.locations import GLOBAL_REGION, locations_of

EVENT = AlertEvent.__table__  # type: ignore[attr-defined]
OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
CHUNK = 5000
EVENT_COLUMNS = (
    "subscription_id",
    "catalog_version",
    "event_type",
    "offer_id",
    "payload",
    "idempotency_key",
    "status",
    "attempts",
    "next_attempt_at",
    "created_at",
    "delivered_at",
)


def idempotency_key(subscription_id: int, version: int, offer_id: int, event: str) -> str:
    """Stable per (subscription, catalog version, offer, event): a redelivery repeats it."""
    return f"gpa-{subscription_id}-{version}-{offer_id}-{event}"


def wants_changes(conn: Connection) -> bool:
    """Whether an ingest starting now must keep its changes for :func:`enqueue_for_diff`:
    while some subscription is live."""
    return bool(load_index(conn).size)


def enqueue_for_diff(
    conn: Connection,
    version: int,
    diff: Diff,
    now: datetime,
    observations: Callable[[], list[tuple[Any, ...]]],
) -> int:
    """Match the changes of one ingest against live subscriptions; write their events.

    ``diff`` is ingest's diff and ``observations`` gives the rows its writer inserted
    (added offers first, then changed and reopened ones, in diff order); it is called
    only when some subscription is live. Returns the number of events written."""
    index = load_index(conn)
    if not index.size:
        return 0
    changes = summarize(diff, observations())
    if index.wants_withdrawals and diff.withdrawn:
        changes += _withdrawals(conn, [old.id for old in diff.withdrawn])
    attach_locations(conn, changes)
    rows = build_rows(index.match(changes), version, now)
    if rows:
        insert_events(conn, rows)
    return len(rows)


def build_rows(
    matches: Iterable[tuple[Compiled, OfferChange, str]], version: int, now: datetime
) -> list[tuple[Any, ...]]:
    """Outbox rows (``EVENT_COLUMNS`` order) with their JSON payloads as text.

    A change's offer description is serialized once, however many subscriptions it
    concerns; each payload is that text behind the event's own few keys (all plain ASCII:
    ids, the event type, the time), in the order the webhook body has always had."""
    stamp = now.isoformat()
    head = f'","subscription_id":{{}},"catalog_version":{version},"occurred_at":"{stamp}",'
    described: dict[int, str] = {}
    pending, delivered = EventStatus.pending.value, EventStatus.delivered.value
    atom = Channel.atom.value
    rows: list[tuple[Any, ...]] = []
    for sub, change, event in matches:
        body = described.get(id(change))
        if body is None:
            text = json.dumps(describe(change), separators=(",", ":"))
            body = described[id(change)] = text[1:]  # without its opening brace
        key = f"gpa-{sub.id}-{version}-{change.offer_id}-{event}"
        payload = '{"id":"' + key + '","type":"' + event + head.format(sub.id) + body
        feed_only = sub.channel == atom  # published by the commit itself
        status, due, done = (delivered, None, now) if feed_only else (pending, now, None)
        rows.append(
            (sub.id, version, event, change.offer_id, payload, key, status, 0, due, now, done)
        )
    return rows


def insert_events(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
    """Bulk insert built rows: one text-format COPY on PostgreSQL, one executemany on SQLite."""
    if conn.dialect.name != "postgresql":
        bulk_insert(conn, EVENT, EVENT_COLUMNS, rows)
        return
    # Text COPY written by hand: every value is an int, ASCII text without tabs or newlines
    # (JSON escapes control characters), or one shared timestamp, so escaping is only
    # doubling backslashes (JSON's own escapes) and NULL is \N.
    stamps: dict[datetime, str] = {}

    def field(value: Any) -> str:
        if value is None:
            return "\\N"
        if isinstance(value, datetime):
            text = stamps.get(value)
            if text is None:
                text = stamps[value] = value.isoformat()
            return text
        if isinstance(value, str):
            return value.replace("\\", "\\\\")
        return str(value)

    names = ", ".join(EVENT_COLUMNS)
    driver = conn.connection.driver_connection
    assert driver is not None
    with driver.cursor() as cursor, cursor.copy(f"COPY {EVENT.name} ({names}) FROM STDIN") as copy:
        for start in range(0, len(rows), CHUNK):
            lines = ["\t".join(map(field, row)) for row in rows[start : start + CHUNK]]
            copy.write(("\n".join(lines) + "\n").encode())


def summarize(diff: Diff, observations: list[tuple[Any, ...]]) -> list[OfferChange]:
    """Added, changed and reopened offers of a diff, with the prices the writer computed."""
    offer_at, usd_at = OBS_COLUMNS.index("offer_id"), OBS_COLUMNS.index("gpu_hour_usd")
    gpu_at, count_at = ATTRIBUTES.index("gpu_slug"), ATTRIBUTES.index("gpu_count")
    memory_at, country_at = ATTRIBUTES.index("gpu_memory_gb"), ATTRIBUTES.index("country")
    metal_at = ATTRIBUTES.index("bare_metal")
    changes: list[OfferChange] = []

    def change_of(kind: str, offer_id: int, record: Any, attributes: Any, usd: Any) -> OfferChange:
        return OfferChange(
            kind,
            offer_id,
            record.source,
            record.provider,
            record.sku,
            record.region,
            record.price_kind,
            record.unit,
            attributes[gpu_at],
            attributes[country_at],
            attributes[count_at],
            attributes[memory_at],
            attributes[metal_at],
            record.currency,
            record.amount,
            usd,
        )

    for position, (record, attributes, _) in enumerate(diff.added):
        obs = observations[position]
        changes.append(change_of("added", obs[offer_at], record, attributes, obs[usd_at]))
    start = len(diff.added)
    repriced = [("changed", item) for item in diff.changed]
    repriced += [("reopened", item) for item in diff.reopened]
    for position, (kind, (old, record, attributes, _)) in enumerate(repriced, start):
        usd = observations[position][usd_at]
        change = change_of(kind, old.id, record, attributes, usd)
        if kind == "changed":
            change.old_amount, change.old_currency = old.amount, old.currency
            # Same FX rate on both sides: a currency move is not a price change.
            if usd is not None and old.currency == record.currency and record.amount:
                change.old_gpu_hour_usd = usd * old.amount / record.amount
        changes.append(change)
    return changes


def attach_locations(conn: Connection, changes: list[OfferChange]) -> None:
    """Fill the locations of the changes whose offer is quoted for several places (region
    ``global`` or a group code), so location filters match them as listings do."""
    groups = select(REGION.c.code).where(REGION.c.members.is_not(None))
    placeable = {GLOBAL_REGION, *conn.execute(groups).scalars()}
    wanted = [c for c in changes if c.region in placeable]
    if not wanted:
        return
    found = locations_of(conn, [c.offer_id for c in wanted])
    for change in wanted:
        located = found.get(change.offer_id, ())
        change.locations = tuple((loc["region"], loc["country"]) for loc in located)


def offer_changes_select() -> Select[Any]:
    """Offers with their current price, as the columns of :meth:`OfferChange.of_row`."""
    return select(
        OFFER.c.id,
        OFFER.c.source,
        OFFER.c.provider,
        OFFER.c.sku,
        OFFER.c.region,
        OFFER.c.price_kind,
        OFFER.c.unit,
        OFFER.c.gpu_slug,
        OFFER.c.country,
        OFFER.c.gpu_count,
        OFFER.c.gpu_memory_gb,
        OFFER.c.bare_metal,
        OBS.c.currency,
        OBS.c.amount,
        OBS.c.gpu_hour_usd,
    ).join(OBS, OBS.c.id == OFFER.c.observation_id)


def _withdrawals(conn: Connection, offer_ids: list[int]) -> list[OfferChange]:
    """Withdrawn offers as they were (read back within the ingest transaction)."""
    changes = []
    for begin in range(0, len(offer_ids), CHUNK):
        stmt = offer_changes_select().where(OFFER.c.id.in_(offer_ids[begin : begin + CHUNK]))
        for row in conn.execute(stmt):
            changes.append(OfferChange.of_row("withdrawn", row))
    return changes
