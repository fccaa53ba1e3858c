"""Data-quality reports (invariant 6): what the catalog holds but cannot place or name yet,
and where sources disagree.

Two views:

* :func:`list_unmapped` — the names crawls reported that reference data does not know (the
  ``unmapped_name`` table), each with the active offers that carry it now and example SKUs.
* :func:`quality_report` — built from the offer table itself: active offers without a GPU
  model (grouped by raw name and source), without a country (grouped by provider and
  region), the totals and shares, and the price disagreements (identities several sources
  report at different USD per GPU-hour, every source's figure kept). ``GET /v1/quality`` and
  ``gpuatlas quality`` both print this one dict.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, exists, func, select
from sqlalchemy.sql.elements import ColumnElement

from schema.crawl import UnmappedName
from schema.enums import OfferStatus
from schema.prices import OfferLocation
from service.query.offers import source_report
from service.query.precedence import source_key
from service.query.sql import OFFER
from service.query.versions import current_version

UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]
LOCATION = OfferLocation.__table__  # type: ignore[attr-defined]

EXAMPLES = 3
"""Example SKUs per group."""


def without_gpu() -> ColumnElement[bool]:
    """An offer whose GPU name maps to no model."""
    return OFFER.c.gpu_slug.is_(None)


def without_country() -> ColumnElement[bool]:
    """An offer that cannot be placed in a country (the one definition: residency filters
    cannot see it): no country of its own and no location with one (service.catalog.locations)."""
    placed = exists().where(LOCATION.c.offer_id == OFFER.c.id, LOCATION.c.country.is_not(None))
    return and_(OFFER.c.country.is_(None), ~placed)


def _active(source: str | None) -> list[ColumnElement[bool]]:
    condition = [OFFER.c.status == OfferStatus.active.value]
    if source:
        condition.append(OFFER.c.source == source)
    return condition


def _examples(
    conn: Connection, keys: list[Any], condition: list[ColumnElement[bool]]
) -> dict[tuple[Any, ...], list[str]]:
    """Up to :data:`EXAMPLES` SKUs (alphabetical) per group of ``keys`` among the offers."""
    skus = (
        select(*keys, OFFER.c.sku)
        .where(*condition)
        .group_by(*keys, OFFER.c.sku)  # distinct SKUs (one per price kind otherwise)
        .subquery()
    )
    group = [skus.c[k.name] for k in keys]
    ranked = select(
        *group,
        skus.c.sku,
        func.row_number().over(partition_by=group, order_by=skus.c.sku).label("n"),
    ).subquery()
    stmt = select(ranked).where(ranked.c.n <= EXAMPLES).order_by(*ranked.c[: len(keys)], "n")
    out: dict[tuple[Any, ...], list[str]] = {}
    for row in conn.execute(stmt):
        out.setdefault(tuple(row[: len(keys)]), []).append(row[len(keys)])
    return out


def unmapped_gpus(
    conn: Connection, source: str | None = None, limit: int | None = 100
) -> list[dict[str, Any]]:
    """Active offers without a GPU model, per (raw GPU name, source), most offers first."""
    condition = [*_active(source), without_gpu()]
    keys = [OFFER.c.gpu_name_raw, OFFER.c.source]
    count = func.count().label("offers")
    stmt = (
        select(*keys, count)
        .where(*condition)
        .group_by(*keys)
        .order_by(count.desc(), OFFER.c.gpu_name_raw, OFFER.c.source)
    )
    if limit is not None:
        stmt = stmt.limit(limit)
    rows = conn.execute(stmt).mappings().all()
    examples = _examples(conn, keys, condition) if rows else {}
    return [
        {
            "name": r["gpu_name_raw"],
            "source": r["source"],
            "offers": int(r["offers"]),
            "example_skus": examples.get((r["gpu_name_raw"], r["source"]), []),
        }
        for r in rows
    ]


def unmapped_regions(
    conn: Connection, source: str | None = None, limit: int | None = 100
) -> list[dict[str, Any]]:
    """Active offers without a country, per (provider, region), most offers first."""
    condition = [*_active(source), without_country()]
    keys = [OFFER.c.provider, OFFER.c.region]
    count = func.count().label("offers")
    stmt = (
        select(*keys, count)
        .where(*condition)
        .group_by(*keys)
        .order_by(count.desc(), OFFER.c.provider, OFFER.c.region)
    )
    if limit is not None:
        stmt = stmt.limit(limit)
    rows = conn.execute(stmt).mappings().all()
    if not rows:
        return []
    examples = _examples(conn, keys, condition)
    sources: dict[tuple[str, str], list[str]] = {}
    for r in conn.execute(select(*keys, OFFER.c.source).where(*condition).distinct()).mappings():
        sources.setdefault((r["provider"], r["region"]), []).append(r["source"])
    out = []
    for r in rows:
        place = (r["provider"], r["region"])
        out.append(
            {
                "provider": r["provider"],
                "region": r["region"],
                "sources": sorted(sources.get(place, [])),
                "offers": int(r["offers"]),
                "example_skus": examples.get(place, []),
            }
        )
    return out


def price_disagreements(
    conn: Connection, source: str | None = None, limit: int | None = 100
) -> tuple[list[dict[str, Any]], int]:
    """Identities that two or more sources report at different USD per GPU-hour (active
    offers), widest spread first, with every source's figure, and how many there are in all.

    Compared on the exact integer key ``gpu_hour_usd_e10``; offers without a USD figure (no
    exchange rate) are left out of the comparison.
    """
    keys = [OFFER.c.provider, OFFER.c.sku, OFFER.c.region, OFFER.c.price_kind]
    key = OFFER.c.gpu_hour_usd_e10
    spread = (func.max(key) - func.min(key)).label("spread")
    stmt = (
        select(*keys, spread)
        .where(OFFER.c.status == OfferStatus.active.value, key.is_not(None))
        .group_by(*keys)
        .having(func.count(OFFER.c.source.distinct()) >= 2, func.min(key) != func.max(key))
    )
    if source:
        mine = OFFER.alias("mine")
        stmt = stmt.where(
            exists().where(
                and_(
                    *(mine.c[k.name] == k for k in keys),
                    mine.c.source == source,
                    mine.c.status == OfferStatus.active.value,
                )
            )
        )
    groups = stmt.subquery("disagreeing")
    total = int(conn.execute(select(func.count()).select_from(groups)).scalar() or 0)
    ident = [groups.c[k.name] for k in keys]
    top = select(groups).order_by(groups.c.spread.desc(), *ident)  # widest spread first
    if limit is not None:
        top = top.limit(limit)
    shown = top.subquery("shown")
    reports = (
        select(shown, OFFER.c.id, OFFER.c.source, OFFER.c.gpu_hour_usd)
        .join(OFFER, and_(*(OFFER.c[k.name] == shown.c[k.name] for k in keys)))
        .where(OFFER.c.status == OfferStatus.active.value, key.is_not(None))
        .order_by(shown.c.spread.desc(), *(shown.c[k.name] for k in keys))
    )
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in conn.execute(reports).mappings():
        group = out.setdefault(
            tuple(r[k.name] for k in keys),
            {**{k.name: r[k.name] for k in keys}, "reports": []},
        )
        group["reports"].append(source_report(r))
    for group in out.values():
        group["reports"].sort(key=lambda o: (source_key(o["source"]), o["offer_id"]))
        prices = [o["price_per_gpu_hour_usd"] for o in group["reports"]]
        group["min_price_per_gpu_hour_usd"] = min(prices)
        group["max_price_per_gpu_hour_usd"] = max(prices)
        group["reports"] = group.pop("reports")  # after min / max, as the model orders them
    return list(out.values()), total


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def quality_report(conn: Connection, source: str | None = None, limit: int = 100) -> dict[str, Any]:
    """The whole report (``schema.api.QualityReport``): totals, unmapped GPU names and
    regions, price disagreements; each list at most ``limit`` long."""
    active = _active(source)
    counts = conn.execute(
        select(
            func.count(),
            func.count().filter(without_gpu()),
            func.count().filter(without_country()),
        ).where(*active)
    ).one()
    total, no_gpu, no_country = (int(v or 0) for v in counts)
    disagreements, disagreeing = price_disagreements(conn, source, limit)
    return {
        "catalog_version": current_version(conn),
        "source": source,
        "totals": {
            "active_offers": total,
            "without_gpu": no_gpu,
            "without_country": no_country,
            "without_gpu_share": _share(no_gpu, total),
            "without_country_share": _share(no_country, total),
            "price_disagreements": disagreeing,
        },
        "unmapped_gpus": unmapped_gpus(conn, source, limit),
        "unmapped_regions": unmapped_regions(conn, source, limit),
        "price_disagreements": disagreements,
    }


def list_unmapped(
    conn: Connection, kind: str | None = None, source: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Unknown GPU names, regions and providers, most frequent first, each with the active
    offers that carry it now (``offers``) and up to three of their SKUs (``example_skus``)."""
    stmt = (
        select(
            UNMAPPED.c.kind,
            UNMAPPED.c.source,
            UNMAPPED.c.value,
            UNMAPPED.c.occurrences,
            UNMAPPED.c.first_seen_at,
            UNMAPPED.c.last_seen_at,
            UNMAPPED.c.last_crawl_run_id,
        )
        .order_by(UNMAPPED.c.occurrences.desc(), UNMAPPED.c.kind, UNMAPPED.c.value)
        .limit(limit)
    )
    if kind:
        stmt = stmt.where(UNMAPPED.c.kind == kind)
    if source:
        stmt = stmt.where(UNMAPPED.c.source == source)
    rows = [dict(row) for row in conn.execute(stmt).mappings()]
    gpus: dict[tuple[str, str], dict[str, Any]] = {}
    regions: dict[str, dict[str, Any]] = {}
    if any(r["kind"] == "gpu" for r in rows):
        gpus = {(g["source"], g["name"]): g for g in unmapped_gpus(conn, source, None)}
    if any(r["kind"] == "region" for r in rows):
        found = unmapped_regions(conn, source, None)
        regions = {f"{g['provider']}/{g['region']}": g for g in found}
    for r in rows:
        group: dict[str, Any] | None = None
        if r["kind"] == "gpu":
            group = gpus.get((r["source"], r["value"]))
        elif r["kind"] == "region":
            place = regions.get(r["value"])
            group = place if place and r["source"] in place["sources"] else None
        r["offers"] = group["offers"] if group else 0
        r["example_skus"] = group["example_skus"] if group else []
    return rows
