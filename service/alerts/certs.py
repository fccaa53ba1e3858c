"""Certification alerts: a provider gains or loses a certification.

A provider **holds** a scheme for a subscription on day D when the current version of its
certification row has status ``certified``, its validity dates (``valid_from``/``valid_to``)
include D, and its region scope covers the subscription's ``region`` filter (a row scoped
to the whole provider covers every region).

Two things change what a provider holds, and each raises ``cert_gained``/``cert_lost``:

* **a reference load** (:func:`enqueue_certification_changes`): called by
  :func:`service.compliance.load.load_compliance` inside the load's transaction, with the
  current rows as they were before the load (it is the load's certification listener,
  :mod:`service.compliance.listener`, registered by
  :func:`service.alerts.listeners.install`). Holding is compared on the load's day,
  before and after. The events are therefore committed with the new certification
  versions or not at all (the outbox invariant).
* **the calendar** (:func:`enqueue_certification_validity`): a certificate whose
  ``valid_to`` passed, or whose ``valid_from`` arrived, after its row was recorded. The
  dispatcher runs this sweep; the event is raised once (its idempotency key names the row
  and the day), for subscriptions that existed on that day, within ``LOOKBACK_DAYS``.

Which subscriptions: the condition's scheme (or any, for ``true``), the ``provider`` filter
(if any) naming the provider; and when the subscription has other filters (gpu, region,
country, price kind, ...), at least one current offer of that provider must match them all.
One event per (subscription, certification row, gained/lost).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import IntegrityError

from schema.alerts import CERT_CONDITIONS, AlertEvent, Channel, EventStatus, EventType
from schema.compliance import Certification
from schema.enums import OfferStatus
from schema.prices import CatalogVersion, Offer
from service.alerts.matching import SUBSCRIPTION, Compiled, OfferChange, load_compiled
from service.alerts.outbox import attach_locations, offer_changes_select
from service.compliance.held import HELD, CertKey, CertRow, current_certifications
from service.core.db import writer

CERT = Certification.__table__  # type: ignore[attr-defined]
EVENT = AlertEvent.__table__  # type: ignore[attr-defined]
OFFER = Offer.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
LOOKBACK_DAYS = 7
"""The validity sweep looks this many days back (a dispatcher stopped longer misses them)."""


@dataclass(frozen=True, slots=True)
class Transition:
    sub: Compiled
    event: EventType
    provider: str
    row: CertRow
    """the version the key names: the new one, or the old one when the row was removed"""
    new: CertRow | None
    old: CertRow | None
    reason: str
    """reference_load, valid_from or valid_to"""
    day: date | None = None
    """for calendar transitions: the first day of the new state"""

    @property
    def key(self) -> str:
        suffix = f"-{self.day:%Y%m%d}" if self.day else ""
        return f"gpa-{self.sub.id}-cert{self.row.id}-{self.event.value}{suffix}"


def _cert_subscriptions(conn: Connection) -> list[Compiled]:
    return load_compiled(conn, conditions=CERT_CONDITIONS)


def _watches(sub: Compiled, key: CertKey) -> bool:
    provider, scheme = key
    return (sub.provider is None or sub.provider == provider) and (
        sub.scheme is None or sub.scheme == scheme
    )


def enqueue_certification_changes(
    conn: Connection, before: dict[CertKey, CertRow], now: datetime
) -> int:
    """Raise the events of one reference load; ``before`` is what was current before it.

    Runs in the load's transaction, after the new versions are written."""
    after = current_certifications(conn)
    changed = [
        key
        for key in sorted(before.keys() | after.keys())
        if (before[key].id if key in before else None) != (after[key].id if key in after else None)
    ]
    if not changed:
        return 0
    subs = _cert_subscriptions(conn)
    if not subs:
        return 0
    day = now.date()
    found = []
    for key in changed:
        old, new = before.get(key), after.get(key)
        row = new or old
        assert row is not None
        for sub in subs:
            if not _watches(sub, key):
                continue
            was = old is not None and old.held(day, sub.region)
            now_held = new is not None and new.held(day, sub.region)
            event = _event(sub, was, now_held)
            if event is not None:
                found.append(Transition(sub, event, key[0], row, new, old, reason="reference_load"))
    return _write(conn, _with_matching_offers(conn, found), now)


def _event(sub: Compiled, was: bool, now_held: bool) -> EventType | None:
    if sub.condition == "cert_gained" and now_held and not was:
        return EventType.cert_gained
    if sub.condition == "cert_lost" and was and not now_held:
        return EventType.cert_lost
    return None


def _start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def enqueue_certification_validity(engine: Engine, now: datetime) -> int:
    """Raise the events of certificates that expired or took effect since they were recorded.

    Idempotent: each event's key names the row and the day, and existing keys are skipped,
    so running it every few seconds (as the dispatcher does) raises each event once."""
    today = now.date()
    first = today - timedelta(days=LOOKBACK_DAYS)
    with engine.connect() as conn:  # a plain read: most runs stop here
        rows = current_certifications(conn, CERT.c.status == HELD)
    candidates: list[tuple[CertRow, date, bool]] = []  # (row, first day, gained)
    for row in rows.values():
        if row.valid_to is not None:
            ends = row.valid_to + timedelta(days=1)
            if first < ends <= today and row.recorded_at < _start(ends):
                candidates.append((row, ends, False))
        if row.valid_from is not None:
            starts = row.valid_from
            if first < starts <= today and row.recorded_at < _start(starts):
                candidates.append((row, starts, True))
    if not candidates:
        return 0
    with writer(engine).begin() as conn:
        still = {row.id for row in current_certifications(conn, CERT.c.status == HELD).values()}
        candidates = [c for c in candidates if c[0].id in still]  # a load may have come between
        subs = _cert_subscriptions(conn)
        created: dict[int, datetime] = dict(
            conn.execute(
                select(SUBSCRIPTION.c.id, SUBSCRIPTION.c.created_at).where(
                    SUBSCRIPTION.c.id.in_([s.id for s in subs])
                )
            ).all()
        )
        found = []
        for row, day, gained in candidates:
            for sub in subs:
                if not _watches(sub, (row.provider, row.scheme)) or created[sub.id] >= _start(day):
                    continue
                if not row.held(day if gained else day - timedelta(days=1), sub.region):
                    continue
                event = EventType.cert_gained if gained else EventType.cert_lost
                if sub.condition != event.value:
                    continue
                reason = "valid_from" if gained else "valid_to"
                found.append(
                    Transition(sub, event, row.provider, row, row, row, reason=reason, day=day)
                )
        if not found:
            return 0
        existing = set(
            conn.execute(
                select(EVENT.c.idempotency_key).where(
                    EVENT.c.idempotency_key.in_([t.key for t in found])
                )
            ).scalars()
        )
        fresh = [t for t in found if t.key not in existing]
        try:
            with conn.begin_nested():
                return _write(conn, _with_matching_offers(conn, fresh), now)
        except IntegrityError:
            return 0  # another dispatcher raised them first


def _with_matching_offers(conn: Connection, found: list[Transition]) -> list[Transition]:
    """Keep transitions whose subscription has no offer filter, or matches a current offer
    of the provider."""
    offers: dict[str, list[OfferChange]] = {}
    kept = []
    for transition in found:
        if not transition.sub.offer_filtered:
            kept.append(transition)
            continue
        provider = transition.provider
        if provider not in offers:
            offers[provider] = _current_offers(conn, provider)
        if any(transition.sub.selects(offer) for offer in offers[provider]):
            kept.append(transition)
    return kept


def _current_offers(conn: Connection, provider: str) -> list[OfferChange]:
    stmt = offer_changes_select().where(
        OFFER.c.provider == provider, OFFER.c.status == OfferStatus.active.value
    )
    offers = [OfferChange.of_row("current", row) for row in conn.execute(stmt)]
    attach_locations(conn, offers)
    return offers


def _write(conn: Connection, found: list[Transition], now: datetime) -> int:
    if not found:
        return 0
    version = int(conn.execute(select(func.max(VERSION.c.id))).scalar() or 0)
    stamp = now.isoformat()
    rows = []
    for t in found:
        payload = {
            "id": t.key,
            "type": t.event.value,
            "subscription_id": t.sub.id,
            "catalog_version": version,
            "occurred_at": stamp,
            "change": "certification",
            "reason": t.reason,
            "provider": t.provider,
            "certification": t.new.public() if t.new is not None else None,
            "previous": t.old.public() if t.old is not None and t.old is not t.new else None,
        }
        feed_only = t.sub.channel == Channel.atom.value
        rows.append(
            {
                "subscription_id": t.sub.id,
                "catalog_version": version,
                "event_type": t.event.value,
                "offer_id": None,
                "payload": payload,
                "idempotency_key": t.key,
                "status": (EventStatus.delivered if feed_only else EventStatus.pending).value,
                "attempts": 0,
                "next_attempt_at": None if feed_only else now,
                "created_at": now,
                "delivered_at": now if feed_only else None,
            }
        )
    conn.execute(EVENT.insert(), rows)
    return len(rows)
