"""``export_destination`` read as the GPU slugs an offer names that need no licence: the
same offers as "a GPU is known and needs no licence", including GPUs the reference no
longer lists and offers without a GPU, current and pinned (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, update

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query.filters import OfferFilters, offer_gpu_slugs, resolve_compliance
from service.query.offers import list_offers
from service.query.sql import OFFER
from service.query.versions import current_version
from tests.support.factories import record

RETIRED = "retired-gpu-model"
"""A slug no GPU model of the reference has (a model dropped after offers named it)."""


def _catalog(engine: Engine, settings: Settings) -> int:
    rows = [
        record(1, provider="lambda", source="lambda", sku="h100", gpu_name_raw="H100 SXM"),
        record(2, provider="lambda", source="lambda", sku="a10", gpu_name_raw="A10"),
        record(3, provider="lambda", source="lambda", sku="l4", gpu_name_raw="L4"),
        record(4, provider="lambda", source="lambda", sku="old", gpu_name_raw="A10"),
        record(5, provider="lambda", source="lambda", sku="none", gpu_name_raw=None),
    ]
    ingest(engine, settings, CrawlResult(source="lambda", records=rows))
    with engine.begin() as conn:
        conn.execute(update(OFFER).where(OFFER.c.sku == "old").values(gpu_slug=RETIRED))
        pinned = current_version(conn)
    repriced = [{**r, "amount": "99.00"} for r in rows]
    ingest(engine, settings, CrawlResult(source="lambda", records=repriced))
    return pinned


@pytest.mark.parametrize("destination", ["CN", "DE", "RU"])
def test_the_licence_free_slugs_select_the_offers_the_licence_test_does(
    engine: Engine, settings: Settings, reference_data: None, destination: str
) -> None:
    pinned = _catalog(engine, settings)
    filters = OfferFilters(export_destination=destination)
    with engine.connect() as conn:
        slugs = offer_gpu_slugs(conn)
        assert RETIRED in slugs and None not in slugs
        compliance = resolve_compliance(conn, filters)
        assert compliance.licence_gpus is not None and compliance.licence_free is not None
        assert compliance.licence_free == set(slugs) - compliance.licence_gpus
        for version in (None, pinned):
            everything = list_offers(conn, OfferFilters(), 100, version=version)
            expected = sorted(
                r["id"]
                for r in everything
                if r["gpu_slug"] is not None and r["gpu_slug"] not in compliance.licence_gpus
            )
            got = list_offers(conn, filters, 100, version=version, compliance=compliance)
            assert sorted(r["id"] for r in got) == expected, (destination, version)
            ids: dict[str, Any] = {r["sku"]: r["gpu_slug"] for r in got}
            assert "none" not in ids  # no GPU named: never cleared for export
            assert ("old" in ids) == (RETIRED not in compliance.licence_gpus)


def test_to_china_the_h100_and_l4_need_a_licence_and_the_a10_does_not(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    _catalog(engine, settings)
    filters = OfferFilters(export_destination="CN")
    with engine.connect() as conn:
        compliance = resolve_compliance(conn, filters)
        got = {r["sku"] for r in list_offers(conn, filters, 100, compliance=compliance)}
    assert got == {"a10", "old"}  # the retired model is in no rule: no licence asked
