"""``sort=gpu_count`` under ``min_gpus`` / ``max_gpus``: the counts outside the range are
not walked, so a walk bounded to a few entries finds its page among the counts the filters
keep instead of giving up on the ones they drop. Same rows, same order as the full sort,
through cursors, both directions (SQLite and PostgreSQL)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query import offers as offers_module
from service.query.filters import OfferFilters
from service.query.offers import After, list_offers
from tests.support.factories import record
from tests.support.spy import results_of

COUNTS = ["1", "2", "4", "8"]


def _catalog(engine: Engine, settings: Settings) -> None:
    """Ten offers of each count, in id order 1, 2, 4, 8, 1, 2, ..."""
    rows = [
        record(i, sku=f"sku-{i}", gpu_count=COUNTS[i % 4], amount=str(10 + i)) for i in range(40)
    ]
    ingest(engine, settings, CrawlResult(source="acme", records=rows))


def _pages(conn: Any, filters: OfferFilters, limit: int, descending: bool) -> list[int]:
    got: list[int] = []
    after = None
    while True:
        page = list_offers(
            conn, filters, limit, sort="gpu_count", descending=descending, after=after
        )
        got += [r["id"] for r in page]
        if len(page) < limit:
            return got
        last = page[-1]
        after = After(last["sort_value"], last["id"])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize(
    ("least", "most"), [("2", None), (None, "4"), ("2", "4"), ("3", "7"), ("9", None), ("1.5", "2")]
)
def test_a_count_range_pages_as_the_full_sort_without_reading_the_filters_first(
    engine: Engine,
    settings: Settings,
    reference_data: None,
    monkeypatch: pytest.MonkeyPatch,
    descending: bool,
    least: str | None,
    most: str | None,
) -> None:
    _catalog(engine, settings)
    filters = OfferFilters(
        min_gpus=None if least is None else Decimal(least),
        max_gpus=None if most is None else Decimal(most),
    )
    with engine.connect() as conn:
        every = list_offers(conn, OfferFilters(), 1000, sort="provider")
        kept = [
            r
            for r in every
            if (least is None or r["gpu_count"] >= Decimal(least))
            and (most is None or r["gpu_count"] <= Decimal(most))
        ]
        kept.sort(key=lambda r: r["id"])
        kept.sort(key=lambda r: r["gpu_count"], reverse=descending)
        expected = [r["id"] for r in kept]
        # ten offers a count: a walk of five entries gives up on any count it cannot use
        monkeypatch.setattr(offers_module, "PREFIX", 5)
        first = results_of(monkeypatch, offers_module, "_filtered_first")
        for limit in (1, 3):
            assert _pages(conn, filters, limit, descending) == expected, (limit, least, most)
        assert not first  # the counts the range drops were never walked
