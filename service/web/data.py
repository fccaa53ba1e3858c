"""Small read queries the pages need and ``service.query`` does not offer (never writes)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, func, select

from service.query.filters import ComplianceSets, OfferFilters
from service.query.offers import base_query
from service.query.runs import RUN_SUMMARY_COLUMNS, last_runs
from service.query.sql import CERT, GPU, OFFER, PROVIDER, RUN


def count_offers(
    conn: Connection,
    filters: OfferFilters,
    *,
    compliance: ComplianceSets | None = None,
    cap: int | None = None,
) -> int:
    """How many current offers match (at most ``cap`` + 1 counted when ``cap`` is set)."""
    stmt = base_query((OFFER.c.id,), filters, conn.dialect.name, None, compliance)
    if cap is not None:
        stmt = stmt.limit(cap + 1)
    return int(conn.execute(select(func.count()).select_from(stmt.subquery())).scalar() or 0)


def runs_by_ids(conn: Connection, ids: Iterable[int | None]) -> list[dict[str, Any]]:
    """The crawl runs with these ids, oldest first (one query)."""
    wanted = sorted({i for i in ids if i is not None})
    if not wanted:
        return []
    stmt = select(*RUN_SUMMARY_COLUMNS).where(RUN.c.id.in_(wanted)).order_by(RUN.c.id)
    return [dict(r) for r in conn.execute(stmt).mappings()]


def provider_sources(conn: Connection, provider: str) -> list[str]:
    """Every source that ever listed an offer of ``provider`` (its own and peers)."""
    stmt = select(OFFER.c.source).where(OFFER.c.provider == provider).distinct()
    return sorted({r[0] for r in conn.execute(stmt)} | {provider})


def latest_runs_of(conn: Connection, sources: Iterable[str]) -> list[dict[str, Any]]:
    """The latest crawl run of each of ``sources`` that has run, by source name."""
    runs = last_runs(conn, sources)
    return [runs[name] for name in sorted(runs)]


def cert_schemes(conn: Connection) -> list[str]:
    """Certification schemes present in the catalog (choices for the filter form)."""
    stmt = select(CERT.c.scheme).where(CERT.c.superseded_at.is_(None)).distinct()
    return sorted(r[0] for r in conn.execute(stmt))


def gpu_choices(conn: Connection) -> list[dict[str, Any]]:
    """GPU models (slug, name, family) for the filter form."""
    stmt = select(GPU.c.slug, GPU.c.name, GPU.c.family).order_by(GPU.c.family, GPU.c.slug)
    return [dict(r) for r in conn.execute(stmt).mappings()]


def provider_names(conn: Connection, slugs: Iterable[str]) -> dict[str, str]:
    wanted = sorted(set(slugs))
    if not wanted:
        return {}
    stmt = select(PROVIDER.c.slug, PROVIDER.c.name).where(PROVIDER.c.slug.in_(wanted))
    return {slug: name for slug, name in conn.execute(stmt)}  # noqa: C416
