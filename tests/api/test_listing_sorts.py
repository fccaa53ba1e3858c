"""Every sort, both directions: the listing's order is the documented total order (nulls
last, then the key, then the offer id), and paging through it with a cursor returns the
same offers in the same order as one unpaged answer, on SQLite and PostgreSQL.

The catalog is built for ties: few distinct prices, GPU counts and providers, so most
keys are shared by many offers and the offer id decides; some offers have no USD price
(a currency without a rate) or no PFLOPS figure; peers are hidden by default.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Engine, event, select

from schema.catalog import GpuModel
from service.api.main import create_app
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query import offers as offers_module
from service.query.facts import COVERING_READS
from service.query.filters import OfferFilters, resolve_compliance
from service.query.offers import After, list_offers, live_gpu_slugs, offers_query
from service.query.sql import SORT_KEYS
from tests.api.test_api_query import page_all
from tests.support.factories import record

SORTS = [*SORT_KEYS, *(f"-{k}" for k in SORT_KEYS)]
GPUS = ["H100 SXM", "A100 80GB", "L4", "Mystery 9000"]  # the last resolves to no GPU


def _records(provider: str, source: str, n: int, price_shift: int = 0) -> list[dict[str, Any]]:
    return [
        record(
            i,
            provider=provider,
            source=source,
            sku=f"{provider}-{i % 9}",
            gpu_name_raw=GPUS[i % len(GPUS)],
            gpu_count=str([1, 2, 8][i % 3]),
            region=f"{provider}-r{i // 9}",
            country=["DE", "US", "FR"][i % 3],
            price_kind=["on_demand", "spot"][i % 2],
            amount=str(Decimal("2.00") + Decimal((i + price_shift) % 4)),
            currency="XTS" if i % 11 == 5 else "USD",  # XTS: no rate, so no USD price
            bare_metal=[None, True, False][(i // 3) % 3],
        )
        for i in range(n)
    ]


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    for provider, shift in (("lambda", 0), ("aws", 1), ("ovhcloud", 0)):
        records = _records(provider, provider, 36, shift)
        ingest(engine, settings, CrawlResult(source=provider, records=records))
    peer = [dict(r, source="skypilot:lambda", amount="1.00") for r in _records("lambda", "x", 12)]
    ingest(engine, settings, CrawlResult(source="skypilot:lambda", records=peer))
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as test_client:
        test_client.engine = engine  # type: ignore[attr-defined]
        yield test_client


def _tflops(engine: Engine) -> dict[str, Decimal]:
    with engine.connect() as conn:
        rows = conn.execute(select(GpuModel.slug, GpuModel.tflops_bf16))  # type: ignore[call-overload]
        return {slug: Decimal(str(t)) for slug, t in rows if t is not None}


def _key(offer: dict[str, Any], sort: str, tflops: dict[str, Decimal]) -> Any:
    """The sort key of an answer's offer, from the answer (None = no value)."""
    name = sort.removeprefix("-")
    if name == "provider":
        return offer["provider"]
    if name == "gpu_count":
        return Decimal(offer["gpu_count"])
    per_gpu = offer["price_per_gpu_hour_usd"]
    if per_gpu is None:
        return None
    if name == "price":
        return Decimal(per_gpu) * Decimal(offer["gpu_count"])  # instance-hour USD
    if name == "price_per_pflop_hour":
        value = offer["price_per_pflop_hour_usd"]
        return None if value is None else Decimal(value)
    return Decimal(per_gpu)


def _expected(offers: list[dict[str, Any]], sort: str, tflops: dict[str, Decimal]) -> list[int]:
    """Ids in the documented order: keyed offers by key (descending for ``-``) then id,
    then the offers without a key by id."""
    keyed = [(_key(o, sort, tflops), o["id"]) for o in offers]
    present = sorted((k, i) for k, i in keyed if k is not None)
    if sort.startswith("-"):
        present.sort(key=lambda pair: pair[1])
        present.sort(key=lambda pair: pair[0], reverse=True)
    return [i for _, i in present] + sorted(i for k, i in keyed if k is None)


FILTERS: list[dict[str, str]] = [
    {},
    {"include_peers": "true"},
    {"gpu": "h100", "price_kind": "on_demand"},
    {"not_country": "US", "min_gpus": "2"},
    {"provider": "aws,lambda", "max_price_per_gpu_hour": "3"},
]


def test_every_sort_pages_as_it_sorts(client: TestClient, subtests: pytest.Subtests) -> None:
    """One catalog for every sort (a subtest each)."""
    tflops = _tflops(client.engine)  # type: ignore[attr-defined]
    for sort in SORTS:
        with subtests.test(sort=sort):
            _pages_as_it_sorts(client, sort, tflops)


def _pages_as_it_sorts(client: TestClient, sort: str, tflops: dict[str, Decimal]) -> None:
    for params in FILTERS:
        query = {**params, "sort": sort}
        whole = client.get("/v1/offers", params={**query, "limit": 1000}).json()["data"]
        assert whole, query
        if not params:
            assert any(o["price_per_gpu_hour_usd"] is None for o in whole), "some without USD"
            assert any(o["price_per_pflop_hour_usd"] is None for o in whole), "some without PFLOPS"
        ids = [o["id"] for o in whole]
        assert ids == _expected(whole, sort, tflops), query
        # one offer a page crosses every boundary of the full order once; pages of 4 and 7
        # (coprime) cross each filtered order's ties at shifting places, and several rows
        # a page after a cursor: over the whole catalog too, as ``include_peers`` is the
        # whole catalog and its peer rows (so the full order needs no pages of 4 and 7)
        for limit in (1,) if not params else (4, 7):
            assert [o["id"] for o in page_all(client, query, limit=limit)] == ids, (query, limit)
    ties = [_key(o, sort, tflops) for o in whole]
    assert len(set(ties)) < len(ties), "the catalog must hold ties for this sort"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sorts_read_along_indexes_on_sqlite(client: TestClient, subtests: pytest.Subtests) -> None:
    """SQLite plans without statistics alike at any size: no statement of a current page
    scans the offer table or sorts more than a bounded range of it (one catalog, every sort)."""
    engine: Engine = client.engine  # type: ignore[attr-defined]
    assert engine.dialect.name == "sqlite"  # PostgreSQL plans by statistics that vary with size
    for sort in SORTS:
        with subtests.test(sort=sort):
            _reads_along_indexes(engine, sort)


@contextmanager
def recorded(engine: Engine, pattern: str = "") -> Iterator[list[tuple[str, Any]]]:
    """The statements (and parameters) run on ``engine`` in the body, those matching the
    regular expression ``pattern`` (searched; empty: all)."""
    seen: list[tuple[str, Any]] = []
    wanted = re.compile(pattern)

    def keep(_c: Any, _cur: Any, statement: str, parameters: Any, *_: Any) -> None:
        if wanted.search(statement):
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", keep)


def _reads_along_indexes(engine: Engine, sort: str) -> None:
    with recorded(engine) as seen, engine.connect() as conn:
        filters = OfferFilters(gpu="h100") if "pflop" in sort else OfferFilters()
        rows = list_offers(
            conn, filters, 5, sort=sort.removeprefix("-"), descending=sort.startswith("-")
        )
    assert len(rows) == 5
    with engine.connect() as conn:
        raw: Any = conn.connection.dbapi_connection
        for statement, parameters in seen:
            if not re.search(r"FROM offer\b", statement):
                continue
            plan = [r[3] for r in raw.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)]
            reads = [p for p in plan if p.startswith(("SCAN offer ", "SEARCH offer "))]
            assert reads and not [p for p in reads if p.startswith("SCAN")], (statement, plan)
            if "USE TEMP B-TREE FOR ORDER BY" in plan:  # only a bounded range may be sorted
                assert any(mark in reads[0] for mark in ("<", ">", "rowid")), (statement, plan)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("prefix", [1, 4000])
@pytest.mark.parametrize("sort", ["price_per_pflop_hour", "-price_per_pflop_hour"])
@pytest.mark.parametrize("destination", ["DE", "CN"])
def test_a_pflop_page_for_an_export_destination_walks_the_models_it_leaves(
    client: TestClient,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    sort: str,
    prefix: int,
    destination: str,
) -> None:
    """``export_destination=CN`` removes the H100, A100 and L4 (each needs a licence there)
    and leaves the A10: the page is read along the A10's own index, never along the whole
    catalog's (which, the filter having removed the models at its start, it read far for
    nothing). To Germany every model is left: one walk of the whole index, as without the
    filter. Either way it is the page of one full sort, also with the walks bounded to one
    entry so that each falls back to its filters first."""
    a10 = [
        record(i, provider="lambda", source="lambda-a10", sku=f"a10-{i}", gpu_name_raw="A10")
        for i in range(12)
    ]
    ingest(client.engine, settings, CrawlResult(source="lambda-a10", records=a10))  # type: ignore[attr-defined]
    monkeypatch.setattr(offers_module, "PREFIX", prefix)
    engine: Engine = client.engine  # type: ignore[attr-defined]
    filters = OfferFilters(export_destination=destination, price_kind="on_demand")
    with engine.connect() as conn:
        compliance = resolve_compliance(conn, filters)
        expected = _full_sort(conn, filters, sort, 1000, None)
        with recorded(engine) as seen:
            rows = list_offers(
                conn,
                filters,
                30,
                compliance=compliance,
                sort=sort.removeprefix("-"),
                descending=sort.startswith("-"),
            )
        assert [r["id"] for r in rows] == expected[:30]
        models = {r["gpu_slug"] for r in rows if r["sort_value"] is not None}
        raw: Any = conn.connection.dbapi_connection
        indexes = set()
        for statement, parameters in seen:
            if not re.search(r"FROM offer\b", statement):
                continue
            if "pflop_hour_usd_e10" not in statement or "pflop_hour_usd_e10 IS NULL" in statement:
                continue  # not a read of the sort's key, or the offers without one, by id
            plan = " ".join(
                r[3] for r in raw.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
            )
            indexes.update(re.findall(r"USING (?:COVERING )?INDEX (\w+)", plan))
    if destination == "CN":
        assert {"nvidia-l4-24gb", "nvidia-h100-sxm-80gb"} <= compliance.licence_gpus
        assert models == {"nvidia-a10-24gb"}, models
        assert "ix_offer_status_pflop_hour" not in indexes, indexes
        assert "ix_offer_gpu_slug_status_pflop_hour" in indexes, indexes
    else:
        assert not compliance.licence_gpus and len(models) > 1
        assert "ix_offer_status_pflop_hour" in indexes, indexes


FILTERS_FIRST = r"^SELECT offer\.id, [^,]+ AS sort_value\s+FROM offer\b"
"""The read of the filters first (ids and keys only), when a walk gives up."""


SCANNED = "ix_offer_active_filters"
"""The covering index of the filters-first read on SQLite (migration 0028)."""
EVERY_FILTER = [
    OfferFilters(gdpr="adequacy", min_gpus=Decimal(1), provider_hq_not_in=["CN"]),
    OfferFilters(
        max_gpus=Decimal(8),
        min_gpu_memory_gb=Decimal(20),
        not_country=["JP"],
        max_price_per_gpu_hour=Decimal(40),
        price_kind="spot",
        cert=["iso27001"],
    ),
    OfferFilters(
        region="eu-west-1",
        bare_metal=False,
        interconnect=["nvlink"],
        network=["infiniband"],
        min_network_gbps=Decimal(100),
    ),
    OfferFilters(
        country="DE", gpu="h100", provider=["aws", "lambda"], source="aws", export_destination="CN"
    ),
]
"""Between them, every listing filter. The first three sets only test what no index seeks: the
read must find every column they test in the index. The last seeks (the GPU's, the
country's, the identity's index): the planner may take that seek instead (and with
``export_destination=CN`` a USD per PFLOPS-hour page walks each model left on its own)."""


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_filters_first_read_scans_its_covering_index_on_sqlite(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, subtests: pytest.Subtests
) -> None:
    """When a walk gives up (bounded here to one entry), the filters-first read of ids and
    keys reads ``ix_offer_active_filters`` alone, whatever the filters: the index holds
    every column they and the sort keys read (a column it lacked would cost a table row per
    offer), and the ``gdpr`` country list is tested on its entries, not sought in
    ``ix_offer_country`` with a table row per match. No other statement of the page can
    pick the index (its predicate is that read's own), so no other plan changed; its other
    readers name it (the bare-metal probe, the largest memories offers state)."""
    monkeypatch.setattr(offers_module, "PREFIX", 1)
    engine: Engine = client.engine  # type: ignore[attr-defined]
    covering = {re.sub(r":\w+", "?", read) for read in COVERING_READS}  # as executed
    first = [0] * len(EVERY_FILTER)
    for sort in SORTS:
        key, descending = sort.removeprefix("-"), sort.startswith("-")
        for number, filters in enumerate(EVERY_FILTER):
            with subtests.test(sort=sort, filters=number), engine.connect() as conn:
                compliance = resolve_compliance(conn, filters)
                expected = _full_sort(conn, filters, sort, 1000, None)
                with recorded(engine) as seen:
                    rows = list_offers(
                        conn, filters, 3, compliance=compliance, sort=key, descending=descending
                    )
                assert [r["id"] for r in rows] == expected[:3]
                raw: Any = conn.connection.dbapi_connection
                for statement, parameters in seen:
                    plan = [
                        r[3] for r in raw.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
                    ]
                    reads = [p for p in plan if re.match(r"(SCAN|SEARCH) offer\b", p)]
                    if re.search(FILTERS_FIRST, statement):
                        first[number] += 1
                        assert len(reads) == 1, plan  # one read of the offers
                        if number < 3:
                            assert f"USING COVERING INDEX {SCANNED}" in reads[0], plan
                        else:  # a seek, or the index: never the table's rows, every one
                            assert reads[0].startswith("SEARCH") or SCANNED in reads[0], plan
                    elif statement not in covering:  # its other readers name it
                        assert not [p for p in plan if SCANNED in p], (statement, plan)
    assert all(first[:3]), f"no walk gave up under some filters: {first}"


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_filters_first_read_never_walks_a_sort_index_on_postgresql(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, subtests: pytest.Subtests
) -> None:
    """When a walk gives up (bounded here to one entry), the filters go first and their
    matches are sorted: PostgreSQL is given an order no index holds. Asked to avoid sorts,
    it would otherwise walk the sort's index with every filter applied to every entry (as
    it chose to under a LIMIT at 200,000 offers: 392 ms for a hundred matches)."""
    monkeypatch.setattr(offers_module, "PREFIX", 1)
    engine: Engine = client.engine  # type: ignore[attr-defined]
    chosen = [
        OfferFilters(provider=[provider], price_kind="spot", country="FR")
        for provider in ("aws", "lambda")
    ]
    for sort in SORTS:
        with subtests.test(sort=sort), engine.connect() as conn:
            first_reads: list[tuple[str, Any]] = []
            key, descending = sort.removeprefix("-"), sort.startswith("-")
            for filters in chosen:  # one of them, at least, leaves a walk short
                expected = _full_sort(conn, filters, sort, 1000, None)
                with recorded(engine, FILTERS_FIRST) as reads:
                    rows = list_offers(conn, filters, 3, sort=key, descending=descending)
                first_reads += reads
                assert [r["id"] for r in rows] == expected[:3]
            assert first_reads, "no walk gave up"
            conn.exec_driver_sql("SET enable_sort = off")
            for statement, parameters in first_reads:
                plan = "\n".join(
                    str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + statement, parameters)
                )
                assert re.search(r"\bSort\b", plan) and "Presorted" not in plan, plan
            conn.rollback()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("sort", ["price_per_pflop_hour", "price_per_gpu_hour", "-price"])
def test_the_offers_without_a_key_are_read_along_the_sorts_index_on_postgresql(
    client: TestClient, sort: str
) -> None:
    """The offers without a key come last, by id; PostgreSQL is given that order as (key,
    id), which is the sort's index's order from its nulls on, and reads them along it (it
    does not infer the order from ``key IS NULL``: it read every keyless match, probed and
    sorted them, 95-111 ms for a page of 100 at 200,000 offers)."""
    engine: Engine = client.engine  # type: ignore[attr-defined]
    key, descending = sort.removeprefix("-"), sort.startswith("-")
    filters = OfferFilters(provider=["aws", "lambda"])
    with engine.connect() as conn:
        expected = _full_sort(conn, filters, sort, 1000, None)
        with recorded(engine, r"_e10 IS NULL") as unkeyed:
            rows = list_offers(conn, filters, 1000, sort=key, descending=descending)
        assert [r["id"] for r in rows] == expected and unkeyed
        assert any(r["sort_value"] is None for r in rows)  # XTS offers, no USD: no key
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.exec_driver_sql(f"SET {setting} = off")  # tiny tables: as at scale
        index = {"price_per_pflop_hour": "pflop_hour", "price_per_gpu_hour": "gpu_hour"}
        name = f"ix_offer_status_{index.get(key, 'hourly')}"
        for statement, parameters in unkeyed:
            plan = "\n".join(
                str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + statement, parameters)
            )
            assert f"Index Scan using {name} on offer" in plan, plan
            assert not re.search(r"\bSort\b", plan), plan
        conn.rollback()


WALK_FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "gpu": st.sampled_from(["h100", "a100", "l4"]),
        "provider": st.sampled_from([["aws"], ["aws", "lambda"], ["ovhcloud"]]),
        "country": st.sampled_from(["DE", "US"]),
        "not_country": st.sampled_from([["US"], ["DE", "FR"]]),
        "price_kind": st.sampled_from(["on_demand", "spot"]),
        "min_gpus": st.sampled_from([Decimal(2), Decimal(8)]),
        "max_gpus": st.sampled_from([Decimal(1), Decimal(2)]),
        "min_gpu_memory_gb": st.sampled_from([Decimal(40), Decimal(80)]),
        "bare_metal": st.booleans(),
        "max_price_per_gpu_hour": st.sampled_from([Decimal("1.5"), Decimal(2), Decimal(4)]),
        "export_destination": st.sampled_from(["CN", "DE"]),
        "gdpr": st.sampled_from(["eu_eea", "adequacy"]),
        "include_peers": st.just(True),
    },
)


def _full_sort(conn: Any, filters: OfferFilters, sort: str, limit: int, after: Any) -> list[int]:
    """The page as one statement sorting every match (``ORDER BY key IS NULL, key, id``)."""
    compliance = resolve_compliance(conn, filters)
    gpus = live_gpu_slugs(conn, filters.gpu) if filters.gpu else None
    stmt = offers_query(
        filters,
        conn.dialect.name,
        compliance=compliance,
        sort=sort.removeprefix("-"),
        descending=sort.startswith("-"),
        after=after,
        gpus=gpus,
    )
    return [row.id for row in conn.execute(stmt.limit(limit))]


@hsettings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    params=WALK_FILTERS,
    sort=st.sampled_from(SORTS),
    limit=st.integers(1, 12),
    prefix=st.sampled_from([1, 3, 10, 4000]),
    cut=st.integers(0, 30),
)
def test_walked_pages_equal_one_full_sort(
    client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    params: dict[str, Any],
    sort: str,
    limit: int,
    prefix: int,
    cut: int,
) -> None:
    """Every way a current page is read (index walks bounded to ``prefix`` entries, the
    filters first when the bound holds too few matches, per GPU, per value, backwards) gives
    the rows and order of one statement sorting every match, first pages and pages after a
    cursor, whatever the filters keep (often nothing: ``bare_metal``, a low price cap)."""
    monkeypatch.setattr(offers_module, "PREFIX", prefix)
    engine: Engine = client.engine  # type: ignore[attr-defined]
    filters = OfferFilters(**params)
    key, descending = sort.removeprefix("-"), sort.startswith("-")
    with engine.connect() as conn:
        compliance = resolve_compliance(conn, filters)
        expected = _full_sort(conn, filters, sort, 1000, None)
        walked = list_offers(
            conn, filters, limit, compliance=compliance, sort=key, descending=descending
        )
        assert [r["id"] for r in walked] == expected[:limit], (params, sort, prefix)
        if cut >= len(expected) - 1:
            return
        whole = list_offers(
            conn, filters, 1000, compliance=compliance, sort=key, descending=descending
        )
        assert [r["id"] for r in whole] == expected
        mark = whole[cut]
        after = After(mark["sort_value"], mark["id"])
        rest = list_offers(
            conn,
            filters,
            limit,
            compliance=compliance,
            sort=key,
            descending=descending,
            after=after,
        )
        assert [r["id"] for r in rest] == expected[cut + 1 : cut + 1 + limit], (params, sort)
