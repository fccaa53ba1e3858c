"""``min_gpu_memory_gb`` on a USD per PFLOPS-hour listing: the GPU models its offers can
meet it with (their model's figure, or a memory they state themselves), and the page read
as one walk per such model once the single walk gives up (SQLite). Same rows, same order
as the full sort, whichever way the page is read (SQLite and PostgreSQL)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, update

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query import offers as offers_module
from service.query.facts import stated_gpu_memory
from service.query.filters import OfferFilters, resolve_compliance
from service.query.offers import list_offers
from service.query.sql import OFFER
from tests.support.factories import record
from tests.support.spy import results_of

# (raw GPU name, its slug, memory in GB): small GPUs first, dearest per PFLOPS-hour
MODELS = [
    ("L4", "nvidia-l4-24gb"),
    ("L40S", "nvidia-l40s-48gb"),
    ("H100 SXM", "nvidia-h100-sxm-80gb"),
    ("H200", "nvidia-h200-sxm-141gb"),
]


def _catalog(engine: Engine, settings: Settings) -> None:
    """Twelve offers of each model at 1 to 8 GPUs; the L4s dearest per PFLOPS-hour. One L4
    offer states 96 GB (it meets a floor of 80 that its model does not) and one H100 offer
    states 40 GB (it does not, though its model does)."""
    rows = []
    for m, (name, _slug) in enumerate(MODELS):
        for i in range(12):
            count = 1 + i % 8
            amount = Decimal(60 - 12 * m) + Decimal(i) / 4
            rows.append(
                record(
                    100 * m + i,
                    provider=f"p{i % 3}",
                    source="acme",
                    sku=f"{name.split()[0].lower()}-{i}",
                    gpu_name_raw=name,
                    gpu_count=str(count),
                    amount=str(amount * count),
                )
            )
    rows[3]["gpu_memory_gb"] = "96"  # an L4 offer stating more than its model
    rows[24 + 5]["gpu_memory_gb"] = "40"  # an H100 offer stating less
    ingest(engine, settings, CrawlResult(source="acme", records=rows))
    # a peer catalog reporting every fourth offer again, cheaper (hidden behind acme's by
    # the precedence unless include_peers), and one H200 offer only it has
    peers = [
        {**row, "source": PEER, "amount": str(Decimal(row["amount"]) / 2)} for row in rows[::4]
    ]
    peers.append({**rows[-1], "source": PEER, "sku": "h200-peer-only"})
    ingest(engine, settings, CrawlResult(source=PEER, records=peers))


PEER = "skypilot:acme"


def _full_sort(conn: Any, filters: OfferFilters, descending: bool) -> list[int]:
    """Every match, sorted in Python by (key, id): what any page must agree with."""
    unfiltered = OfferFilters(include_peers=filters.include_peers)
    every = list_offers(conn, unfiltered, 1000, sort="price_per_gpu_hour")
    kept = {r["id"] for r in list_offers(conn, filters, 1000, sort="provider")}
    keyed = [r for r in every if r["id"] in kept and r["sort_value"] is not None]
    rows = list_offers(conn, filters, 1000, sort="price_per_pflop_hour", descending=descending)
    by_id = {r["id"]: r["sort_value"] for r in rows}
    assert set(by_id) == kept
    ordered = sorted((r for r in keyed if by_id[r["id"]] is not None), key=lambda r: r["id"])
    ordered.sort(key=lambda r: by_id[r["id"]], reverse=descending)
    return [r["id"] for r in ordered]


def test_the_stated_memory_of_each_model_is_its_offers_largest(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    _catalog(engine, settings)
    # one snapshot for both reads: on PostgreSQL a statement of READ COMMITTED sees a new
    # snapshot whenever any transaction of the server commits (other test workers' too)
    fixed = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
    with engine.connect().execution_options(**fixed) as conn:
        stated = stated_gpu_memory(conn)
        assert stated == {"nvidia-l4-24gb": 96.0, "nvidia-h100-sxm-80gb": 40.0}
        assert stated_gpu_memory(conn) is stated  # cached for this snapshot
    with engine.begin() as conn:  # a withdrawn offer states nothing any more
        conn.execute(update(OFFER).where(OFFER.c.sku == "l4-3").values(status="withdrawn"))
    with engine.connect() as conn:
        assert stated_gpu_memory(conn) == {"nvidia-h100-sxm-80gb": 40.0}


@pytest.mark.parametrize(
    ("floor", "expected"),
    [
        # the L4 stays for its offer stating 96 GB; the L40S goes
        ("80", ["nvidia-h100-sxm-80gb", "nvidia-h200-sxm-141gb", "nvidia-l4-24gb"]),
        ("100", ["nvidia-h200-sxm-141gb"]),
        ("24", [slug for _, slug in MODELS]),
        ("500", []),
    ],
)
def test_the_models_a_memory_floor_leaves(
    engine: Engine, settings: Settings, reference_data: None, floor: str, expected: list[str]
) -> None:
    _catalog(engine, settings)
    with engine.connect() as conn:
        models = offers_module._models(conn, None, None, Decimal(floor))
        assert models is not None
        assert sorted(models) == sorted(expected)
        # what the filter keeps is always among them (a superset is all it must be)
        kept = list_offers(conn, OfferFilters(min_gpu_memory_gb=Decimal(floor)), 1000)
        assert {r["gpu_slug"] for r in kept} <= set(models)
        assert offers_module._models(conn, None, None) is None  # no floor: any model


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("floor", ["48", "80", "141"])
@pytest.mark.parametrize("prefix", [2, 4000])
def test_a_memory_floor_pages_as_the_full_sort(
    engine: Engine,
    settings: Settings,
    reference_data: None,
    monkeypatch: pytest.MonkeyPatch,
    descending: bool,
    floor: str,
    prefix: int,
) -> None:
    """With a walk of two entries the single walk gives up where the L4s lead (the dearest
    first) and the models are walked one by one, or give up in turn (``min_gpus``);
    either way each page, and the next through its cursor, is the full sort's."""
    _catalog(engine, settings)
    monkeypatch.setattr(offers_module, "PREFIX", prefix)
    merged = results_of(monkeypatch, offers_module, "_merged_per_gpu")
    with engine.connect() as conn:
        for least, peers in ((None, False), (Decimal(4), False), (None, True)):
            filters = OfferFilters(
                min_gpu_memory_gb=Decimal(floor), min_gpus=least, include_peers=peers
            )
            compliance = resolve_compliance(conn, filters)
            expected = _full_sort(conn, filters, descending)
            for limit in (1, 3, 5):
                got: list[int] = []
                after = None
                while True:
                    page = list_offers(
                        conn,
                        filters,
                        limit,
                        compliance=compliance,
                        sort="price_per_pflop_hour",
                        descending=descending,
                        after=after,
                    )
                    got += [r["id"] for r in page]
                    if len(page) < limit:
                        break
                    last = page[-1]
                    after = offers_module.After(last["sort_value"], last["id"])
                assert got == expected, (floor, least, peers, limit, descending)
    # the per-model walks were read (SQLite only; at 48 no model is left out)
    walked_per_model = engine.dialect.name == "sqlite" and prefix == 2
    assert bool(merged) == (walked_per_model and floor != "48")
