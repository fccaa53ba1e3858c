"""``export_destination`` read as the GPU slugs an offer names that need no licence: the
same offers as "a GPU is known and needs no licence", including GPUs the reference no
longer lists and offers without a GPU, current and pinned (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, event, update

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query.filters import (
    FEW_MODELS,
    OfferFilters,
    offer_gpu_slugs,
    resolve_compliance,
)
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


LICENSED_TO_CHINA = ["H100 SXM", "H200", "A100 80GB", "L4", "L40S", "B200", "H800", "A800"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("many", [False, True])
def test_the_slug_list_is_sought_only_when_it_leaves_few_models(
    engine: Engine, settings: Settings, reference_data: None, many: bool
) -> None:
    """SQLite has no statistics: a list of most of the models, sought in a (gpu_slug, ...)
    index, read every offer through it. The list is written ``+offer.gpu_slug`` (never
    sought) unless it holds a quarter of the models offers name or fewer."""
    _catalog(engine, settings)
    if many:  # models a licence is needed for: the two left are few among them
        more = [
            record(10 + i, provider="runpod", source="runpod", sku=f"m{i}", gpu_name_raw=name)
            for i, name in enumerate(LICENSED_TO_CHINA)
        ]
        ingest(engine, settings, CrawlResult(source="runpod", records=more))
    filters = OfferFilters(export_destination="CN")
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    with engine.connect() as conn:
        compliance = resolve_compliance(conn, filters)
        named = set(offer_gpu_slugs(conn))
        assert compliance.licence_free is not None and compliance.licence_gpus
        few = len(compliance.licence_free) * FEW_MODELS <= len(named)
        assert compliance.licence_free_few == few == many, (sorted(compliance.licence_free), named)
        list_offers(conn, filters, 10, compliance=compliance, sort="gpu_count")
    listed = [s for s in seen if "gpu_slug IN" in s]
    assert listed
    assert all(("+offer.gpu_slug IN" in s) == (not few) for s in listed), listed
