"""A listing filtered to one source: the precedence skipped only where it can hide nothing,
the source's index left aside only where it holds most of the catalog, and the same rows
either way (SQLite and PostgreSQL)."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, event

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query import offers as offers_module
from service.query.filters import OfferFilters
from service.query.offers import list_offers
from service.query.precedence import one_per_identity
from service.query.source_filter import (
    distinct_sources,
    holds_most,
    may_be_outranked,
    providers_of,
)
from service.query.versions import current_version
from tests.support.factories import record

SOURCES = {
    # source: (provider, offers)
    "aws": ("aws", 6),
    "lambda": ("lambda", 8),
    "skypilot:lambda": ("lambda", 8),
    "skypilot:runpod": ("runpod", 5),
    "gpuhunt:lambdalabs": ("lambda", 6),
}


def _catalog(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Each source reports part of its provider's small identity space (peers of one
    provider overlap, so some of their offers are outranked and some are not)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for source, (provider, _) in SOURCES.items():
        rows = []
        for sku in ("a", "b", "c"):
            for region in ("r1", "r2"):
                for kind in ("on_demand", "spot"):
                    if rng.random() < 0.5:
                        rows.append(
                            record(
                                provider=provider,
                                source=source,
                                sku=sku,
                                region=region,
                                price_kind=kind,
                                amount=f"{rng.randint(100, 999) / 100:.2f}",
                                gpu_count=rng.choice(["1", "2", "8"]),
                            )
                        )
        out[source] = rows
    return out


def _load(engine: Engine, settings: Settings, seed: int) -> int:
    """Two rounds of the random catalog; the first round's version."""
    rng = random.Random(seed)
    for source, rows in _catalog(rng).items():
        ingest(engine, settings, CrawlResult(source=source, records=rows))
    with engine.connect() as conn:
        first = current_version(conn)
    for source, rows in _catalog(rng).items():  # winners move, some offers are withdrawn
        ingest(engine, settings, CrawlResult(source=source, records=rows))
    return first


def test_which_sources_the_precedence_can_touch(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    _load(engine, settings, 3)
    with engine.connect() as conn:
        assert distinct_sources(conn) == sorted(SOURCES)
        assert providers_of(conn, "skypilot:lambda") == ["lambda"]
        assert providers_of(conn, "no-such-source") == []
        # first in the ranking, or no source before it shares a provider: nothing hides it
        assert not may_be_outranked(conn, "aws")
        assert not may_be_outranked(conn, "lambda")  # aws ranks before, another provider
        assert not may_be_outranked(conn, "skypilot:runpod")
        assert not may_be_outranked(conn, "no-such-source")
        # a peer of lambda's own offers
        assert may_be_outranked(conn, "skypilot:lambda")
        assert may_be_outranked(conn, "gpuhunt:lambdalabs")


def test_withdrawn_offers_still_count_as_outranking(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    """An as_of listing may show a version where lambda's offers were alive: withdrawn ones
    keep the test in place (never skipped on the current state alone)."""
    own = record(provider="lambda", source="lambda", sku="a", region="r1")
    peer = record(provider="lambda", source="skypilot:lambda", sku="a", region="r1")
    ingest(engine, settings, CrawlResult(source="lambda", records=[own]))
    ingest(engine, settings, CrawlResult(source="skypilot:lambda", records=[peer]))
    with engine.connect() as conn:
        pinned = current_version(conn)
    other = record(provider="lambda", source="lambda", sku="b", region="r2")
    ingest(engine, settings, CrawlResult(source="lambda", records=[other]))  # `a` withdrawn
    with engine.connect() as conn:
        assert may_be_outranked(conn, "skypilot:lambda")
        peer_only = OfferFilters(source="skypilot:lambda")
        assert [r["source"] for r in list_offers(conn, peer_only, 10)] == ["skypilot:lambda"]
        assert list_offers(conn, peer_only, 10, version=pinned) == []


SORTS = ["price_per_gpu_hour", "price", "gpu_count", "provider", "price_per_pflop_hour"]


@pytest.mark.parametrize("seed", [5, 11])
def test_a_source_filtered_listing_is_the_deduplicated_listing_of_that_source(
    engine: Engine, settings: Settings, reference_data: None, seed: int
) -> None:
    """For every source, sort, direction and version: the rows are those of every source's
    listing (``include_peers``) that the pure precedence keeps and that the source
    reports, in the same order."""
    first = _load(engine, settings, seed)
    with engine.connect() as conn:
        for version in (None, first):
            for sort in SORTS:
                for descending in (False, True):
                    shared: dict[str, Any] = {
                        "version": version,
                        "sort": sort,
                        "descending": descending,
                    }
                    everything = list_offers(conn, OfferFilters(include_peers=True), 1000, **shared)
                    kept = {r["id"] for r in one_per_identity(everything)}
                    for source in SOURCES:
                        expected = [
                            r["id"] for r in everything if r["id"] in kept and r["source"] == source
                        ]
                        got = list_offers(conn, OfferFilters(source=source), 1000, **shared)
                        assert [r["id"] for r in got] == expected, (source, sort, version)


def _statements(engine: Engine) -> list[str]:
    seen: list[str] = []

    def record_statement(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", record_statement)
    return seen


def test_a_source_holding_most_of_the_catalog_is_tested_not_sought(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    big = [record(i, provider="lambda", source="lambda", sku=f"s{i}") for i in range(40)]
    small = [record(i, provider="runpod", source="runpod", sku=f"s{i}") for i in range(6)]
    ingest(engine, settings, CrawlResult(source="lambda", records=big))
    ingest(engine, settings, CrawlResult(source="runpod", records=small))
    with engine.connect() as conn:
        assert holds_most(conn, "lambda")
        assert not holds_most(conn, "runpod")
        assert not holds_most(conn, "no-such-source")
    seen = _statements(engine)
    for source, count in (("lambda", 40), ("runpod", 6)):
        for sort in SORTS:
            seen.clear()
            with engine.connect() as conn:
                rows = list_offers(conn, OfferFilters(source=source), 100, sort=sort)
            assert len(rows) == count and {r["source"] for r in rows} == {source}
            unindexed = any("+offer.source" in s for s in seen)
            assert unindexed == (source == "lambda" and engine.dialect.name == "sqlite")


def test_the_shortcuts_change_no_page(
    engine: Engine, settings: Settings, reference_data: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same pages, cursors included, with both shortcuts and with neither."""
    _load(engine, settings, 7)
    filters = OfferFilters(source="lambda", min_gpus=Decimal(2))

    def pages(conn: Any) -> list[list[int]]:
        out = []
        for sort in SORTS:
            out.append([r["id"] for r in list_offers(conn, filters, 3, sort=sort)])
        return out

    with engine.connect() as conn:
        fast = pages(conn)
    monkeypatch.setattr(offers_module, "may_be_outranked", lambda conn, source: True)
    monkeypatch.setattr(offers_module, "holds_most", lambda conn, source: False)
    with engine.connect() as conn:
        assert pages(conn) == fast
