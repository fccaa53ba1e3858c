"""Re-read stored offers' GPU names and places after a reference load, without a crawl.

``gpuatlas reference load`` calls :func:`reresolve_offers` in the load's transaction: an
offer whose raw GPU name the catalog now reads (a new model, a new alias, a new default)
gets its model, one that was picked by a default says so, an offer in a region the
catalog now places gets its country, and the unmapped names that now resolve leave the
report (invariant 6: unknown is shown until it is known, then no longer).

A name that no longer resolves keeps the model it had: it may have come from the
source itself (a crawler that states the slug), which no reference change can undo.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, exists, func, select, update

from schema.catalog import InstanceType, Region
from schema.crawl import UnmappedName
from schema.enums import UnmappedKind
from schema.gpu_names import GpuNameIndex
from schema.prices import Offer
from service.catalog.gpu_catalog import gpu_name_index

OFFER = Offer.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
SKU = InstanceType.__table__  # type: ignore[attr-defined]
UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]


def reresolve_offers(conn: Connection) -> dict[str, int]:
    """Re-resolve every stored offer's GPU and country; returns what changed, by kind."""
    index = gpu_name_index(conn)
    names = conn.execute(
        select(OFFER.c.gpu_name_raw, OFFER.c.gpu_memory_gb, OFFER.c.gpu_slug, OFFER.c.gpu_inferred)
        .where(OFFER.c.gpu_name_raw.is_not(None))
        .distinct()
    ).all()
    gpus = 0
    for raw, memory, slug, inferred in names:
        found = index.resolve(raw, memory)
        if found.slug is None or (found.slug, bool(found.inferred)) == (slug, bool(inferred)):
            continue
        gpus += conn.execute(
            update(OFFER)
            .where(
                OFFER.c.gpu_name_raw == raw,
                OFFER.c.gpu_memory_gb.is_not_distinct_from(memory),
                OFFER.c.gpu_slug.is_not_distinct_from(slug),
                OFFER.c.gpu_inferred.is_(bool(inferred)),
            )
            .values(gpu_slug=found.slug, gpu_inferred=found.inferred)
        ).rowcount
    skus = 0
    if gpus:
        # instance types are registered from their first offer; a SKU without a model
        # takes the one its offers now have
        model = (
            select(func.min(OFFER.c.gpu_slug))
            .where(OFFER.c.provider == SKU.c.provider, OFFER.c.sku == SKU.c.name)
            .scalar_subquery()
        )
        skus = conn.execute(
            update(SKU).where(SKU.c.gpu_slug.is_(None)).values(gpu_slug=model)
        ).rowcount
    placed = select(REGION.c.country).where(
        REGION.c.provider == OFFER.c.provider, REGION.c.code == OFFER.c.region
    )
    countries = conn.execute(
        update(OFFER)
        .where(OFFER.c.country.is_(None), exists(placed))
        .values(country=placed.scalar_subquery())
    ).rowcount
    return {
        "offer_gpus": gpus,
        "instance_type_gpus": skus,
        "offer_countries": countries,
        "unmapped_cleared": _clear_unmapped(conn, index),
    }


def _clear_unmapped(conn: Connection, index: GpuNameIndex) -> int:
    """Drop reported names the catalog now knows: GPU names that resolve, regions it has."""
    cleared = 0
    rows = conn.execute(select(UNMAPPED.c.id, UNMAPPED.c.kind, UNMAPPED.c.value)).all()
    known_regions = {
        f"{provider}/{code}"
        for provider, code in conn.execute(select(REGION.c.provider, REGION.c.code))
    }
    gone = [
        row_id
        for row_id, kind, value in rows
        if (kind == UnmappedKind.gpu.value and index.resolve(value).slug is not None)
        or (kind == UnmappedKind.region.value and value in known_regions)
    ]
    for start in range(0, len(gone), 500):
        cleared += conn.execute(
            delete(UNMAPPED).where(UNMAPPED.c.id.in_(gone[start : start + 500]))
        ).rowcount
    return cleared
