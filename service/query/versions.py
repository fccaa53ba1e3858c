"""Catalog versions: the current one, the one at a time, the list, diffs and the change feed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, union

from service.query.sql import OBS, OFFER, VERSION, visible_at


def current_version(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(VERSION.c.id), 0))).scalar() or 0)


def version_at(conn: Connection, when: datetime) -> int:
    """The catalog version current at ``when`` (0 when the catalog was still empty)."""
    stmt = select(func.coalesce(func.max(VERSION.c.id), 0)).where(VERSION.c.created_at <= when)
    return int(conn.execute(stmt).scalar() or 0)


def list_versions(
    conn: Connection, limit: int = 50, before: int | None = None
) -> list[dict[str, Any]]:
    stmt = select(VERSION).order_by(VERSION.c.id.desc()).limit(limit)
    if before is not None:
        stmt = stmt.where(VERSION.c.id < before)
    return [dict(row) for row in conn.execute(stmt).mappings()]


# --- diffs and the change feed --------------------------------------------------------------

CHANGE_OBS_COLUMNS = (
    OBS.c.offer_id,
    OBS.c.amount,
    OBS.c.currency,
    OBS.c.gpu_hour_usd,
    OBS.c.version_from,
    OBS.c.version_to,
)
CHANGE_OFFER_COLUMNS = (
    OFFER.c.id,
    OFFER.c.source,
    OFFER.c.provider,
    OFFER.c.sku,
    OFFER.c.region,
    OFFER.c.price_kind,
    OFFER.c.unit,
    OFFER.c.gpu_slug,
    OFFER.c.gpu_count,
)


def _offers_by_id(conn: Connection, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    stmt = select(*CHANGE_OFFER_COLUMNS).where(OFFER.c.id.in_(ids))
    return {r["id"]: dict(r) for r in conn.execute(stmt).mappings()}


def _price(obs: dict[str, Any] | None) -> dict[str, Any] | None:
    if obs is None:
        return None
    return {
        "amount": obs["amount"],
        "currency": obs["currency"],
        "price_per_gpu_hour_usd": obs["gpu_hour_usd"],
    }


def diff_versions(
    conn: Connection, old: int, new: int, *, after_offer: int = 0, limit: int = 1000
) -> tuple[list[dict[str, Any]], int | None]:
    """Offers added, changed (old and new price) or withdrawn between two versions.

    Returns the changes of up to ``limit`` candidate offers (id order) and the last
    candidate id when more may follow (the keyset for the next page).
    """
    low, high = min(old, new), max(old, new)
    touched = union(
        select(OBS.c.offer_id.label("offer_id")).where(
            OBS.c.version_from > low, OBS.c.version_from <= high
        ),
        select(OBS.c.offer_id.label("offer_id")).where(
            OBS.c.version_to > low, OBS.c.version_to <= high
        ),
    ).subquery()
    ids = [
        int(r[0])
        for r in conn.execute(
            select(touched.c.offer_id)
            .where(touched.c.offer_id > after_offer)
            .order_by(touched.c.offer_id)
            .limit(limit + 1)
        )
    ]
    more = len(ids) > limit
    ids = ids[:limit]
    if not ids:
        return [], None

    def visible(version: int) -> dict[int, dict[str, Any]]:
        stmt = select(*CHANGE_OBS_COLUMNS).where(OBS.c.offer_id.in_(ids), visible_at(OBS, version))
        return {r["offer_id"]: dict(r) for r in conn.execute(stmt).mappings()}

    before, after_ = visible(old), visible(new)
    offers = _offers_by_id(conn, ids)
    changes = []
    for offer_id in ids:
        a, b = before.get(offer_id), after_.get(offer_id)
        if a is None and b is None:
            continue
        if a is None:
            kind = "added"
        elif b is None:
            kind = "withdrawn"
        elif (a["amount"], a["currency"]) != (b["amount"], b["currency"]):
            kind = "changed"
        else:
            continue
        changes.append(
            {"kind": kind, "offer": offers[offer_id], "old": _price(a), "new": _price(b)}
        )
    return changes, (ids[-1] if more else None)


def change_feed(
    conn: Connection,
    since: int,
    until: int,
    *,
    after: tuple[int, int] = (0, 0),
    limit: int = 1000,
) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
    """Every change in versions (since, until], ordered by (version, offer id).

    ``after`` is the (version, offer id) the previous page ended with.
    """
    starts = select(OBS.c.version_from.label("version"), OBS.c.offer_id.label("offer_id")).where(
        OBS.c.version_from > since, OBS.c.version_from <= until
    )
    ends = select(OBS.c.version_to.label("version"), OBS.c.offer_id.label("offer_id")).where(
        OBS.c.version_to > since, OBS.c.version_to <= until
    )
    events = union(starts, ends).subquery()
    version_after, offer_after = after
    stmt = (
        select(events.c.version, events.c.offer_id)
        .where(
            or_(
                events.c.version > version_after,
                and_(events.c.version == version_after, events.c.offer_id > offer_after),
            )
        )
        .order_by(events.c.version, events.c.offer_id)
        .limit(limit + 1)
    )
    keys = [(int(v), int(o)) for v, o in conn.execute(stmt)]
    more = len(keys) > limit
    keys = keys[:limit]
    if not keys:
        return [], None
    ids = sorted({o for _, o in keys})
    low, high = keys[0][0], keys[-1][0]
    opened: dict[tuple[int, int], dict[str, Any]] = {}
    closed: dict[tuple[int, int], dict[str, Any]] = {}
    touching = select(*CHANGE_OBS_COLUMNS).where(
        OBS.c.offer_id.in_(ids),
        or_(
            and_(OBS.c.version_from >= low, OBS.c.version_from <= high),
            and_(OBS.c.version_to >= low, OBS.c.version_to <= high),
        ),
    )
    for r in conn.execute(touching).mappings():
        opened[(r["version_from"], r["offer_id"])] = dict(r)
        if r["version_to"] is not None:
            closed[(r["version_to"], r["offer_id"])] = dict(r)
    offers = _offers_by_id(conn, ids)
    created: dict[int, datetime] = dict(
        conn.execute(
            select(VERSION.c.id, VERSION.c.created_at).where(VERSION.c.id.between(low, high))
        ).all()
    )
    changes = []
    for key in keys:
        new, old = opened.get(key), closed.get(key)
        if new is not None and old is not None:
            kind = "changed"
        elif new is not None:
            kind = "added"
        else:
            kind = "withdrawn"
        changes.append(
            {
                "version": key[0],
                "at": created.get(key[0]),
                "kind": kind,
                "offer": offers[key[1]],
                "old": _price(old),
                "new": _price(new),
            }
        )
    return changes, (keys[-1] if more else None)
