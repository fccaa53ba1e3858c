"""The cluster-fact filters (interconnect=, network=, min_network_gbps=) of the listing,
eligible-providers, tco and export: each answer equals a Python predicate over the
unfiltered listing, for any combination (hypothesis), on SQLite and PostgreSQL; bad values
are 422 problems like every other parameter's.

The catalog mixes facts stated by a source, facts from the shipped reference data
(p5.48xlarge, ND H100 v5, HGX H100 at CoreWeave...), both on one offer, and none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Engine

from schema.enums import Interconnect, Network
from service.api.main import create_app
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.api.test_api_query import page_all
from tests.support.factories import record

INTERCONNECTS = [None, *(k.value for k in Interconnect)]
NETWORKS = [None, *(k.value for k in Network)]
SPEEDS = [None, "25", "100", "400", "1.5", "3200", "0.1"]
REFERENCED = {  # provider -> SKUs the shipped interconnects.yaml knows
    "aws": ["p5.48xlarge", "g5.xlarge", "p3.16xlarge"],
    "azure": ["Standard_ND96isr_H100_v5", "Standard_NC24ads_A100_v4"],
    "coreweave": ["nvidia-hgx-h100"],
}


def _records(provider: str, n: int) -> list[dict[str, Any]]:
    out = []
    known = REFERENCED.get(provider, [])
    for i in range(n):
        facts: dict[str, Any] = {}
        if i % 4:  # every fourth states nothing: reference or unknown
            facts = {
                "interconnect": INTERCONNECTS[i % len(INTERCONNECTS)],
                "network": NETWORKS[(i // 2) % len(NETWORKS)],
                "network_gbps": SPEEDS[(i // 3) % len(SPEEDS)],
                "interconnect_gbps": ["900", None][i % 2],
            }
        sku = known[i % len(known)] if known and i % 3 == 0 else f"{provider}-{i % 11}"
        out.append(
            record(
                i,
                provider=provider,
                source=provider,
                sku=sku,
                region=f"{provider}-r{i}",
                gpu_name_raw=["H100 SXM", "A100 80GB", "L4"][i % 3],
                **{k: v for k, v in facts.items() if v is not None},
            )
        )
    return out


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    for provider in ("aws", "azure", "coreweave", "lambda"):
        ingest(engine, settings, CrawlResult(source=provider, records=_records(provider, 44)))
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as test_client:
        yield test_client


def _kind(offer: dict[str, Any], fact: str) -> str | None:
    value = offer[fact]
    return None if value is None else value["kind"]


def _speed(offer: dict[str, Any]) -> Decimal | None:
    value = offer["network"]
    if value is None or value["gbps_per_node"] is None:
        return None
    return Decimal(value["gbps_per_node"])


def matches(offer: dict[str, Any], params: dict[str, Any]) -> bool:
    """The documented meaning of the three filters, over an offer of the listing."""
    if "interconnect" in params and _kind(offer, "interconnect") not in params["interconnect"]:
        return False
    if "network" in params and _kind(offer, "network") not in params["network"]:
        return False
    if "min_network_gbps" in params:
        speed = _speed(offer)
        if speed is None or speed < Decimal(params["min_network_gbps"]):
            return False
    return True


FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "interconnect": st.lists(
            st.sampled_from([k.value for k in Interconnect]), min_size=1, max_size=3
        ),
        "network": st.lists(st.sampled_from([k.value for k in Network]), min_size=1, max_size=3),
        "min_network_gbps": st.sampled_from(
            ["0", "0.1", "1", "25", "100", "399.99", "400", "3200"]
        ),
    },
)


def _query(params: dict[str, Any], comma: bool) -> dict[str, Any]:
    """The filters as a query: lists repeated, or comma-separated when ``comma``."""
    return {k: (",".join(v) if comma and isinstance(v, list) else v) for k, v in params.items()}


@hsettings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=FILTERS, comma=st.booleans())
def test_listing_eligible_and_export_equal_the_predicate(
    client: TestClient, params: dict[str, Any], comma: bool
) -> None:
    everything = page_all(client, {}, limit=1000)
    expected = {o["id"] for o in everything if matches(o, params)}
    query = _query(params, comma)

    listed = page_all(client, query, limit=1000)
    assert {o["id"] for o in listed} == expected
    assert len(listed) == len(expected)

    eligible = client.get("/v1/eligible-providers", params=query)
    assert eligible.status_code == 200, eligible.text
    providers = {o["provider"] for o in everything if o["id"] in expected}
    assert {row["provider"] for row in eligible.json()["data"]} == providers

    exported = client.get("/v1/export", params={**query, "format": "jsonl"})
    assert exported.status_code == 200, exported.text
    rows = [json.loads(line) for line in exported.text.splitlines() if line]
    assert {row["id"] for row in rows} == expected
    by_id = {o["id"]: o for o in everything}
    for row in rows:  # the export's flat columns say what the listing's objects say
        offer = by_id[row["id"]]
        assert (row["interconnect"], row["network"]) == (
            _kind(offer, "interconnect"),
            _kind(offer, "network"),
        )
        speed = _speed(offer)
        assert (row["network_gbps_per_node"] is None) == (speed is None)
        if speed is not None:
            assert Decimal(row["network_gbps_per_node"]) == speed


def test_the_catalog_has_every_kind_of_fact_and_tco_takes_the_filters(
    client: TestClient,
) -> None:
    offers = page_all(client, {}, limit=1000)
    bases = {
        (o[f]["kind_basis"], o[f]["gbps_basis"])
        for o in offers
        for f in ("interconnect", "network")
        if o[f]
    }
    assert ("reference", "reference") in bases and ("source", "source") in bases
    assert ("reference", "source") in bases  # a source speed on a reference kind
    assert any(o["interconnect"] is None and o["network"] is None for o in offers)
    p5 = next(
        o
        for o in offers
        if o["sku"] == "p5.48xlarge" and o["interconnect"]["kind_basis"] == "reference"
    )
    assert p5["network"]["kind"] == "efa" and p5["interconnect"]["kind"] == "nvswitch"
    base = {"gpu": "h100", "gpu_count": "8", "hours_per_month": "730", "months": "12"}
    wide = client.get("/v1/tco", params=base)
    narrow = client.get(
        "/v1/tco", params={**base, "network": "infiniband,efa", "min_network_gbps": "400"}
    )
    assert wide.status_code == narrow.status_code == 200, narrow.text
    offers = page_all(
        client, {"gpu": "h100", "network": "infiniband,efa", "min_network_gbps": "400"}, 1000
    )
    providers = {o["provider"] for o in offers}
    assert {row["provider"] for row in narrow.json()["data"]} <= providers
    assert {row["provider"] for row in narrow.json()["data"]} <= {
        row["provider"] for row in wide.json()["data"]
    }


BAD_VALUES: list[tuple[dict[str, str], str | None]] = [
    ({"interconnect": "nvlink5"}, "interconnect"),
    ({"interconnect": "nvlink,"}, None),  # an empty part is ignored
    ({"interconnect": "NVSwitch"}, None),  # words are case-insensitive
    ({"network": "infiniband,token-ring"}, "network"),
    ({"network": "x" * 5000}, "network"),
    ({"min_network_gbps": "-1"}, "min_network_gbps"),
    ({"min_network_gbps": "fast"}, "min_network_gbps"),
    ({"min_network_gbps": "NaN"}, "min_network_gbps"),
    ({"min_network_gbps": "1e400"}, "min_network_gbps"),
    ({"min_network_gbps": "1000001"}, "min_network_gbps"),
]


def test_bad_values_are_problems(client: TestClient) -> None:
    for params, name in BAD_VALUES:
        for path in ("/v1/offers", "/v1/eligible-providers", "/v1/export", "/v1/tco"):
            response = client.get(
                path, params={**params, "gpu_count": "8"} if path == "/v1/tco" else params
            )
            if name is None:
                assert response.status_code == 200, (path, params, response.text)
                continue
            assert response.status_code == 422, (path, params, response.text)
            assert response.headers["content-type"].startswith("application/problem+json")
            body = response.json()
            assert name in {p["name"] for p in body["invalid_params"]}, body
