"""``GET /v1/coverage``: the matrix per provider, its OpenAPI model and its errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.crawl.sources import sync_sources
from tests.support.api_client import api_client
from tests.support.factories import record, records
from tests.support.problems import assert_problem


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    sync_sources(engine)
    first_party = records(6, source="lambda", provider="lambda") + [
        record(50, source="lambda", provider="lambda", gpu_name_raw="RTX 9999", price_kind="spot"),
        record(51, source="lambda", provider="lambda", country=None, region="nowhere"),
    ]
    ingest(engine, settings, CrawlResult(source="lambda", records=first_party))
    peer = records(3, source="skypilot:fluidstack", provider="fluidstack", country="NO")
    ingest(engine, settings, CrawlResult(source="skypilot:fluidstack", records=peer))
    yield from api_client(settings)


def test_one_row_per_provider_with_sources_offers_and_shares(client: TestClient) -> None:
    answer = client.get("/v1/coverage")
    assert answer.status_code == 200
    document = answer.json()
    rows = {r["provider"]: r for r in document["providers"]}
    lambda_ = rows["lambda"]
    assert lambda_["prices"] == "first_party"
    assert lambda_["offers"] == {"total": 8, "by_price_kind": {"on_demand": 7, "spot": 1}}
    assert lambda_["gpu_known_share"] == 0.875  # 7 of 8: "RTX 9999" names no model
    assert lambda_["location_known_share"] == 0.875  # 7 of 8: "nowhere" has no country
    sources = {s["name"]: s for s in lambda_["sources"]}
    assert sources["lambda"]["kind"] == "api" and sources["lambda"]["active_offers"] == 8
    assert sources["lambda"]["last_good_crawl"] is not None
    assert sources["lambda-web"]["kind"] == "page"
    assert sources["lambda-web"]["last_good_crawl"] is None  # never crawled here
    assert sources["skypilot:lambda"]["kind"] == "peer"
    assert next(iter(sources)) == "lambda"  # first-party sources first
    fluidstack = rows["fluidstack"]
    assert fluidstack["prices"] == "peer_only"
    assert fluidstack["offers"]["total"] == 3 and fluidstack["location_known_share"] == 1.0
    assert not fluidstack["certifications_known"]
    assert rows["aws"]["prices"] == "none" and rows["aws"]["gpu_known_share"] is None
    assert rows["aws"]["certifications_known"]
    assert "ecb" not in rows  # an FX feed is no provider's source
    order = [r["prices"] for r in document["providers"]]
    assert order == sorted(order, key=["first_party", "peer_only", "none"].index)
    assert document["totals"] == {
        "providers": len(rows),
        "with_offers": 2,
        "first_party": 1,
        "peer_only": 1,
        "active_offers": 11,
    }
    assert document["catalog_version"] == 2


def test_one_provider(client: TestClient) -> None:
    answer = client.get("/v1/coverage", params={"provider": "fluidstack"})
    assert [r["provider"] for r in answer.json()["providers"]] == ["fluidstack"]


@pytest.mark.parametrize(
    ("query", "status", "name"),
    [
        ("provider=Not%20A%20Slug", 422, "provider"),
        ("provider=" + "a" * 65, 422, "provider"),
        ("providers=cudo", 400, "providers"),
        ("provider=nobody", 404, None),
    ],
)
def test_bad_input_is_a_problem(client: TestClient, query: str, status: int, name: str) -> None:
    body = assert_problem(client.get(f"/v1/coverage?{query}"), status, name)
    if status == 404:
        assert "nobody" in body["detail"]


def test_openapi_documents_the_matrix(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    ok = spec["paths"]["/v1/coverage"]["get"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["$ref"].endswith("/CoverageMatrix")
    provider = spec["components"]["schemas"]["CoverageProvider"]["properties"]
    assert {"sources", "offers", "gpu_known_share", "location_known_share", "prices"} <= set(
        provider
    )
