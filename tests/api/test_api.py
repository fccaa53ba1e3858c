"""The query API's first endpoints: listings, offers, history, versions, health; one error shape."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.support.api_client import api_client
from tests.support.factories import record, records
from tests.support.problems import assert_problem
from tests.support.readonly import unchanged


@pytest.fixture(scope="module")
def client(module_engine: Engine, module_settings: Settings) -> Iterator[TestClient]:
    """One catalog for the module's tests, which only read it (checked after them)."""
    engine, settings = module_engine, module_settings
    recs = records(30, provider="lambda") + [
        record(100, provider="lambda", gpu_name_raw="A100 80GB", country="US", amount="9.99")
    ]
    ingest(engine, settings, CrawlResult(source="acme", records=recs))
    changed = [dict(r) for r in recs]
    changed[0]["amount"] = "21.50"
    ingest(engine, settings, CrawlResult(source="acme", records=changed))
    with unchanged(engine):
        yield from api_client(settings)


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ok" and ready["version"] == 2 and ready["active_offers"] == 31
    assert "acme" in ready["last_crawl_age_seconds"]


def test_listing_filters_sorting_and_exact_money(client: TestClient) -> None:
    body = client.get("/v1/offers", params={"gpu": "h100", "limit": 1000}).json()
    assert body["catalog_version"] == 2
    offers = body["data"]
    assert len(offers) == 30 and all(o["gpu"] == "nvidia-h100-sxm-80gb" for o in offers)
    per_gpu = [float(o["price_per_gpu_hour_usd"]) for o in offers]
    assert per_gpu == sorted(per_gpu)
    first = next(o for o in offers if o["sku"] == "gpu-0")
    assert first["price"] == {"amount": "21.5", "currency": "USD"}  # decimal as string
    assert first["catalog_version"] == 2 and first["crawl_run_id"] > 0
    us = client.get("/v1/offers", params={"country": "US"}).json()["data"]
    assert [o["sku"] for o in us] == ["gpu-100"]


def test_cursor_pages_through_everything_once(client: TestClient) -> None:
    seen, cursor = [], None
    while True:
        params = {"limit": 7, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/offers", params=params).json()
        seen += [o["id"] for o in page["data"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 31


def test_offer_and_history_oldest_first(client: TestClient) -> None:
    offer_id = next(
        o["id"]
        for o in client.get("/v1/offers", params={"limit": 100}).json()["data"]
        if o["sku"] == "gpu-0"
    )
    assert client.get(f"/v1/offers/{offer_id}").json()["price"]["amount"] == "21.5"
    history = client.get(f"/v1/offers/{offer_id}/history").json()
    assert [h["amount"] for h in history] == ["20", "21.5"]
    assert history[0]["valid_to"] == history[1]["valid_from"]
    assert client.get("/v1/versions").json()[0]["id"] == 2
    # an offer that exists, asked for a time before its first price: nothing, not a 404
    before = {"to": "2000-01-01T00:00:00Z"}
    assert client.get(f"/v1/offers/{offer_id}/history", params=before).json() == []
    day = client.get(f"/v1/offers/{offer_id}/history", params={**before, "resolution": "day"})
    assert day.status_code == 200 and day.json()["data"] == []


@pytest.mark.parametrize(
    ("path", "status", "name"),
    [
        ("/v1/offers?limit=0", 422, "limit"),
        ("/v1/offers?limit=5000", 422, "limit"),
        ("/v1/offers?country=Germany", 422, "country"),
        ("/v1/offers?country=ZZ", 422, "country"),  # two letters, no country's
        ("/v1/regions?country=zz", 422, "country"),
        ("/v1/offers?price_kind=forever", 422, "price_kind"),
        ("/v1/offers?cert=iso2701", 422, "cert"),  # a typo: was an empty answer
        ("/v1/eligible-providers?cert=iso27001,soc2", 422, "cert"),
        ("/v1/offers?min_gpus=lots", 422, "min_gpus"),
        ("/v1/offers?min_gpus=1e-99999", 422, "min_gpus"),  # PostgreSQL refused it: a 500
        ("/v1/offers?min_network_gbps=0.000000000001", 422, "min_network_gbps"),
        # an empty filter matched nothing, was ignored, or (source) listed peers' copies
        ("/v1/offers?gpu=%20", 422, "gpu"),
        ("/v1/offers?region=", 422, "region"),
        ("/v1/offers?source=", 422, "source"),
        ("/v1/offers?provider=%20,", 422, "provider"),
        ("/v1/export?cert=", 422, "cert"),
        ("/v1/eligible-providers?not_country=", 422, "not_country"),
        ("/v1/offers?colour=red", 400, "colour"),
        ("/v1/offers?cursor=%%%not-base64", 400, "cursor"),
        ("/v1/offers?cursor=" + "A" * 600, 422, "cursor"),
        ("/v1/offers/999999", 404, None),
        ("/v1/offers/not-a-number", 422, "offer_id"),
        ("/v1/offers/1/history?from=2026-01-01T00:00:00", 422, "from"),
        ("/v1/offers/999999/history", 404, None),
        ("/v1/offers/999999/history?resolution=day", 404, None),
        ("/v1/offers/999999/history?to=2000-01-01T00:00:00Z", 404, None),
        ("/v1/nothing-here", 404, None),
    ],
)
def test_every_error_is_a_problem_document(
    client: TestClient, path: str, status: int, name: str | None
) -> None:
    assert_problem(client.get(path), status, name)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v1/offers?country=DE&country=US", "country"),
        ("/v1/offers?gpu=h100&gpu=a100", "gpu"),
        ("/v1/offers?limit=1&limit=3", "limit"),
        ("/v1/offers?sort=price&sort=-price", "sort"),
        ("/v1/offers?as_of=1&as_of=2", "as_of"),
        ("/v1/eligible-providers?price_kind=spot&price_kind=on_demand", "price_kind"),
        ("/v1/tco?months=1&months=24", "months"),
        ("/v1/export?format=csv&format=jsonl", "format"),
        ("/v1/diff?from=0&from=1", "from"),
        ("/v1/offers/1/history?resolution=day&resolution=week", "resolution"),
        ("/v1/changes.atom?provider=acme&provider=lambda", "provider"),
        ("/v1/regions?country=DE&country=FR", "country"),
    ],
)
def test_a_single_valued_parameter_given_twice_is_refused(
    client: TestClient, path: str, name: str
) -> None:
    """Not answered for its last value (``country=DE&country=US`` listed US offers only)."""
    assert_problem(client.get(path), 422, name)


def test_text_filters_are_read_without_surrounding_spaces(client: TestClient) -> None:
    """``gpu=%20h100`` matched nothing while ``provider=%20lambda`` worked: each text filter
    is read without its surrounding spaces."""
    plain = client.get("/v1/offers?gpu=a100&provider=lambda&source=acme").json()["data"]
    padded = client.get("/v1/offers?gpu=%20a100%20&provider=lambda%20&source=%20acme").json()
    assert plain and [o["id"] for o in padded["data"]] == [o["id"] for o in plain]


def test_list_parameters_may_repeat(client: TestClient) -> None:
    both = client.get("/v1/offers?provider=lambda&provider=nobody&not_country=FR&not_country=JP")
    assert both.status_code == 200, both.text
    assert len(both.json()["data"]) == 31
    compare = client.get("/v1/compare?ids=1&ids=2")
    assert compare.status_code == 200, compare.text


def test_wrong_method_is_a_problem(client: TestClient) -> None:
    response = client.post("/v1/offers")
    assert_problem(response, 405)
    assert response.headers["allow"] == "GET"  # RFC 9110 15.5.6: a 405 names what is allowed


def test_openapi_is_published(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert "/v1/offers" in spec["paths"]


def test_every_endpoint_refuses_a_parameter_it_does_not_define(client: TestClient) -> None:
    """Every operation of /v1 in the OpenAPI document, whatever its method, path or
    authentication: an unknown query parameter is a 400 naming it, never ignored (a new
    endpoint without the check fails here)."""
    paths = client.get("/openapi.json").json()["paths"]
    checked = []
    for template, operations in paths.items():
        if not template.startswith("/v1/"):
            continue
        path = template.format(offer_id=1, slug="x", subscription_id=1, name="acme")
        for method in operations:
            response = client.request(method.upper(), f"{path}?zzz_not_a_parameter=1")
            assert response.status_code == 400, (method, template, response.text)
            assert_problem(response, 400, "zzz_not_a_parameter")
            checked.append(f"{method} {template}")
    assert (
        "post /v1/subscriptions" in checked
        and "delete /v1/subscriptions/{subscription_id}" in checked
    )
    assert len(checked) >= 30


@pytest.mark.parametrize(
    "path",
    ["/healthz", "/v1/offers?limit=2", "/v1/offers/1", "/v1/versions", "/", "/openapi.json"],
)
def test_head_is_the_get_without_its_body(client: TestClient, path: str) -> None:
    """RFC 9110 9.3.2: HEAD answers with the GET's status and headers (it was a 405 on every
    route): the same length, type, validator and caching, and no body."""
    get, head = client.get(path), client.head(path)
    assert head.status_code == get.status_code == 200, head.text
    assert head.content == b""
    for name in ("content-type", "content-length", "etag", "cache-control"):
        assert head.headers.get(name) == get.headers.get(name), name
    if "etag" in get.headers:  # the validator works on HEAD too
        again = client.head(path, headers={"If-None-Match": get.headers["etag"]})
        assert again.status_code == 304 and again.content == b""


def test_head_where_there_is_no_get_or_the_query_is_wrong(client: TestClient) -> None:
    refused = client.head("/v1/sources/acme/run")
    assert refused.status_code == 405 and refused.headers["allow"] == "POST"
    assert refused.content == b""
    unknown = client.head("/v1/offers?colour=red")
    assert unknown.status_code == 400 and unknown.content == b""
    assert unknown.headers["content-type"] == "application/problem+json"


def test_the_openapi_document_offers_what_each_endpoint_accepts(client: TestClient) -> None:
    """Every query parameter the document lists for a /v1 operation is accepted there (the
    listing's filters were listed on /v1/compare, ``as_of`` and ``include_peers`` on the
    overviews, and ``gpu`` on a GPU's overview, each refused with a 400): a tool generated
    from the document sends only what the server takes."""
    paths = client.get("/openapi.json").json()["paths"]
    offered = {
        template: {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
        for template, operations in paths.items()
        for method, op in operations.items()
        if method == "get" and template.startswith("/v1/")
    }
    assert offered["/v1/compare"] == {"ids"}
    assert {"as_of", "include_peers"}.isdisjoint(offered["/v1/overview"])
    assert {"as_of", "include_peers", "gpu"}.isdisjoint(offered["/v1/gpus/{slug}/overview"])
    assert "destination" in offered["/v1/gpus/{slug}/overview"]
    for template, names in offered.items():
        path = template.format(offer_id=1, slug="nvidia-h100-sxm-80gb", subscription_id=1)
        for name in names:
            response = client.get(path, params={name: "x"})
            refused = response.status_code == 400 and "unknown-parameter" in response.text
            assert not refused, (template, name, response.text)
