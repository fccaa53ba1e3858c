"""Where an offer quoted for several places can run, on listed rows and in exports.

The location that matches the location filters, else the first one (see
``service.catalog.locations``): added to rows by :func:`place_rows`, computed in SQL for
exports by :func:`location_columns`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, case, func, literal, or_, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.sql.elements import ColumnElement

from service.catalog.locations import locations_of, pick
from service.query.filters import ComplianceSets, OfferFilters
from service.query.sql import LOCATION, OFFER


def _location_match(
    filters: OfferFilters, compliance: ComplianceSets | None
) -> ColumnElement[bool] | None:
    """The location filters on one ``offer_location`` row (``service.catalog.locations.pick``)."""
    conditions: list[ColumnElement[bool]] = []
    if filters.country:
        conditions.append(LOCATION.c.country == filters.country.upper())
    if filters.region:
        conditions.append(LOCATION.c.region == filters.region)
    if compliance is not None and compliance.gdpr_countries is not None:
        conditions.append(LOCATION.c.country.in_(sorted(compliance.gdpr_countries)))
    if filters.not_country:
        excluded = [c.upper() for c in filters.not_country]
        conditions.append(or_(LOCATION.c.country.is_(None), LOCATION.c.country.not_in(excluded)))
    return and_(*conditions) if conditions else None


def location_columns(
    filters: OfferFilters, compliance: ComplianceSets | None, dialect: str
) -> tuple[Any, Any, Any]:
    """``country``, ``location_region`` and ``locations`` (text) as SQL, for exports: the
    same values :func:`place_rows` gives a row. ``locations`` is
    ``region:country:basis`` per location, in position order, joined by ``"; "``."""
    match = _location_match(filters, compliance)
    order = (
        [LOCATION.c.position] if match is None else [case((match, 0), else_=1), LOCATION.c.position]
    )

    def first(column: Any) -> Any:
        return (
            select(column)
            .where(LOCATION.c.offer_id == OFFER.c.id)
            .order_by(*order)
            .limit(1)
            .scalar_subquery()
        )

    item = LOCATION.c.region + ":" + func.coalesce(LOCATION.c.country, "") + ":" + LOCATION.c.basis
    if dialect == "postgresql":
        listed = (
            select(func.string_agg(item, aggregate_order_by(literal("; "), LOCATION.c.position)))
            .where(LOCATION.c.offer_id == OFFER.c.id)
            .scalar_subquery()
        )
    else:  # SQLite before 3.44 has no ORDER BY inside group_concat: an ordered subquery
        ordered = (
            select(item.label("item"))
            .where(LOCATION.c.offer_id == OFFER.c.id)
            .order_by(LOCATION.c.position)
            .correlate(OFFER)
            .subquery()
        )
        listed = select(func.group_concat(ordered.c.item, "; ")).scalar_subquery()
    return (
        func.coalesce(OFFER.c.country, first(LOCATION.c.country)).label("country"),
        first(LOCATION.c.region).label("location_region"),
        listed.label("locations"),
    )


def place_rows(
    conn: Connection,
    rows: list[dict[str, Any]],
    filters: OfferFilters | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """Add each row's ``locations`` (where an offer quoted for several places can run, see
    ``service.catalog.locations``) and ``location_region``: the location matching the location
    filters, else the first one. A row without a country of its own takes that location's
    country; ``region`` stays as quoted (the offer's identity, e.g. ``global``)."""
    found = locations_of(conn, [r["id"] for r in rows]) if rows else {}
    filters = filters or OfferFilters()
    gdpr = compliance.gdpr_countries if compliance is not None else None
    for row in rows:
        locations = found.get(row["id"], [])
        row["locations"] = locations
        chosen = pick(
            [(loc["region"], loc["country"]) for loc in locations],
            country=filters.country.upper() if filters.country else None,
            region=filters.region,
            countries=gdpr,
            excluded=[c.upper() for c in filters.not_country],
        )
        row["location_region"] = chosen[0] if chosen else None
        if chosen is not None and row.get("country") is None:
            row["country"] = chosen[1]
    return rows
