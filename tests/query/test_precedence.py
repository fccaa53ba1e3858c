"""One row per real offer: the source ranking (pure) and the listing's SQL agree."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from schema.enums import PriceKind
from schema.records import OfferRecord
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query.filters import OfferFilters
from service.query.offers import list_offers, stream_offers
from service.query.precedence import (
    PEER_PRECEDENCE,
    UNKNOWN_PEER_RANK,
    best_sources,
    identity,
    is_first_party,
    one_per_identity,
    source_key,
    source_rank,
)
from service.query.versions import current_version
from tests.support.factories import record


def offer(source: str, **overrides: Any) -> dict[str, Any]:
    base = {
        "source": source,
        "provider": "lambda",
        "sku": "gpu_8x_h100_sxm5",
        "region": "us-east-1",
        "price_kind": "on_demand",
        "unit": "hour",
        "amount": "23.92",
    }
    base.update(overrides)
    return base


def test_first_party_means_no_peer_prefix() -> None:
    assert is_first_party("lambda")
    assert is_first_party("lambda-web")
    assert not is_first_party("skypilot:lambda")
    assert not is_first_party("gpuhunt:lambdalabs")


def test_the_ranking_first_party_then_peers_in_declared_order_then_names() -> None:
    names = ["zz:lambda", "gpuhunt:lambdalabs", "lambda-web", "skypilot:lambda", "lambda"]
    assert sorted(names, key=source_key) == [
        "lambda",
        "lambda-web",
        "skypilot:lambda",
        "gpuhunt:lambdalabs",
        "zz:lambda",
    ]
    assert PEER_PRECEDENCE == ("skypilot", "gpuhunt")
    assert source_rank("zz:lambda") == UNKNOWN_PEER_RANK


def test_every_registered_peer_platform_is_ranked() -> None:
    from crawlers.registry import all_sources

    platforms = {name.split(":", 1)[0] for name in all_sources() if not is_first_party(name)}
    assert platforms and platforms <= set(PEER_PRECEDENCE)


def test_peer_copies_of_a_first_party_offer_are_dropped() -> None:
    first = offer("lambda")
    sky = offer("skypilot:lambda", amount="24.00")
    hunt = offer("gpuhunt:lambdalabs")
    assert one_per_identity([sky, first, hunt]) == [first]


def test_of_two_peers_the_ranked_one_is_kept() -> None:
    sky = offer("skypilot:lambda")
    hunt = offer("gpuhunt:lambdalabs", amount="23.90")
    assert one_per_identity([hunt, sky]) == [sky]
    assert best_sources([hunt, sky]) == {identity(sky): "skypilot:lambda"}
    assert one_per_identity([]) == []


def test_peers_fill_the_gaps() -> None:
    first = offer("lambda")
    other_region = offer("skypilot:lambda", region="europe-central-1")
    other_sku = offer("gpuhunt:lambdalabs", sku="gpu_1x_a10")
    other_kind = offer("skypilot:lambda", price_kind="spot")
    other_provider = offer("skypilot:runpod", provider="runpod")
    kept = [first, other_region, other_sku, other_kind, other_provider]
    assert one_per_identity(kept) == kept


def test_every_offer_of_the_winning_source_is_kept_whatever_its_unit() -> None:
    first = offer("lambda", unit="hour")
    first_monthly = offer("lambda", unit="month", amount="17000")
    web = offer("lambda-web", unit="hour")
    peer = offer("skypilot:lambda", unit="month")
    assert one_per_identity([first, first_monthly, web, peer]) == [first, first_monthly]


@dataclass
class Row:
    source: str
    provider: str
    sku: str
    region: str
    price_kind: PriceKind


def test_objects_records_and_enums_work_like_mappings() -> None:
    record_ = OfferRecord.model_validate(
        {**offer("skypilot:lambda"), "gpu_name_raw": "H100", "gpu_count": "8", "currency": "USD"}
    )
    first = Row("lambda", "lambda", "gpu_8x_h100_sxm5", "us-east-1", PriceKind.on_demand)
    assert identity(record_) == identity(first) == identity(offer("lambda"))
    assert one_per_identity([record_, first]) == [first]
    spot = Row("lambda", "lambda", "gpu_8x_h100_sxm5", "us-east-1", PriceKind.spot)
    assert one_per_identity([record_, spot]) == [record_, spot]


SOURCES = st.sampled_from(
    ["lambda", "lambda-web", "skypilot:lambda", "gpuhunt:lambdalabs", "zz:lambda", "azure"]
)
OFFERS = st.lists(
    st.builds(
        offer,
        SOURCES,
        sku=st.sampled_from(["a", "b"]),
        region=st.sampled_from(["r1", "r2"]),
        price_kind=st.sampled_from(["on_demand", "spot"]),
    ),
    max_size=12,
)


@given(OFFERS)
def test_rule_properties(offers: list[dict[str, Any]]) -> None:
    result = one_per_identity(offers)
    assert [o for o in offers if o in result] == result  # order kept, nothing invented
    assert {identity(o) for o in result} == {identity(o) for o in offers}  # no identity lost
    for o in offers:
        rivals = {p["source"] for p in offers if identity(p) == identity(o)}
        assert (o in result) == (source_key(o["source"]) == min(map(source_key, rivals)))
    assert one_per_identity(result) == result  # idempotent


# --- the same rule in SQL, on the same data (SQLite and PostgreSQL) ------------------------

CATALOG_SOURCES = ["lambda", "lambda-web", "skypilot:lambda", "gpuhunt:lambdalabs", "zz:lambda"]


def _random_catalog(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Each source reports a random subset of a small identity space (two units each)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for source in CATALOG_SOURCES:
        rows = []
        for sku in ("a", "b", "c"):
            for region in ("r1", "r2"):
                for kind in ("on_demand", "spot"):
                    for unit in ("hour", "month"):
                        if rng.random() < 0.35:
                            amount = f"{rng.randint(100, 999) / 100:.2f}"
                            rows.append(
                                record(
                                    provider="lambda",
                                    source=source,
                                    sku=sku,
                                    region=region,
                                    price_kind=kind,
                                    unit=unit,
                                    amount=amount if unit == "hour" else f"{amount}00",
                                )
                            )
        out[source] = rows
    return out


def _ids(rows: list[dict[str, Any]]) -> list[int]:
    return sorted(r["id"] for r in rows)


def test_sql_and_python_rankings_agree(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    rng = random.Random(19)
    for source, rows in _random_catalog(rng).items():
        ingest(engine, settings, CrawlResult(source=source, records=rows))
    with engine.connect() as conn:
        first = current_version(conn)
    for source, rows in _random_catalog(rng).items():  # a second round moves the winners
        ingest(engine, settings, CrawlResult(source=source, records=rows))
    with engine.connect() as conn:
        for version in (None, first):
            everything = list_offers(conn, OfferFilters(include_peers=True), 1000, version=version)
            shown = list_offers(conn, OfferFilters(), 1000, version=version)
            assert len(shown) < len(everything)
            assert _ids(shown) == _ids(one_per_identity(everything))
            streamed = [
                r for part in stream_offers(conn, OfferFilters(), version=version) for r in part
            ]
            assert _ids(streamed) == _ids(shown)


def test_a_placed_global_offer_covers_a_peers_regional_copy() -> None:
    first = {**offer("lambda", region="global"), "location_regions": ["europe-central-1"]}
    copy_there = offer("skypilot:lambda", region="europe-central-1")
    copy_elsewhere = offer("skypilot:lambda", region="us-east-1")
    kept = one_per_identity([first, copy_there, copy_elsewhere])
    assert kept == [first, copy_elsewhere]
    # a placed peer never hides the provider's own regional offer
    peer = {**offer("skypilot:lambda", region="global"), "location_regions": ["us-east-1"]}
    own = offer("lambda", region="us-east-1")
    assert one_per_identity([peer, own]) == [peer, own]
