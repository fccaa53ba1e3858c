"""Reference listings: GPUs, providers and their regions and certifications."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import Connection, func, select

from schema.enums import OfferStatus
from service.query.costs import CostBook
from service.query.sql import CERT, CLASSIFICATION, GPU, OFFER, PROVIDER, REGION, NotFound


def list_gpus(conn: Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(select(GPU).order_by(GPU.c.slug)).mappings()]


def _storable(slug: str) -> bool:
    """Whether a row could have this slug: PostgreSQL refuses a NUL in a parameter (an
    error, where the answer is simply that no such row exists)."""
    return "\x00" not in slug


def get_gpu(conn: Connection, slug: str) -> dict[str, Any]:
    row = None
    if _storable(slug):
        row = conn.execute(select(GPU).where(GPU.c.slug == slug)).mappings().first()
    if row is None:
        raise NotFound(f"GPU {slug!r} does not exist")
    gpu = dict(row)
    gpu["classifications"] = [
        dict(r)
        for r in conn.execute(
            select(
                CLASSIFICATION.c.eccn,
                CLASSIFICATION.c.basis,
                CLASSIFICATION.c.effective_from,
                CLASSIFICATION.c.source_url,
            )
            .where(CLASSIFICATION.c.gpu_slug == slug)
            .order_by(CLASSIFICATION.c.effective_from)
        ).mappings()
    ]
    gpu["active_offers"] = _count_active(conn, OFFER.c.gpu_slug == slug)
    return gpu


def _count_active(conn: Connection, condition: Any) -> int:
    stmt = (
        select(func.count())
        .select_from(OFFER)
        .where(OFFER.c.status == OfferStatus.active.value, condition)
    )
    return int(conn.execute(stmt).scalar() or 0)


def list_providers(conn: Connection) -> list[dict[str, Any]]:
    counts: dict[str, int] = dict(
        conn.execute(
            select(OFFER.c.provider, func.count())
            .where(OFFER.c.status == OfferStatus.active.value)
            .group_by(OFFER.c.provider)
        ).all()
    )
    rows = conn.execute(select(PROVIDER).order_by(PROVIDER.c.slug)).mappings()
    return [{**dict(r), "active_offers": int(counts.get(r["slug"], 0))} for r in rows]


def get_provider(conn: Connection, slug: str, on: date) -> dict[str, Any]:
    row = None
    if _storable(slug):
        row = conn.execute(select(PROVIDER).where(PROVIDER.c.slug == slug)).mappings().first()
    if row is None:
        raise NotFound(f"provider {slug!r} does not exist")
    provider = dict(row)
    provider["active_offers"] = _count_active(conn, OFFER.c.provider == slug)
    provider["regions"] = list_regions(conn, slug)
    provider["certifications"] = [
        dict(r)
        for r in conn.execute(
            select(
                CERT.c.scheme,
                CERT.c.status,
                CERT.c.regions,
                CERT.c.valid_from,
                CERT.c.valid_to,
                CERT.c.evidence_url,
                CERT.c.checked,
            )
            .where(CERT.c.provider == slug, CERT.c.superseded_at.is_(None))
            .order_by(CERT.c.scheme)
        ).mappings()
    ]
    for cert in provider["certifications"]:
        cert["valid_now"] = (
            cert["status"] == "certified"
            and (cert["valid_from"] is None or cert["valid_from"] <= on)
            and (cert["valid_to"] is None or cert["valid_to"] >= on)
        )
    # transfer and storage prices (schema.costs): what the TCO adds to the instance
    provider["hidden_costs"] = [rate.document() for rate in CostBook.load(conn, slug).of(slug)]
    return provider


def list_regions(
    conn: Connection, provider: str | None = None, country: str | None = None
) -> list[dict[str, Any]]:
    stmt = select(
        REGION.c.provider,
        REGION.c.code,
        REGION.c.name,
        REGION.c.country,
        REGION.c.city,
        REGION.c.province,
    ).order_by(REGION.c.provider, REGION.c.code)
    if provider:
        stmt = stmt.where(REGION.c.provider == provider)
    if country:
        stmt = stmt.where(REGION.c.country == country.upper())
    return [dict(r) for r in conn.execute(stmt).mappings()]
