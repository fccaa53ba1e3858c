"""What the Atom feeds say: recent catalog changes (with listing filters) and the events
of one subscription, as :class:`~service.alerts.atom.Entry` lists."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Float, Select, cast, or_, select
from sqlalchemy.orm import aliased

from schema.alerts import CERT_CONDITIONS, SubscriptionFilters
from schema.catalog import GpuModel
from schema.enums import OfferStatus
from schema.prices import CatalogVersion, Offer, PriceObservation
from service.alerts.atom import TAG_AUTHORITY, Entry
from service.query.sql import OBS_VALID_FROM, with_versions

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
EVENT_TITLES = {
    "price_drop": "Price drop",
    "price_rise": "Price rise",
    "below": "Below threshold",
    "above": "Above threshold",
    "new_offer": "New offer",
    "withdrawn": "Withdrawn",
    "cert_gained": "Certification gained",
    "cert_lost": "Certification lost",
}
CERT_REASONS = {
    "reference_load": "reference data load",
    "valid_from": "certificate took effect",
    "valid_to": "certificate expired",
}


def _number(column: Any, dialect: str) -> Any:
    return cast(column, Float) if dialect == "sqlite" else column


def _filtered(stmt: Select[Any], filters: SubscriptionFilters, dialect: str) -> Select[Any]:
    if filters.gpu:
        family = select(GPU.c.slug).where(GPU.c.family == filters.gpu)
        stmt = stmt.where(or_(OFFER.c.gpu_slug == filters.gpu, OFFER.c.gpu_slug.in_(family)))
    for name in ("provider", "source", "region", "country", "bare_metal"):
        value = getattr(filters, name)
        if value is not None:
            stmt = stmt.where(OFFER.c[name] == value)
    if filters.price_kind is not None:
        stmt = stmt.where(OFFER.c.price_kind == filters.price_kind.value)
    if filters.not_country:
        stmt = stmt.where(or_(OFFER.c.country.is_(None), OFFER.c.country != filters.not_country))
    bounds = (
        (OFFER.c.gpu_count, filters.min_gpus, True),
        (OFFER.c.gpu_count, filters.max_gpus, False),
        (OFFER.c.gpu_memory_gb, filters.min_gpu_memory_gb, True),
        (OBS.c.gpu_hour_usd, filters.max_price_per_gpu_hour, False),
    )
    for column, bound, lower in bounds:
        if bound is not None:
            value = _number(column, dialect)
            number = float(bound) if dialect == "sqlite" else bound
            stmt = stmt.where(value >= number if lower else value <= number)
    return stmt


def _fmt(value: Decimal | None) -> str:
    return "?" if value is None else format(Decimal(value).normalize(), "f")


def _label(row: Any) -> str:
    gpu = row.gpu_slug or row.gpu_name_raw or "unknown GPU"
    return (
        f"{_fmt(row.gpu_count)}× {gpu} on {row.provider} {row.sku} ({row.region}, {row.price_kind})"
    )


def recent_changes(
    conn: Connection, filters: SubscriptionFilters, base_url: str, limit: int = 100
) -> tuple[list[Entry], datetime | None]:
    """New prices (new offers and changes) and withdrawals, newest first."""
    dialect = conn.dialect.name
    old = aliased(OBS)
    columns = (
        OFFER.c.id,
        OFFER.c.provider,
        OFFER.c.sku,
        OFFER.c.region,
        OFFER.c.price_kind,
        OFFER.c.gpu_slug,
        OFFER.c.gpu_name_raw,
        OFFER.c.gpu_count,
        OFFER.c.country,
    )
    priced = _filtered(
        select(
            *columns,
            OBS.c.id.label("obs_id"),
            OBS.c.amount,
            OBS.c.currency,
            OBS.c.gpu_hour_usd,
            OBS_VALID_FROM.label("at"),
            OBS.c.version_from.label("version"),
            old.c.amount.label("old_amount"),
        )
        .select_from(with_versions(OFFER.join(OBS, OBS.c.offer_id == OFFER.c.id)))
        .outerjoin(
            old, (old.c.offer_id == OBS.c.offer_id) & (old.c.version_to == OBS.c.version_from)
        )
        .order_by(OBS.c.version_from.desc(), OBS.c.id.desc())
        .limit(limit),
        filters,
        dialect,
    )
    gone = _filtered(
        select(
            *columns,
            OBS.c.amount,
            OBS.c.currency,
            OBS.c.gpu_hour_usd,
            OFFER.c.withdrawn_at.label("at"),
            OFFER.c.withdrawn_version.label("version"),
        )
        .select_from(OFFER.join(OBS, OBS.c.id == OFFER.c.observation_id))
        .where(OFFER.c.status == OfferStatus.withdrawn.value)
        .order_by(OFFER.c.withdrawn_version.desc(), OFFER.c.id.desc())
        .limit(limit),
        filters,
        dialect,
    )
    items: list[tuple[int, int, Entry]] = []
    for row in conn.execute(priced):
        if row.old_amount is None:
            title, term = f"New price: {_label(row)}", "price"
        else:
            title, term = (
                f"Price {_fmt(row.old_amount)} → {_fmt(row.amount)}: {_label(row)}",
                "price",
            )
        content = (
            f"{_label(row)}: {_fmt(row.amount)} {row.currency}"
            f" ({_fmt(row.gpu_hour_usd)} USD per GPU-hour)"
            + (f", was {_fmt(row.old_amount)} {row.currency}" if row.old_amount is not None else "")
            + f". Catalog version {row.version}."
        )
        entry = Entry(
            id=f"{TAG_AUTHORITY}observation:{row.obs_id}",
            title=title,
            updated=row.at,
            link=f"{base_url}/v1/offers/{row.id}",
            content=content,
            category=term,
        )
        items.append((row.version, row.obs_id, entry))
    for row in conn.execute(gone):
        entry = Entry(
            id=f"{TAG_AUTHORITY}withdrawal:{row.id}:{row.version}",
            title=f"Withdrawn: {_label(row)}",
            updated=row.at,
            link=f"{base_url}/v1/offers/{row.id}",
            content=(
                f"{_label(row)} is no longer offered (last price {_fmt(row.amount)} "
                f"{row.currency}). Catalog version {row.version}."
            ),
            category="withdrawn",
        )
        items.append((row.version, -row.id, entry))
    items.sort(key=lambda item: (item[0], item[1]), reverse=True)
    entries = [entry for _, _, entry in items[:limit]]
    latest = max((e.updated for e in entries), default=None)
    return entries, latest


def _cert_entry(event: dict[str, Any], base_url: str) -> Entry:
    payload = event["payload"] or {}
    cert = payload.get("certification") or payload.get("previous") or {}
    provider = payload.get("provider") or cert.get("provider") or "?"
    scheme = cert.get("scheme", "?")
    head = EVENT_TITLES.get(event["event_type"], event["event_type"])
    regions = cert.get("regions")
    scope = f"regions {', '.join(regions)}" if regions else "all regions"
    validity = f"{cert.get('valid_from') or '…'} to {cert.get('valid_to') or '…'}"
    content = (
        f"{provider} {scheme}: status {cert.get('status', '?')}, {scope}, valid {validity}"
        + (f", evidence {cert['evidence_url']}" if cert.get("evidence_url") else "")
        + f". Cause: {CERT_REASONS.get(payload.get('reason', ''), payload.get('reason', '?'))}."
    )
    return Entry(
        id=f"{TAG_AUTHORITY}event:{event['idempotency_key']}",
        title=f"{head}: {provider} {scheme}",
        updated=event["created_at"],
        link=f"{base_url}/v1/providers/{provider}",
        content=content,
        category=event["event_type"],
    )


def event_entries(events: list[dict[str, Any]], base_url: str) -> list[Entry]:
    entries = []
    for event in events:
        if event["event_type"] in CERT_CONDITIONS:
            entries.append(_cert_entry(event, base_url))
            continue
        payload = event["payload"] or {}
        offer = payload.get("offer") or {}
        price = payload.get("price") or {}
        old = payload.get("old_price") or {}
        label = (
            f"{offer.get('gpu_count', '?')}× {offer.get('gpu') or 'unknown GPU'} on "
            f"{offer.get('provider', '?')} {offer.get('sku', '?')} "
            f"({offer.get('region', '?')}, {offer.get('price_kind', '?')})"
        )
        pct = payload.get("change_pct")
        head = EVENT_TITLES.get(event["event_type"], event["event_type"])
        title = f"{head}{f' {pct} %' if pct else ''}: {label}"
        content = (
            f"{label}: {price.get('amount')} {price.get('currency')} "
            f"({price.get('price_per_gpu_hour_usd')} USD per GPU-hour)"
            + (f", was {old.get('amount')} {old.get('currency')}" if old else "")
            + f". Catalog version {event['catalog_version']}."
        )
        entries.append(
            Entry(
                id=f"{TAG_AUTHORITY}event:{event['idempotency_key']}",
                title=title,
                updated=event["created_at"],
                link=f"{base_url}/v1/offers/{event['offer_id']}",
                content=content,
                category=event["event_type"],
            )
        )
    return entries
