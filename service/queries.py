"""Read queries over the catalog, shared by the CLI and the API (never writes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Select, and_, cast, func, or_, select
from sqlalchemy.types import Float

from schema.catalog import GpuModel, Provider, Region
from schema.crawl import CrawlRun
from schema.enums import OfferStatus
from schema.prices import CatalogVersion, Offer, PriceObservation

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]


class NotFound(LookupError):
    """The named thing does not exist."""


@dataclass(frozen=True)
class OfferFilters:
    gpu: str | None = None
    """A canonical slug or a family (e.g. 'h100')."""
    provider: str | None = None
    country: str | None = None
    price_kind: str | None = None
    source: str | None = None
    min_gpus: Decimal | None = None
    max_gpus: Decimal | None = None


def current_version(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(VERSION.c.id), 0))).scalar() or 0)


OFFER_COLUMNS = (
    OFFER.c.id,
    OFFER.c.source,
    OFFER.c.provider,
    OFFER.c.sku,
    OFFER.c.region,
    OFFER.c.country,
    OFFER.c.price_kind,
    OFFER.c.unit,
    OFFER.c.price_per,
    OFFER.c.gpu_slug,
    OFFER.c.gpu_name_raw,
    OFFER.c.gpu_count,
    OFFER.c.vcpus,
    OFFER.c.memory_gb,
    OFFER.c.bare_metal,
    OFFER.c.price_floor,
    OFFER.c.status,
    OFFER.c.first_seen_at,
    OFFER.c.last_changed_at,
    OFFER.c.source_url,
    OBS.c.amount,
    OBS.c.currency,
    OBS.c.hourly_amount,
    OBS.c.amount_usd,
    OBS.c.hourly_usd,
    OBS.c.gpu_hour_usd,
    OBS.c.fx_rate,
    OBS.c.fx_date,
    OBS.c.crawl_run_id,
    OBS.c.raw_sha256,
    OBS.c.version_from,
)


def _sortable(column: Any, dialect: str) -> Any:
    """Exact decimals are text on SQLite: sort numerically there."""
    return cast(column, Float) if dialect == "sqlite" else column


def offers_query(filters: OfferFilters, dialect: str) -> Select[Any]:
    stmt = (
        select(*OFFER_COLUMNS)
        .join(OBS, OBS.c.id == OFFER.c.observation_id)
        .where(OFFER.c.status == OfferStatus.active.value)
    )
    if filters.gpu:
        gpu = filters.gpu.lower()
        family = select(GPU.c.slug).where(GPU.c.family == gpu)
        stmt = stmt.where(or_(OFFER.c.gpu_slug == gpu, OFFER.c.gpu_slug.in_(family)))
    if filters.provider:
        stmt = stmt.where(OFFER.c.provider == filters.provider)
    if filters.country:
        stmt = stmt.where(OFFER.c.country == filters.country.upper())
    if filters.price_kind:
        stmt = stmt.where(OFFER.c.price_kind == filters.price_kind)
    if filters.source:
        stmt = stmt.where(OFFER.c.source == filters.source)
    count = _sortable(OFFER.c.gpu_count, dialect)
    if filters.min_gpus is not None:
        stmt = stmt.where(count >= float(filters.min_gpus))
    if filters.max_gpus is not None:
        stmt = stmt.where(count <= float(filters.max_gpus))
    price = _sortable(OBS.c.gpu_hour_usd, dialect)
    return stmt.order_by(price.is_(None), price, OFFER.c.id)


def list_offers(
    conn: Connection, filters: OfferFilters, limit: int = 50, offset: int = 0
) -> list[dict[str, Any]]:
    stmt = offers_query(filters, conn.dialect.name).limit(limit).offset(offset)
    return [dict(row) for row in conn.execute(stmt).mappings()]


def get_offer(conn: Connection, offer_id: int) -> dict[str, Any]:
    stmt = (
        select(*OFFER_COLUMNS, OFFER.c.withdrawn_at)
        .join(OBS, OBS.c.id == OFFER.c.observation_id)
        .where(OFFER.c.id == offer_id)
    )
    row = conn.execute(stmt).mappings().first()
    if row is None:
        raise NotFound(f"offer {offer_id} does not exist")
    return dict(row)


def offer_history(
    conn: Connection, offer_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[dict[str, Any]]:
    """Every observation of an offer, oldest first."""
    get_offer(conn, offer_id)
    stmt = select(
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
    ).where(OBS.c.offer_id == offer_id)
    if start is not None:
        stmt = stmt.where(or_(OBS.c.valid_to.is_(None), OBS.c.valid_to > start))
    if end is not None:
        stmt = stmt.where(OBS.c.valid_from <= end)
    stmt = stmt.order_by(OBS.c.valid_from, OBS.c.id)
    return [dict(row) for row in conn.execute(stmt).mappings()]


def list_versions(conn: Connection, limit: int = 50) -> list[dict[str, Any]]:
    stmt = select(VERSION).order_by(VERSION.c.id.desc()).limit(limit)
    return [dict(row) for row in conn.execute(stmt).mappings()]


def list_crawl_runs(
    conn: Connection, source: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    stmt = (
        select(
            RUN.c.id,
            RUN.c.source,
            RUN.c.status,
            RUN.c.reason,
            RUN.c.started_at,
            RUN.c.finished_at,
            RUN.c.seen,
            RUN.c.added,
            RUN.c.changed,
            RUN.c.withdrawn,
            RUN.c.rejected,
            RUN.c.unmapped,
            RUN.c.catalog_version,
        )
        .order_by(RUN.c.id.desc())
        .limit(limit)
    )
    if source:
        stmt = stmt.where(RUN.c.source == source)
    return [dict(row) for row in conn.execute(stmt).mappings()]


def catalog_counts(conn: Connection) -> dict[str, int]:
    active = conn.execute(
        select(func.count()).select_from(OFFER).where(OFFER.c.status == OfferStatus.active.value)
    ).scalar()
    observations = conn.execute(select(func.count()).select_from(OBS)).scalar()
    return {
        "version": current_version(conn),
        "active_offers": int(active or 0),
        "observations": int(observations or 0),
    }


def last_good_crawls(conn: Connection) -> dict[str, datetime]:
    stmt = (
        select(RUN.c.source, func.max(RUN.c.finished_at))
        .where(and_(RUN.c.status == "ok", RUN.c.finished_at.is_not(None)))
        .group_by(RUN.c.source)
    )
    return {source: when for source, when in conn.execute(stmt)}  # noqa: C416
