"""Builders for OfferRecord dicts and catalog fingerprints used across tests."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, func, select

from crawlers.normalize.reference import reference_index
from schema.crawl import UnmappedName
from schema.prices import CatalogVersion, Offer, PriceObservation
from schema.records import OfferRecord

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]


def record(i: int = 0, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "provider": "acme",
        "source": "acme",
        "sku": f"gpu-{i}",
        "gpu_name_raw": "H100 SXM",
        "gpu_count": "8",
        "region": f"r{i % 7}",
        "country": "DE",
        "price_kind": "on_demand",
        "unit": "hour",
        "amount": str(Decimal("20.00") + Decimal(i % 50) / 10),
        "currency": "USD",
    }
    base.update(overrides)
    return base


def records(
    n: int, *, source: str = "acme", bump_every: int = 0, **overrides: Any
) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        item = record(i, source=source, **overrides)
        if bump_every and i % bump_every == 0:
            item["amount"] = str(Decimal(item["amount"]) + Decimal("0.01"))
        out.append(item)
    return out


def catalog_state(engine: Engine) -> dict[str, Any]:
    """What a reader sees: offers with price and status, open observations, versions."""
    with engine.connect() as conn:
        offers = sorted(
            (r.id, r.sku, r.region, str(r.amount), r.status)
            for r in conn.execute(
                select(OFFER.c.id, OFFER.c.sku, OFFER.c.region, OFFER.c.amount, OFFER.c.status)
            )
        )
        open_obs = conn.execute(
            select(func.count()).select_from(OBS).where(OBS.c.version_to.is_(None))
        ).scalar()
        all_obs = conn.execute(select(func.count()).select_from(OBS)).scalar()
        versions = conn.execute(select(func.count()).select_from(VERSION)).scalar()
    return {
        "offers": offers,
        "open_observations": open_obs,
        "observations": all_obs,
        "versions": versions,
    }


def check_invariants(engine: Engine) -> None:
    """Structural truths of a consistent catalog (hold after any commit, never between)."""
    with engine.connect() as conn:
        active = conn.execute(
            select(func.count()).select_from(OFFER).where(OFFER.c.status == "active")
        ).scalar()
        open_obs = conn.execute(
            select(func.count()).select_from(OBS).where(OBS.c.version_to.is_(None))
        ).scalar()
        assert active == open_obs, "every active offer has exactly one open observation"
        orphan = conn.execute(
            select(func.count())
            .select_from(OBS)
            .where(OBS.c.version_from.not_in(select(VERSION.c.id)))
        ).scalar()
        assert orphan == 0, "every observation belongs to a catalog version"
        unplaced = conn.execute(
            select(func.count())
            .select_from(OBS)
            .where(
                OBS.c.version_to.is_not(None),
                OBS.c.valid_to.is_(None),
                OBS.c.version_to.not_in(select(VERSION.c.id)),
            )
        ).scalar()
        assert unplaced == 0, "a closed observation's end is its own or its closing version's"
        mismatched = conn.execute(
            select(func.count())
            .select_from(OFFER.join(OBS, OBS.c.id == OFFER.c.observation_id))
            .where(OFFER.c.amount != OBS.c.amount)
        ).scalar()
        assert mismatched == 0, "offer's current amount equals its current observation"


def offer_count(engine: Engine) -> int:
    """How many offers the catalog holds, whatever their status."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(OFFER)).scalar() or 0)


def gpu_of(record: OfferRecord) -> str | None:
    """The model the catalog stores for a record: the source's own slug, or its raw name
    as the parser reads it (a family default included, which ingest marks inferred)."""
    if record.gpu_model:
        return record.gpu_model
    return reference_index().gpu(record.gpu_name_raw, record.gpu_memory_gb)


def unmapped_occurrences(engine: Engine, source: str) -> dict[tuple[str, str], int]:
    """(kind, name) -> occurrences of the source's unmapped names (``unmapped_name``)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(UNMAPPED.c.kind, UNMAPPED.c.value, UNMAPPED.c.occurrences).where(
                UNMAPPED.c.source == source
            )
        ).all()
    return {(kind, value): occurrences for kind, value, occurrences in rows}
