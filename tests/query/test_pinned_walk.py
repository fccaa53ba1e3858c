"""A pinned (``as_of``) listing in its default order walks the observations' price index
(``service.query.offers._pinned_walk``): the same pages as sorting every match, on SQLite
and PostgreSQL, and the walk's statements read that index.

The walk's depth (``PREFIX``) is made tiny here so that on a small catalog every outcome
happens: a page found within the first bound, within the widened one, and given up (the
full path then answers), with and without the peer precedence, both directions, cursors,
ties and offers without a USD price."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, event

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.query import offers as offers_module
from service.query.filters import OfferFilters
from service.query.offers import After, list_offers
from tests.query.test_history_reads import build
from tests.support.factories import records
from tests.support.spy import results_of

WALK_STATEMENT = re.compile(r"FROM price_observation\s+(WHERE|CROSS JOIN offer|JOIN LATERAL)")
"""The walk's two statements: the bound, and the bounded walk."""
FILTERS = (
    OfferFilters(),
    OfferFilters(include_peers=True),
    OfferFilters(provider="lambda"),
    OfferFilters(max_price_per_gpu_hour=Decimal("2.7")),
    OfferFilters(region="r3"),
    OfferFilters(price_kind="spot"),  # matches nothing
)


def extend(engine: Engine, settings: Settings) -> None:
    """Peers and ties on top of :func:`build`'s catalog: a peer catalog reporting some of
    acme's offers at other prices (the precedence hides them unless peers are asked for),
    offers all at one price (ties broken by id), and offers in a currency without a rate
    (no USD price: they come last)."""
    peer = records(12, source="skypilot:walk")
    for i, r in enumerate(peer):
        r["amount"] = str(Decimal(r["amount"]) + Decimal(i % 3 - 1))
    assert ingest(engine, settings, CrawlResult(source="skypilot:walk", records=peer)).rejected == 0
    ties = records(9, source="gamma", provider="lambda", amount="21.00")
    for r in ties:
        r["sku"] = f"t-{r['sku']}"
    assert ingest(engine, settings, CrawlResult(source="gamma", records=ties)).rejected == 0
    unpriced = records(3, source="delta", provider="lambda", currency="EUR")
    for r in unpriced:
        r["sku"] = f"u-{r['sku']}"
    assert ingest(engine, settings, CrawlResult(source="delta", records=unpriced)).rejected == 0


@contextmanager
def walk_counted() -> Iterator[dict[str, int]]:
    """Counts the walk's outcomes: a page (``page``) or given up (``full``)."""
    counts = {"page": 0, "full": 0}
    real = offers_module._pinned_walk

    def counted(*args: Any, **kwargs: Any) -> list[int] | None:
        found = real(*args, **kwargs)
        counts["page" if found is not None else "full"] += 1
        return found

    offers_module._pinned_walk = counted  # type: ignore[assignment]
    try:
        yield counts
    finally:
        offers_module._pinned_walk = real  # type: ignore[assignment]


def pages(
    conn: Any,
    filters: OfferFilters,
    version: int,
    descending: bool,
    size: int,
    sort: str = "price_per_gpu_hour",
) -> list[Any]:
    """The first pages of the listing through its cursor (every page of a size-50 one):
    (id, sort value, amount) per row."""
    out: list[Any] = []
    after = None
    for _ in range(6):
        page = list_offers(
            conn, filters, size, version=version, sort=sort, descending=descending, after=after
        )
        out += [(o["id"], o["sort_value"], o["amount"]) for o in page]
        if len(page) < size:
            break
        after = After(page[-1]["sort_value"], page[-1]["id"])
    return out


def test_the_pinned_walk(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One catalog (built in about a second), the walk's checks and the provider reads on it."""
    latest = build(engine, settings)
    extend(engine, settings)
    the_walk_reads_the_price_index(engine, latest)
    the_walk_gives_the_pages_of_the_full_sort(engine, latest, monkeypatch)
    pages_by_provider_are_those_of_the_full_sort(engine, latest, monkeypatch)


PINNED_AT = {
    "first": lambda latest: 1,
    "middle": lambda latest: latest // 2,
    "previous": lambda latest: latest - 1,
    "future": lambda latest: latest + 3,
}
"""The versions a page is pinned to, from the catalog's latest."""


@pytest.mark.parametrize("at", PINNED_AT)
@pytest.mark.parametrize("sort", ["price", "price_per_pflop_hour"])
def test_pinned_pages_from_current_are_those_of_the_full_sort(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch, sort: str, at: str
) -> None:
    """The longest of these checks (80 % of their time), one test a sort and a version so
    that the suite's workers share it (the PostgreSQL one took two minutes of a CI
    worker in one piece); each builds the same catalog."""
    latest = build(engine, settings)
    extend(engine, settings)
    version = PINNED_AT[at](latest)
    pages_from_current_are_those_of_the_full_sort(engine, version, monkeypatch, sort)


def pages_from_current_are_those_of_the_full_sort(
    engine: Engine, version: int, monkeypatch: pytest.MonkeyPatch, sort: str
) -> None:
    """A pinned page sorted by price or USD per PFLOPS-hour, read as the offers unchanged
    since (along the current order, a prefix at a time) merged with those repriced or
    withdrawn since (``_pinned_from_current``), is the page of the full sort: both
    directions, cursors, the peer precedence, ties, offers without a key, filters keeping
    few or none, prefixes of one row and more (read again, 4x longer, when the precedence
    hides rows), and the read given up (the index's first entries short of the page, or
    the limit on prices changed since set low)."""
    outcomes = results_of(monkeypatch, offers_module, "_pinned_from_current")  # None: given up
    full_sort: dict[tuple[Any, ...], list[Any]] = {}  # the reference, read once per case
    with engine.connect() as conn:
        # with one live GPU model (every offer here), the model's own index
        for filters in (*FILTERS, OfferFilters(gpu="h100"), OfferFilters(gpu="a100")):
            for descending in (False, True):
                for size, most, least, prefix in (
                    (1, 20_000, 1, 4000),
                    (3, 20_000, 1, 4000),
                    (3, 20_000, 1, 5),
                    (3, 20_000, 50, 4000),
                    (50, 20_000, 1, 4000),
                    (3, 2, 1, 4000),
                ):
                    monkeypatch.setattr(offers_module, "CLOSED_SINCE_MAX", most)
                    monkeypatch.setattr(offers_module, "FETCH_AT_LEAST", least)
                    monkeypatch.setattr(offers_module, "PREFIX", prefix)
                    read = pages(conn, filters, version, descending, size, sort)
                    case = (version, sort, repr(filters), descending, size)
                    if case not in full_sort:
                        with monkeypatch.context() as off:
                            off.setattr(offers_module, "FROM_CURRENT", frozenset())
                            full_sort[case] = pages(conn, filters, version, descending, size, sort)
                    assert read == full_sort[case], case
    counts = {"page": sum(r is not None for r in outcomes), "full": outcomes.count(None)}
    assert counts["page"] > 100 and counts["full"] > 20, counts  # both ways, at each version


def pages_by_provider_are_those_of_the_full_sort(
    engine: Engine, latest: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pinned page sorted by provider, read one provider at a time
    (``_pinned_by_provider``), is the page of the full sort: both directions, cursors that
    end inside a provider's offers and at its last, filters that keep a provider's offers
    or none of them, and (with one provider read short allowed) the read given up."""
    outcomes = results_of(monkeypatch, offers_module, "_pinned_by_provider")  # None: given up
    chosen = (*FILTERS, OfferFilters(provider=["lambda", "acme"], region="r3"))
    full_sort: dict[tuple[Any, ...], list[Any]] = {}  # the reference, read once per case
    with engine.connect() as conn:
        for version in sorted({1, latest // 2, latest - 1, latest, latest + 3}):
            for filters in chosen:
                for descending in (False, True):
                    for size, short in ((3, 4), (3, 1), (50, 4))[: 3 if version == latest else 2]:
                        monkeypatch.setattr(offers_module, "PINNED_PROVIDERS", short)
                        read = pages(conn, filters, version, descending, size, "provider")
                        case = (version, repr(filters), descending, size)
                        if case not in full_sort:
                            with monkeypatch.context() as off:
                                off.setattr(offers_module, "_pinned_by_provider", lambda *a: None)
                                full_sort[case] = pages(
                                    conn, filters, version, descending, size, "provider"
                                )
                        assert read == full_sort[case], (*case, short)
    counts = {"page": sum(r is not None for r in outcomes), "full": outcomes.count(None)}
    assert counts["page"] > 50 and counts["full"] > 10, counts


def the_walk_gives_the_pages_of_the_full_sort(
    engine: Engine, latest: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offers_module, "PREFIX", 3)
    versions = range(1, latest + 4, 2)
    with engine.connect() as conn, walk_counted() as counts:
        for version in versions:
            for filters in FILTERS:
                for descending in (False, True):
                    for size in (3, 50) if version == latest else (3,):
                        walked = pages(conn, filters, version, descending, size)
                        with monkeypatch.context() as off:
                            off.setattr(offers_module, "PINNED_WALKS", frozenset())
                            sorted_all = pages(conn, filters, version, descending, size)
                        assert walked == sorted_all, (version, filters, descending, size)
    # every outcome happened: pages found by the walk, and walks given up
    assert counts["page"] > 50 and counts["full"] > 50, counts


def the_walk_reads_the_price_index(engine: Engine, latest: int) -> None:
    """The walk's statements (the bound and the bounded walk) read
    ix_price_observation_gpu_hour_key on SQLite (an index on an expression serves only
    that expression, constants included) and ix_price_observation_gpu_hour on PostgreSQL
    (told to avoid sequential scans and sorts: its tables here are tiny)."""
    dialect = engine.dialect.name
    walked: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        # (the full sort's read of the offers closed since is no walk: service.query.pinned_union)
        if WALK_STATEMENT.search(statement) and "pinned_keys" not in statement:
            walked.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        with engine.connect() as conn:
            for filters, descending in (
                (OfferFilters(), False),
                # selective filters with an index of their own: SQLite started from them
                (OfferFilters(provider="lambda", region="r3"), False),
                (OfferFilters(max_price_per_gpu_hour=Decimal("2.7")), True),
            ):
                list_offers(conn, filters, 2, version=latest // 2, descending=descending)
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    index = (
        "ix_price_observation_gpu_hour_key"
        if dialect == "sqlite"
        else "ix_price_observation_gpu_hour"
    )
    assert len(walked) >= 6, walked
    with engine.connect() as conn:
        if dialect == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")
            conn.exec_driver_sql("SET enable_sort = off")
        explain = "EXPLAIN QUERY PLAN " if dialect == "sqlite" else "EXPLAIN "
        for statement, parameters in walked:
            plan = " ".join(str(r) for r in conn.exec_driver_sql(explain + statement, parameters))
            assert index in plan, (statement, plan)
            if dialect == "sqlite":  # in the index's order; only ties are sorted (by offer)
                assert "TEMP B-TREE FOR ORDER BY" not in plan, (statement, plan)


def test_a_merged_page_stops_at_the_last_unchanged_offer_read(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the precedence hides the whole prefix read of the unchanged offers, the page is
    read again with a longer prefix: the offers repriced since that sort after the prefix's
    last row are not the page yet, since an unchanged offer not read may come before them.

    At version 2: acme's gpu-0 at 10, gpu-1 at 20, gpu-2 at 15 (repriced to 100 later), and
    a peer's gpu-0 and gpu-1 at 1 and 2, which acme's outrank. A prefix of two rows holds
    the two peer rows, both hidden; gpu-2 (15, changed since) sorts after them, but acme's
    gpu-0 (10, unchanged) is the first row of the page."""
    load_reference(engine, REFERENCE_DIR)
    acme = records(3, provider="lambda")
    for row, amount in zip(acme, ("10", "20", "15"), strict=True):
        row["amount"] = amount
    assert ingest(engine, settings, CrawlResult(source="acme", records=acme)).rejected == 0
    peer = records(2, source="skypilot:merge", provider="lambda")
    for row, amount in zip(peer, ("1", "2"), strict=True):
        row["amount"] = amount
    assert (
        ingest(engine, settings, CrawlResult(source="skypilot:merge", records=peer)).rejected == 0
    )
    acme[2]["amount"] = "100"
    assert ingest(engine, settings, CrawlResult(source="acme", records=acme)).rejected == 0
    monkeypatch.setattr(offers_module, "FETCH_AT_LEAST", 1)
    with engine.connect() as conn:
        read = pages(conn, OfferFilters(), 2, False, 1, "price")
        with monkeypatch.context() as off:
            off.setattr(offers_module, "FROM_CURRENT", frozenset())
            sorted_all = pages(conn, OfferFilters(), 2, False, 1, "price")
    assert [amount for _, _, amount in sorted_all] == [Decimal(10), Decimal(15), Decimal(20)]
    assert read == sorted_all
