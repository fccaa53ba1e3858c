"""Conditional GETs: an answer's ETag is a digest of its body, so ``If-None-Match`` gets a
304 exactly when the client holds the current bytes — also when the body changed without
a new catalog version (a certificate withdrawn, a source re-confirmed by an unchanged
crawl, a source's next run). SQLite and PostgreSQL, with the response cache on and off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from service.api.conditional import content_etag, matches
from service.api.main import create_app
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.query.versions import current_version
from tests.support.factories import records

LISTING = "/v1/offers?limit=5"


@pytest.fixture
def seeded(engine: Engine, settings: Settings, reference_data: None) -> Engine:
    ingest(engine, settings, CrawlResult(source="acme", records=records(12, provider="lambda")))
    return engine


def _client(settings: Settings, megabytes: int) -> TestClient:
    update = {"scheduler_enabled": False, "response_cache_mb": megabytes}
    return TestClient(create_app(settings.model_copy(update=update)))


@pytest.fixture
def client(seeded: Engine, settings: Settings) -> Iterator[Any]:
    with _client(settings, 64) as test_client:
        yield test_client


@pytest.fixture(params=["cached", "uncached"])
def either(request: pytest.FixtureRequest, seeded: Engine, settings: Settings) -> Iterator[Any]:
    """With the response cache on, and off (every answer computed and hashed afresh)."""
    with _client(settings, 64 if request.param == "cached" else 0) as test_client:
        yield test_client


def revalidate(client: TestClient, url: str, tag: str) -> Any:
    return client.get(url, headers={"If-None-Match": tag})


def version(engine: Engine) -> int:
    with engine.connect() as conn:
        return current_version(conn)


def test_the_tag_is_the_bodys_digest_and_a_match_is_304(either: TestClient) -> None:
    client = either
    first = client.get(LISTING)
    assert first.status_code == 200
    tag = first.headers["etag"]
    assert tag.encode() == content_etag(first.content)
    again = revalidate(client, LISTING, tag)
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == tag
    assert again.headers["cache-control"] == first.headers["cache-control"]
    assert "content-type" not in again.headers
    assert again.headers.get("content-length", "0") == "0"
    # the same answer from the cache (or computed again) has the same tag
    assert client.get(LISTING).headers["etag"] == tag
    # a different question has another body, so another tag
    other = revalidate(client, "/v1/offers?limit=4", tag)
    assert other.status_code == 200 and other.headers["etag"] != tag


def test_if_none_match_forms(client: TestClient) -> None:
    tag = client.get(LISTING).headers["etag"]
    strong = tag.removeprefix("W/")
    for header in ("*", tag, f'"0000", {tag}', strong, f' W/"abc" ,{tag} '):
        assert revalidate(client, LISTING, header).status_code == 304, header
    # malformed, empty, hostile or foreign tags name nothing current: the body comes
    for header in ('"0000"', "", "W/", "garbage,,,", 'W/"' + "f" * 5000 + '"', 'W/"a"\t,"b"'):
        response = revalidate(client, LISTING, header)
        assert response.status_code == 200 and response.json()["data"], header


def test_a_certificate_change_without_a_new_version_is_not_a_304(
    either: TestClient, seeded: Engine
) -> None:
    client = either
    url = "/v1/providers/lambda"
    first = client.get(url)
    assert first.status_code == 200
    before = version(seeded)
    with seeded.begin() as conn:
        changed = conn.execute(
            text(
                "UPDATE certification SET status = 'withdrawn' WHERE id = "
                "(SELECT min(id) FROM certification WHERE provider = 'lambda')"
            )
        )
    assert changed.rowcount == 1
    assert version(seeded) == before  # the catalog did not move
    response = revalidate(client, url, first.headers["etag"])
    assert response.status_code == 200 and response.content != first.content
    assert response.headers["etag"] != first.headers["etag"]


def test_an_unchanged_recrawl_moves_last_confirmed_and_the_tag(
    either: TestClient, seeded: Engine, settings: Settings
) -> None:
    client = either
    first = client.get(LISTING)
    confirmed = {offer["last_confirmed"] for offer in first.json()["data"]}
    before = version(seeded)
    result = ingest(
        seeded, settings, CrawlResult(source="acme", records=records(12, provider="lambda"))
    )
    assert result.catalog_version is None and version(seeded) == before
    response = revalidate(client, LISTING, first.headers["etag"])
    assert response.status_code == 200
    assert {offer["last_confirmed"] for offer in response.json()["data"]} != confirmed


def test_an_ingest_moves_the_tag(client: TestClient, seeded: Engine, settings: Settings) -> None:
    first = client.get(LISTING)
    ingest(seeded, settings, CrawlResult(source="acme", records=records(13, provider="lambda")))
    assert revalidate(client, LISTING, first.headers["etag"]).status_code == 200


def test_only_complete_json_answers_are_tagged(client: TestClient) -> None:
    tag = client.get(LISTING).headers["etag"]
    for url in ("/v1/export?format=csv", "/v1/export?format=jsonl", "/healthz", "/metrics"):
        response = revalidate(client, url, "*")
        assert response.status_code == 200, url
        assert "etag" not in response.headers, url
    missing = revalidate(client, "/v1/offers/999999", "*")
    assert missing.status_code == 404 and "etag" not in missing.headers
    bad = revalidate(client, "/v1/offers?limit=0", tag)
    assert bad.status_code == 422 and "etag" not in bad.headers
    assert client.post("/v1/offers", headers={"If-None-Match": "*"}).status_code == 405


def test_every_json_read_endpoint_is_tagged(client: TestClient) -> None:
    offer_id = client.get(LISTING).json()["data"][0]["id"]
    for url in (
        LISTING,
        f"/v1/offers/{offer_id}",
        f"/v1/offers/{offer_id}/history",
        "/v1/versions",
        "/v1/changes?since=0",
        "/v1/sources",
        "/v1/gpus",
        "/v1/providers",
        "/v1/regions",
        "/v1/eligible-providers?gpu=h100-sxm",
    ):
        response = client.get(url)
        assert response.status_code == 200, (url, response.text)
        tag = response.headers["etag"]
        assert tag.encode() == content_etag(response.content), url
        assert revalidate(client, url, tag).status_code == 304, url


def test_matches_is_strict_about_the_opaque_tag() -> None:
    tag = content_etag(b"{}")
    assert matches(tag, tag) and matches(b"*", tag)
    assert matches(tag.removeprefix(b"W/"), tag)
    assert not matches(tag[:-2] + b'"', tag)
    assert not matches(b"", tag)
    assert not matches(b"W/" + tag, tag)
