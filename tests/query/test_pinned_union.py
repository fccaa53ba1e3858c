"""SQLite's sort of every match of a pinned listing as two reads (``service.query.
pinned_union``: the offers unchanged since the version by their stored keys, and those
closed since, by their observation then) gives the rows, keys and order of the plain join
of every offer to its observation at the version, after any cursor, whatever happened
since: repricing, withdrawal, reopening, new offers, attributes changed in place."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, event

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query.filters import OfferFilters, resolve_compliance
from service.query.offers import INTEGER_KEYS, After, offers_query
from service.query.pinned_union import pinned_sorted
from service.query.versions import current_version
from tests.support.factories import record

SORTS = ("price_per_gpu_hour", "price", "price_per_pflop_hour", "gpu_count", "provider")
GPUS = ("H100 SXM", "A10", "L4", "A100 80GB")


def _round(rng: random.Random, n: int) -> dict[str, list[dict[str, Any]]]:
    """Two sources, each offer present with probability 0.8 (so some are withdrawn, some
    reopened, some new), repriced with probability 0.3, its GPU count changed at the same
    price with probability 0.1 (an update in place)."""
    out: dict[str, list[dict[str, Any]]] = {"lambda": [], "runpod": []}
    for i in range(n):
        source = "lambda" if i % 3 else "runpod"
        if rng.random() > 0.8:
            continue
        amount = Decimal(10 + i % 7) + (
            Decimal(rng.randint(0, 99)) / 100 if rng.random() < 0.3 else 0
        )
        out[source].append(
            record(
                i,
                provider=source,
                source=source,
                sku=f"s{i}",
                gpu_name_raw=GPUS[i % len(GPUS)],
                gpu_count=str(rng.choice((1, 2, 8)) if rng.random() < 0.1 else 1 + i % 4),
                country="DE" if i % 2 else "US",
                amount=str(amount),
            )
        )
    return out


def _catalog(
    engine: Engine, settings: Settings, *, seed: int, rounds: int, offers: int
) -> list[int]:
    """``rounds`` crawls of :func:`_round` ingested; the catalog version after each."""
    rng = random.Random(seed)
    versions = []
    for _ in range(rounds):
        for source, rows in _round(rng, offers).items():
            if rows:
                ingest(engine, settings, CrawlResult(source=source, records=rows))
        with engine.connect() as conn:
            versions.append(current_version(conn))
    return versions


def _ids(rows: Any) -> list[tuple[int, Any]]:
    return [(r.id, r.sort_value) for r in rows]


def _both(
    conn: Any,
    filters: OfferFilters,
    version: int,
    compliance: Any,
    sort: str,
    descending: bool,
    after: After | None,
) -> tuple[list[tuple[int, Any]], list[tuple[int, Any]]]:
    """The plain join's (id, key) rows and the two-part read's, for one case."""
    plain = offers_query(
        filters,
        "sqlite",
        version=version,
        compliance=compliance,
        sort=sort,
        descending=descending,
        after=after,
        ids_only=True,
    )
    integer = sort in INTEGER_KEYS
    union = pinned_sorted(filters, version, compliance, sort, descending, after, integer)
    return _ids(conn.execute(plain)), _ids(conn.execute(union))


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_two_reads_give_the_plain_joins_rows_in_order(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    versions = _catalog(engine, settings, seed=31, rounds=5, offers=120)
    filters_list = (
        OfferFilters(include_peers=True),
        OfferFilters(include_peers=True, country="DE"),
        OfferFilters(include_peers=True, min_gpus=Decimal(2), max_price_per_gpu_hour=Decimal(8)),
        OfferFilters(include_peers=True, gdpr="eu_eea", export_destination="CN"),
    )
    checked = 0
    with engine.connect() as conn:
        for version in versions[:-1]:
            for filters in filters_list:
                compliance = resolve_compliance(conn, filters)
                for sort in SORTS:
                    for descending in (False, True):
                        case = (filters, version, compliance, sort, descending)
                        expected, got = _both(conn, *case, None)
                        assert got == expected, (version, sort, filters)
                        for at in expected[::10]:  # from a cursor at every tenth row
                            expected_after, got_after = _both(conn, *case, After(at[1], at[0]))
                            assert got_after == expected_after, (version, sort, at)
                            checked += 1
    assert checked > 500


def _executed(engine: Engine, conn: Any, stmt: Any) -> tuple[str, Any]:
    """The SQL text and parameters ``stmt`` ran with (its lists expanded)."""
    seen: list[tuple[str, Any]] = []

    def keep(*args: Any) -> None:
        seen.append((args[2], args[3]))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        conn.execute(stmt).all()
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    return seen[0]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_unchanged_offers_are_read_from_the_covering_index_alone(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    """The first read holds its filters' and keys' columns and ``last_changed_version`` in
    ``ix_offer_active_filters`` (migration 0029): no table row per offer; the second starts
    from the observations closed since (the partial ``version_to`` index)."""
    versions = _catalog(engine, settings, seed=5, rounds=3, offers=60)
    filters = OfferFilters(include_peers=True, gdpr="eu_eea", not_country=("FR",))
    with engine.connect() as conn:
        compliance = resolve_compliance(conn, filters)
        raw: Any = conn.connection.dbapi_connection
        for sort in SORTS:
            union = pinned_sorted(filters, versions[0], compliance, sort, False, None, False)
            statement, parameters = _executed(engine, conn, union)
            plan = [r[3] for r in raw.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)]
            reads = [p for p in plan if p.startswith(("SCAN offer", "SEARCH offer"))]
            assert "SCAN offer USING COVERING INDEX ix_offer_active_filters" in reads, plan
            assert "SEARCH offer USING INTEGER PRIMARY KEY (rowid=?)" in reads, plan
            assert any("ix_price_observation_version_to" in p for p in plan), plan
