"""Crawl runs and catalog counts: the listings of runs, the last run of each source, health."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select

from schema.crawl import RejectedRecord
from schema.enums import OfferStatus
from service.query.sql import OBS, OFFER, RUN, NotFound
from service.query.versions import current_version

RUN_SUMMARY_COLUMNS = (
    RUN.c.id,
    RUN.c.source,
    RUN.c.status,
    RUN.c.reason,
    RUN.c.parser_version,
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
"""What every listing of crawl runs shows (CLI, API, web page)."""


def list_crawl_runs(
    conn: Connection, source: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    stmt = select(*RUN_SUMMARY_COLUMNS).order_by(RUN.c.id.desc()).limit(limit)
    if source:
        stmt = stmt.where(RUN.c.source == source)
    return [dict(row) for row in conn.execute(stmt).mappings()]


REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]


def list_rejections(
    conn: Connection, run_id: int, limit: int = 1000
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Crawl run ``run_id`` (:data:`RUN_SUMMARY_COLUMNS`) and the rejections stored with it,
    by position (a JSON Lines file's line - 1, a crawl's record number - 1): the first
    ``MAX_STORED_REJECTIONS`` of a run are kept, each with its reason and a bounded
    excerpt of the record. :class:`NotFound` for a run that does not exist."""
    run = conn.execute(select(*RUN_SUMMARY_COLUMNS).where(RUN.c.id == run_id)).mappings().first()
    if run is None:
        raise NotFound(f"crawl run {run_id} does not exist")
    stmt = (
        select(REJECTED.c.position, REJECTED.c.reason, REJECTED.c.record)
        .where(REJECTED.c.crawl_run_id == run_id)
        .order_by(REJECTED.c.position, REJECTED.c.id)
        .limit(limit)
    )
    return dict(run), [dict(row) for row in conn.execute(stmt).mappings()]


def count_rejections(conn: Connection, run_id: int) -> int:
    """How many rejections of run ``run_id`` are stored."""
    stmt = select(func.count()).select_from(REJECTED).where(REJECTED.c.crawl_run_id == run_id)
    return int(conn.execute(stmt).scalar() or 0)


def last_runs(conn: Connection, sources: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The latest crawl run of each source (of ``sources`` only, when given), by name."""
    latest = select(func.max(RUN.c.id)).group_by(RUN.c.source)
    if sources is not None:
        latest = latest.where(RUN.c.source.in_(sorted(set(sources))))
    stmt = select(*RUN_SUMMARY_COLUMNS).where(RUN.c.id.in_(latest))
    return {r["source"]: dict(r) for r in conn.execute(stmt).mappings()}


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


def crawl_status_counts(conn: Connection) -> list[tuple[str, str, int]]:
    stmt = select(RUN.c.source, RUN.c.status, func.count()).group_by(RUN.c.source, RUN.c.status)
    return [(s, st, int(n)) for s, st, n in conn.execute(stmt)]


def last_good_crawls(conn: Connection) -> dict[str, datetime]:
    stmt = (
        select(RUN.c.source, func.max(RUN.c.finished_at))
        .where(and_(RUN.c.status == "ok", RUN.c.finished_at.is_not(None)))
        .group_by(RUN.c.source)
    )
    return {source: when for source, when in conn.execute(stmt)}  # noqa: C416
