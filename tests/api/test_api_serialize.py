"""The offer listing's plain-dict JSON equals what the response models would write, and the
per-snapshot catalog facts behind it are never stale."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter
from sqlalchemy import Engine, update

from schema.api import OfferDetail, Page
from schema.compliance import Certification
from service.core.config import Settings
from service.query.facts import snapshot_token
from tests.api.test_api_query import seed
from tests.support.api_client import api_client

CERT = Certification.__table__  # type: ignore[attr-defined]
PAGE = TypeAdapter(Page[OfferDetail])
OFFER = TypeAdapter(OfferDetail)


@pytest.fixture
def client(engine: Engine, settings: Settings) -> Iterator[TestClient]:
    seed(engine, settings)
    yield from api_client(settings)


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "1000"},
        {"limit": "5", "sort": "-price", "currency": "usd"},
        {"gpu": "h100", "not_country": "US", "min_gpus": "2", "price_kind": "on_demand"},
        {"gpu": "h100", "sort": "price_per_pflop_hour", "include_peers": "true"},
        {"as_of": "1", "sort": "provider"},
        {"gpu": "no-such-gpu"},
    ],
)
def test_listing_body_is_the_models_own_json(client: TestClient, params: dict[str, Any]) -> None:
    response = client.get("/v1/offers", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["etag"] and response.headers["cache-control"]
    # validates against the documented model, and the model writes the very same bytes
    assert PAGE.dump_json(PAGE.validate_json(response.content)) == response.content


def test_one_offer_body_is_the_models_own_json(client: TestClient) -> None:
    first = client.get("/v1/offers", params={"limit": 1}).json()["data"][0]
    for params in ({}, {"currency": "USD"}):
        response = client.get(f"/v1/offers/{first['id']}", params=params)
        assert response.status_code == 200, response.text
        assert response.headers["etag"]
        assert OFFER.dump_json(OFFER.validate_json(response.content)) == response.content


def test_certifications_follow_a_change_made_elsewhere(client: TestClient, engine: Engine) -> None:
    def schemes() -> set[str]:
        body = client.get("/v1/offers", params={"provider": "aws", "limit": 1}).json()
        return {c["scheme"] for c in body["data"][0]["certifications"]}

    before = schemes()
    assert before, "the reference data certifies aws"
    with engine.begin() as conn:  # another connection than the app's
        conn.execute(update(CERT).where(CERT.c.provider == "aws").values(status="withdrawn"))
    assert schemes() == set()


def test_snapshot_token_moves_with_every_commit(client: TestClient, engine: Engine) -> None:
    with engine.connect() as conn:  # (the client fixture seeded certifications to touch)
        token = snapshot_token(conn)
        conn.rollback()
        assert snapshot_token(conn) == token  # nothing committed in between
        conn.rollback()
        with engine.begin() as other:
            other.execute(update(CERT).values(notes="touched"))
        assert snapshot_token(conn) != token
        conn.rollback()
        own = snapshot_token(conn)
        conn.execute(update(CERT).values(notes="touched again"))
        conn.commit()
        assert snapshot_token(conn) != own  # the connection's own writes count too
