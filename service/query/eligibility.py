"""Aggregates over the listing: who offers a match (and why not), the cheapest per kind."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, func, select

from schema.enums import OfferStatus
from service.query.filters import ComplianceSets, OfferFilters
from service.query.offers import base_query
from service.query.provenance import finished_rows
from service.query.sql import (
    OBS,
    OFFER,
    OFFER_COLUMNS,
    PROVIDER,
    gpu_hour_key,
    sortable,
    visible_at,
)


def eligible_providers(
    conn: Connection,
    filters: OfferFilters,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """One row per provider with a matching offer: its cheapest one and the count."""
    dialect = conn.dialect.name
    price = gpu_hour_key(dialect, version)
    ranked = base_query(
        (
            *OFFER_COLUMNS,
            func.row_number()
            .over(partition_by=OFFER.c.provider, order_by=(price.is_(None), price, OFFER.c.id))
            .label("rank"),
            func.count().over(partition_by=OFFER.c.provider).label("offer_count"),
        ),
        filters,
        dialect,
        version,
        compliance,
        scan=True,  # ranks every match: no use for the price-ordered index walk
    ).subquery()
    stmt = select(ranked).where(ranked.c.rank == 1)
    rows = [dict(r) for r in conn.execute(stmt).mappings()]
    rows.sort(key=lambda r: (r["gpu_hour_usd"] is None, r["gpu_hour_usd"] or 0, r["provider"]))
    return finished_rows(conn, rows, filters, compliance)


def explain_exclusions(
    conn: Connection,
    filters: OfferFilters,
    included: set[str],
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
) -> dict[str, list[str]]:
    """For each provider without a matching offer: the filters that exclude it.

    A filter is named when the provider has matching offers once that one filter is
    lifted; when no single filter is to blame, the reason says the filters only exclude
    it together. Providers without any current offer say so.
    """
    dialect = conn.dialect.name
    if version is None:
        with_offers = select(OFFER.c.provider).where(OFFER.c.status == OfferStatus.active.value)
    else:
        with_offers = select(OFFER.c.provider).join(
            OBS, and_(OBS.c.offer_id == OFFER.c.id, visible_at(OBS, version))
        )
    providers = {r[0] for r in conn.execute(select(PROVIDER.c.slug))}
    live = {r[0] for r in conn.execute(with_offers.distinct())}
    reasons: dict[str, list[str]] = {}
    for slug in sorted(providers - included):
        reasons[slug] = [] if slug in live else ["no current offers"]
    active = filters.active()
    candidates = {s for s, r in reasons.items() if not r}
    for name in active:
        if not candidates:
            break
        stmt = base_query(
            (OFFER.c.provider,), filters, dialect, version, compliance, skip=name
        ).distinct()
        for (provider,) in conn.execute(stmt):
            if provider in candidates:
                reasons[provider].append(f"{name}={_show(active[name])}")
    for slug in candidates:
        if not reasons[slug]:
            reasons[slug] = ["no single offer satisfies all the filters together"]
    return reasons


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def cheapest_by_kind(
    conn: Connection,
    filters: OfferFilters,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """Per (provider, price kind): the cheapest matching offer per GPU-hour (USD)."""
    dialect = conn.dialect.name
    price = sortable(OBS.c.gpu_hour_usd, dialect)
    ranked = base_query(
        (
            *OFFER_COLUMNS,
            func.row_number()
            .over(
                partition_by=(OFFER.c.provider, OFFER.c.price_kind),
                order_by=(price, OFFER.c.id),
            )
            .label("rank"),
        ),
        filters,
        dialect,
        version,
        compliance,
    )
    best = ranked.where(OBS.c.gpu_hour_usd.is_not(None)).subquery()
    stmt = select(best).where(best.c.rank == 1).order_by(best.c.provider)
    rows = [dict(r) for r in conn.execute(stmt).mappings()]
    return finished_rows(conn, rows, filters, compliance)
