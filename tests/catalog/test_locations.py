"""Locations of offers quoted for several places (region ``global`` or a group code).

Derivation per basis and its precedence (pure); the filters (country, region, gdpr,
not_country) on SQLite and PostgreSQL for global offers with and without locations; a
capacity change moves locations only; a reference load re-derives them; bad region rows.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, func, select

from schema.alerts import Condition, SubscriptionFilters
from schema.prices import CatalogVersion, Offer, OfferLocation, PriceObservation
from service.alerts.matching import OfferChange, compile_subscription
from service.catalog.ingest import ingest
from service.catalog.locations import (
    Location,
    Place,
    Places,
    derive,
    in_countries,
    outside_countries,
    pick,
)
from service.catalog.reference import read_reference
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.reference_error import ReferenceError
from service.query.filters import ComplianceSets, OfferFilters, resolve_compliance
from service.query.offers import list_offers, offers_query
from tests.support.factories import record

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
LOCATION = OfferLocation.__table__  # type: ignore[attr-defined]

# --------------------------------------------------------------------------- pure derivation

LISTED = Places(
    {
        "FIN-01": Place("FIN-01", "FI", frozenset({"a100"})),
        "FIN-02": Place("FIN-02", "FI", frozenset({"h100", "h200"})),
        "ICE-01": Place("ICE-01", "IS"),  # no gpus field while others list GPUs
        "US-1": Place("US-1", "US", frozenset({"h100"})),
    }
)
UNLISTED = Places({"us-east-1": Place("us-east-1", "US"), "eu-x": Place("eu-x", "DE")})
GROUPED = Places(
    {
        "EAST": Place("EAST", "US", frozenset({"h100"})),
        "WEST": Place("WEST", "US", frozenset({"a100"})),
        "EU": Place("EU", "ES", frozenset({"h100"})),
        "north-america": Place("north-america", "US", members=("EAST", "WEST")),
    }
)


def regions(locations: list[Location]) -> list[tuple[str, str | None, str]]:
    return [(loc.region, loc.country, loc.basis) for loc in locations]


def test_reference_narrowed_by_gpu_family_in_reference_order() -> None:
    assert regions(derive("global", "h100", LISTED)) == [
        ("FIN-02", "FI", "reference"),
        ("US-1", "US", "reference"),
    ]
    # a region without `gpus` is no candidate once any region of the provider lists GPUs
    assert "ICE-01" not in {loc.region for loc in derive("global", "v100", LISTED)}
    assert derive("global", None, LISTED) == []  # an unmapped GPU matches no list


def test_a_known_gpu_no_basis_places_falls_back_to_the_providers_gpu_regions() -> None:
    # v100: no region lists it, no peer row: every region known to run GPUs, weakest basis
    assert regions(derive("global", "v100", LISTED)) == [
        ("FIN-01", "FI", "provider"),
        ("FIN-02", "FI", "provider"),
        ("US-1", "US", "provider"),
    ]
    # peers that place the GPU come first
    peers = [("ICE-01", "IS")]
    assert regions(derive("global", "v100", LISTED, peers=peers)) == [("ICE-01", "IS", "peer")]
    # never for an unmapped GPU, nor inside a group (the group itself is the answer there)
    assert derive("global", None, LISTED) == []
    assert regions(derive("north-america", "l40s", GROUPED)) == [
        ("north-america", "US", "reference")
    ]
    # a provider that lists no GPU region anywhere has nothing to fall back to
    assert derive("global", "v100", Places({"x": Place("x", "US", frozenset())})) == []


def test_without_any_gpu_list_every_region_is_a_candidate() -> None:
    assert regions(derive("global", "b200", UNLISTED)) == [
        ("us-east-1", "US", "reference"),
        ("eu-x", "DE", "reference"),
    ]


def test_the_source_comes_first_then_reference_then_peers() -> None:
    stated = derive("global", "h100", LISTED, stated=["US-1", "nowhere-9", "FIN-01"])
    # the source wins even against the reference's GPU lists; unknown codes keep no country
    assert regions(stated) == [
        ("FIN-01", "FI", "source"),
        ("US-1", "US", "source"),
        ("nowhere-9", None, "source"),
    ]
    # an empty statement (sold out everywhere) says nothing: reference
    assert regions(derive("global", "h100", LISTED, stated=[])) == regions(
        derive("global", "h100", LISTED)
    )
    peers = [("ICE-01", "IS"), ("FIN-01", "FI"), ("ICE-01", "IS")]
    # reference names places for h100: peers are not asked
    assert {loc.basis for loc in derive("global", "h100", LISTED, peers=peers)} == {"reference"}
    # nothing in reference for v100: the peers' regional rows, deduplicated, reference order
    assert regions(derive("global", "v100", LISTED, peers=peers)) == [
        ("FIN-01", "FI", "peer"),
        ("ICE-01", "IS", "peer"),
    ]
    assert derive("global", "v100", Places(), peers=[]) == []  # nobody publishes a place


def test_a_group_stands_for_its_members_or_for_itself() -> None:
    assert regions(derive("north-america", "h100", GROUPED)) == [("EAST", "US", "reference")]
    # no member is known to carry the GPU: somewhere in the group, in its one country
    assert regions(derive("north-america", "l40s", GROUPED)) == [
        ("north-america", "US", "reference")
    ]
    assert derive("EAST", "h100", GROUPED) == []  # a real region is its own place


def test_python_predicates_and_the_shown_location() -> None:
    locations = [("FIN-02", "FI"), ("US-1", "US")]
    assert in_countries(None, locations, {"US"}) and not in_countries(None, locations, {"DE"})
    assert in_countries("DE", [], {"DE"}) and not in_countries("DE", locations, {"FI"})
    assert outside_countries(None, locations, {"FI"})
    assert not outside_countries(None, locations, {"FI", "US"})
    assert outside_countries(None, [], {"FI"})  # place unknown: kept, as before locations
    assert pick(locations) == ("FIN-02", "FI")
    assert pick(locations, countries={"US", "CA"}) == ("US-1", "US")
    assert pick(locations, excluded=["FI"]) == ("US-1", "US")
    assert pick(locations, region="US-1") == ("US-1", "US")
    assert pick([]) is None


def test_alert_filters_use_the_same_definition() -> None:
    change = OfferChange(
        "changed", 1, "datacrunch-web", "datacrunch", "8H100", "global", "on_demand", "hour",
        "nvidia-h100-sxm-80gb", None, Decimal(8), None, None, "USD", Decimal(10), Decimal(1),
        locations=(("FIN-02", "FI"),),
    )  # fmt: skip

    def compiled(**filters: Any) -> Any:
        return compile_subscription(
            1,
            "webhook",
            SubscriptionFilters(**filters),
            Condition(new_offer=True),
            {},
        )

    assert compiled(country="FI").accepts(change)
    assert not compiled(country="DE").accepts(change)
    assert compiled(region="FIN-02").accepts(change)
    assert compiled(region="global").accepts(change)
    assert not compiled(not_country="FI").accepts(change)
    assert compiled(not_country="US").accepts(change)


# --------------------------------------------------------------------------- the database

GLOBAL = {"region": "global", "country": None}


def crawl(engine: Engine, settings: Settings, source: str, items: list[dict[str, Any]]) -> Any:
    result = ingest(engine, settings, CrawlResult(source=source, records=items))
    assert result.status.value == "ok", result.reason
    return result


def located(engine: Engine, sku: str, source: str | None = None) -> list[tuple[str, str, str]]:
    stmt = (
        select(LOCATION.c.region, LOCATION.c.country, LOCATION.c.basis)
        .join(OFFER, OFFER.c.id == LOCATION.c.offer_id)
        .where(OFFER.c.sku == sku)
        .order_by(LOCATION.c.position)
    )
    if source:
        stmt = stmt.where(OFFER.c.source == source)
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(stmt)]  # type: ignore[misc]


@pytest.fixture
def catalog(engine: Engine, settings: Settings, reference_data: None) -> Engine:
    """Reference data, and global offers of providers with and without locations."""
    crawl(
        engine,
        settings,
        "datacrunch-web",
        [
            record(1, provider="datacrunch", source="datacrunch-web", sku="8H100", **GLOBAL),
            # a GPU the catalog does not know: no location, "location not published"
            record(
                2,
                provider="datacrunch",
                source="datacrunch-web",
                sku="1Z9",
                gpu_name_raw="Z9 Accelerator",
                **GLOBAL,
            ),
            # no Verda region lists L40S: somewhere among Verda's GPU regions ("provider")
            record(
                5,
                provider="datacrunch",
                source="datacrunch-web",
                sku="1L40S",
                gpu_name_raw="L40S",
                **GLOBAL,
            ),
        ],
    )
    crawl(
        engine,
        settings,
        "hyperstack-web",
        [record(3, provider="hyperstack", source="hyperstack-web", sku="H100-SXM", **GLOBAL)],
    )
    crawl(
        engine,
        settings,
        "aws",
        [record(4, provider="aws", source="aws", sku="p5", region="eu-central-1", country="DE")],
    )
    return engine


def skus(engine: Engine, settings: Settings, **filters: Any) -> list[str]:
    wanted = OfferFilters(**filters)
    with engine.connect() as conn:
        compliance = resolve_compliance(conn, wanted)
        rows = list_offers(conn, wanted, 100, compliance=compliance)
    return sorted(r["sku"] for r in rows)


def test_filters_match_an_offer_by_its_locations(catalog: Engine, settings: Settings) -> None:
    assert located(catalog, "8H100") == [("FIN-02", "FI", "reference")]
    assert located(catalog, "H100-SXM") == [
        ("CANADA-1", "CA", "reference"),
        ("US-1", "US", "reference"),
    ]
    assert located(catalog, "1Z9") == []
    assert located(catalog, "1L40S") == [
        ("FIN-01", "FI", "provider"),
        ("FIN-02", "FI", "provider"),
        ("FIN-03", "FI", "provider"),
    ]
    every = ["1L40S", "1Z9", "8H100", "H100-SXM", "p5"]
    assert skus(catalog, settings) == every

    assert skus(catalog, settings, country="FI") == ["1L40S", "8H100"]
    assert skus(catalog, settings, country="us") == ["H100-SXM"]
    assert skus(catalog, settings, region="FIN-02") == ["1L40S", "8H100"]
    assert skus(catalog, settings, region="global") == ["1L40S", "1Z9", "8H100", "H100-SXM"]
    assert skus(catalog, settings, gdpr="eu_eea") == ["1L40S", "8H100", "p5"]
    # not_country keeps an offer that can run elsewhere, and one whose place is unknown
    assert skus(catalog, settings, not_country=["FI"]) == ["1Z9", "H100-SXM", "p5"]
    assert skus(catalog, settings, not_country=["CA"]) == every
    assert skus(catalog, settings, not_country=["CA", "US", "DE"]) == ["1L40S", "1Z9", "8H100"]


def test_rows_show_the_matching_location(catalog: Engine) -> None:
    with catalog.connect() as conn:
        [row] = list_offers(conn, OfferFilters(country="US"), 10)
        assert (row["sku"], row["region"], row["country"]) == ("H100-SXM", "global", "US")
        assert row["location_region"] == "US-1"
        assert row["locations"] == [
            {"region": "CANADA-1", "country": "CA", "basis": "reference"},
            {"region": "US-1", "country": "US", "basis": "reference"},
        ]
        by_sku = {r["sku"]: r for r in list_offers(conn, OfferFilters(), 10)}
    first = by_sku["H100-SXM"]
    assert (first["country"], first["location_region"]) == ("CA", "CANADA-1")
    unplaced = by_sku["1Z9"]
    assert (unplaced["country"], unplaced["location_region"], unplaced["locations"]) == (
        None,
        None,
        [],
    )
    assert by_sku["p5"]["locations"] == [] and by_sku["p5"]["country"] == "DE"


def lambda_items(capacity: dict[str, list[str] | None]) -> list[dict[str, Any]]:
    return [
        record(i, provider="lambda", source="lambda", sku=sku, locations=regions, **GLOBAL)
        for i, (sku, regions) in enumerate(sorted(capacity.items()))
    ]


def counts(engine: Engine) -> tuple[int, int, int]:
    with engine.connect() as conn:
        return (
            conn.execute(select(func.count()).select_from(OFFER)).scalar() or 0,
            conn.execute(select(func.count()).select_from(OBS)).scalar() or 0,
            conn.execute(select(func.count()).select_from(VERSION)).scalar() or 0,
        )


def test_capacity_moves_locations_only(engine: Engine, settings: Settings) -> None:
    load_reference(engine, REFERENCE_DIR)
    crawl(engine, settings, "lambda", lambda_items({"h100": ["us-east-1", "europe-central-1"]}))
    assert located(engine, "h100") == [
        ("us-east-1", "US", "source"),
        ("europe-central-1", "DE", "source"),
    ]
    before = counts(engine)
    # an hour later: capacity elsewhere, same price. No offer, observation or version.
    moved = crawl(engine, settings, "lambda", lambda_items({"h100": ["asia-south-1"]}))
    assert moved.catalog_version is None
    assert (moved.added, moved.changed, moved.withdrawn, moved.updated) == (0, 0, 0, 0)
    assert counts(engine) == before
    assert located(engine, "h100") == [("asia-south-1", "IN", "source")]
    # sold out everywhere: the source says nothing, the reference places it (every region)
    crawl(engine, settings, "lambda", lambda_items({"h100": None}))
    assert counts(engine) == before
    places = located(engine, "h100")
    assert {basis for _, _, basis in places} == {"reference"} and len(places) == 18


def edited(tmp_path: Path, change: Callable[[list[dict[str, Any]]], None]) -> Path:
    folder = tmp_path / "reference"
    shutil.copytree(REFERENCE_DIR, folder)
    path = folder / "regions.yaml"
    data = yaml.safe_load(path.read_text())
    change(data["regions"])
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    return folder


def test_reference_load_rederives_locations(
    catalog: Engine, settings: Settings, tmp_path: Path
) -> None:
    def verda_l40s(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row["provider"] == "datacrunch" and row["code"] == "FIN-01":
                row["gpus"] = [*row["gpus"], "l40s"]

    report = load_reference(catalog, edited(tmp_path, verda_l40s))
    assert report.changed["offer_locations"] == 1
    assert located(catalog, "1L40S") == [("FIN-01", "FI", "reference")]
    assert skus(catalog, settings, region="FIN-02") == ["8H100"]
    again = load_reference(catalog, edited(tmp_path / "again", verda_l40s))
    assert again.changed["offer_locations"] == 0  # only changes are written


def region_rows(mutate: Callable[[list[dict[str, Any]]], None]) -> Callable[[Path], Path]:
    def build(tmp_path: Path) -> Path:
        return edited(tmp_path, mutate)

    return build


def _first(owner: str, code: str, **change: Any) -> Callable[[list[dict[str, Any]]], None]:
    def mutate(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row["provider"] == owner and row["code"] == code:
                row.update(change)
                return
        raise AssertionError(f"{owner}/{code} not in regions.yaml")

    return mutate


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_first("datacrunch", "FIN-02", country="XX"), r"row \d+ \(FIN-02\): country: unknown"),
        (_first("datacrunch", "FIN-02", provider="nope"), r"row \d+ \(FIN-02\): unknown provider"),
        (
            _first("datacrunch", "FIN-02", gpus=["h100", "h1000"]),
            r"row \d+ \(datacrunch/FIN-02\): gpus: unknown GPU family 'h1000'",
        ),
        (
            _first("coreweave", "north-america", members=["US-EAST-01", "US-NOWHERE-9"]),
            r"\(coreweave/north-america\): members: 'US-NOWHERE-9' is not a region of coreweave",
        ),
        (
            _first("coreweave", "north-america", members=["US-EAST-01", "EU-SOUTH-03"]),
            r"members: 'EU-SOUTH-03' is in ES, the group says US",
        ),
        (
            _first("coreweave", "north-america", members=[]),
            r"north-america\): members: List should have at least 1 item",
        ),
    ],
)
def test_bad_region_rows_are_named(
    tmp_path: Path, mutate: Callable[[list[dict[str, Any]]], None], message: str
) -> None:
    with pytest.raises(ReferenceError, match=message):
        read_reference(edited(tmp_path, mutate))


PLAN = {
    "sqlite": "EXPLAIN QUERY PLAN ",
    "postgresql": "EXPLAIN ",
}


def test_the_listing_walks_its_index_and_probes_locations_by_index(catalog: Engine) -> None:
    """The default listing with a location filter still walks the price index, and the
    EXISTS for placeless rows probes ix_offer_location_offer_id_country."""
    dialect = catalog.dialect.name
    with catalog.connect() as conn:
        if dialect == "postgresql":  # its tables are nearly empty here: no sequential scans
            conn.exec_driver_sql("SET enable_seqscan = off")
            # nor sorts: with a row or two matching, a bitmap of another index and a sort
            # cost the planner the same (it chose them once, in a full run under load)
            conn.exec_driver_sql("SET enable_sort = off")
        for filters in (OfferFilters(country="FI"), OfferFilters(gdpr="eu_eea")):
            compliance = resolve_compliance(conn, filters)
            stmt = offers_query(filters, dialect, compliance=compliance, nulls=False).limit(50)
            sql = str(stmt.compile(conn, compile_kwargs={"literal_binds": True}))
            plan = "\n".join(str(r[-1]) for r in conn.exec_driver_sql(PLAN[dialect] + sql))
            assert "ix_offer_status_gpu_hour" in plan, plan
            assert "ix_offer_location_offer_id_country" in plan, plan


@pytest.mark.parametrize("jsonl", [False, True])
def test_exports_carry_the_locations_on_every_path(catalog: Engine, jsonl: bool) -> None:
    """CSV / JSON Lines: PostgreSQL's COPY and the Python path write the same bytes, with
    the matching location's country and the location columns."""
    from service.api.routes import export

    compliance = ComplianceSets()
    for filters in (OfferFilters(), OfferFilters(country="US"), OfferFilters(not_country=["CA"])):
        bodies = [
            b"".join(export._text(catalog, filters, compliance, None, jsonl, server=server))
            for server in (True, False)
        ]
        assert bodies[0] == bodies[1]
        text = bodies[0].decode()
        if jsonl:
            rows = [json.loads(line) for line in text.splitlines()]
        else:
            rows = list(csv.DictReader(io.StringIO(text)))
        by_sku = {r["sku"]: r for r in rows}
        h100 = by_sku["H100-SXM"]
        assert h100["region"] == "global"
        assert h100["locations"] == "CANADA-1:CA:reference; US-1:US:reference"
        shown = "US-1" if filters.country or filters.not_country else "CANADA-1"
        assert (h100["location_region"], h100["country"]) == (shown, shown[:2])
        if "p5" in by_sku:  # an offer in one region has no locations
            empty = None if jsonl else ""
            assert by_sku["p5"]["locations"] == empty and by_sku["p5"]["country"] == "DE"


def test_a_global_offer_placed_in_a_region_hides_a_peers_copy_there(
    catalog: Engine, settings: Settings
) -> None:
    """One row per real offer: Verda's own global 8H100, placed at FIN-02, and a peer's
    regional copy of it there are one offer; a copy in a region it is not placed in stays."""
    crawl(
        catalog,
        settings,
        "skypilot:verda",
        [
            record(5, provider="datacrunch", source="skypilot:verda", sku="8H100", region="FIN-02"),
            record(6, provider="datacrunch", source="skypilot:verda", sku="8H100", region="FIN-03"),
        ],
    )
    with catalog.connect() as conn:
        shown = list_offers(conn, OfferFilters(provider=["datacrunch"]), 100)
        every = list_offers(conn, OfferFilters(provider=["datacrunch"], include_peers=True), 100)
    assert sorted((r["source"], r["region"]) for r in shown if r["sku"] == "8H100") == [
        ("datacrunch-web", "global"),
        ("skypilot:verda", "FIN-03"),
    ]
    assert len([r for r in every if r["sku"] == "8H100"]) == 3
