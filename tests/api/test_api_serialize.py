"""The offer listing's plain-dict JSON equals what the response models would write, and the
per-snapshot catalog facts behind it are never stale."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter
from sqlalchemy import Engine, update
from typer.testing import CliRunner

from schema.api import OfferDetail, Page
from schema.compliance import Certification
from service.core.config import Settings, get_settings
from service.query.facts import snapshot_token
from tests.api.test_api_query import seed
from tests.support.api_client import api_client
from tests.support.cli import run

CERT = Certification.__table__  # type: ignore[attr-defined]
PAGE = TypeAdapter(Page[OfferDetail])
OFFER = TypeAdapter(OfferDetail)


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    seed(engine, settings)
    yield from api_client(settings)


LISTINGS: list[dict[str, str]] = [
    {"limit": "1000"},
    {"limit": "5", "sort": "-price", "currency": "usd"},
    {"gpu": "h100", "not_country": "US", "min_gpus": "2", "price_kind": "on_demand"},
    {"gpu": "h100", "sort": "price_per_pflop_hour", "include_peers": "true"},
    {"as_of": "1", "sort": "provider"},
    {"gpu": "no-such-gpu"},
]


def test_listing_body_is_the_models_own_json(client: TestClient) -> None:
    for params in LISTINGS:  # one catalog for all (a seed per case cost more than the checks)
        response = client.get("/v1/offers", params=params)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.headers["etag"] and response.headers["cache-control"]
        # validates against the documented model, and the model writes the very same bytes
        assert PAGE.dump_json(PAGE.validate_json(response.content)) == response.content, params


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


def test_a_cert_filter_follows_a_change_made_elsewhere(client: TestClient, engine: Engine) -> None:
    """The compliance filters' answers are cached per connection while nothing is committed:
    a certificate withdrawn by another connection is gone from the next listing."""

    def providers(scheme: str) -> set[str]:
        body = client.get("/v1/offers", params={"cert": scheme, "limit": 1000}).json()
        return {offer["provider"] for offer in body["data"]}

    for _ in range(2):  # the second asks the cached answer
        assert "aws" in providers("iso27001"), "the reference data certifies aws"
    with engine.begin() as conn:  # another connection than the app's
        conn.execute(update(CERT).where(CERT.c.provider == "aws").values(status="withdrawn"))
    assert "aws" not in providers("iso27001")


def test_snapshot_token_moves_with_every_commit(client: TestClient, engine: Engine) -> None:
    with engine.connect() as conn:  # (the client fixture seeded certifications to touch)
        # nothing committed in between: the same token. On PostgreSQL a commit anywhere in
        # the cluster (another test's database) moves it, rightly: retried for a quiet moment
        for _ in range(20):
            token = snapshot_token(conn)
            conn.rollback()
            again = snapshot_token(conn)
            conn.rollback()
            if again == token:
                break
        assert again == token
        with engine.begin() as other:
            other.execute(update(CERT).values(notes="touched"))
        assert snapshot_token(conn) != token
        conn.rollback()
        own = snapshot_token(conn)
        conn.execute(update(CERT).values(notes="touched again"))
        conn.commit()
        assert snapshot_token(conn) != own  # the connection's own writes count too


CLI_CASES: list[tuple[tuple[str, ...], dict[str, str]]] = [
    ((), {}),
    (
        ("--gpu", "h100", "--sort", "-price", "--currency", "usd"),
        {"gpu": "h100", "sort": "-price", "currency": "usd"},
    ),
    (("--include-peers", "--not-country", "US"), {"include_peers": "true", "not_country": "US"}),
]


def test_the_cli_writes_the_apis_offer_documents(
    client: TestClient,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One serializer: ``gpuatlas offers --format json|jsonl|csv`` and ``GET /v1/offers``
    give the same offers with the same field names, nesting and value text."""
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", settings.database_url)
    get_settings.cache_clear()
    for cli_args, params in CLI_CASES:
        same_documents(client, CliRunner(), cli_args, params)
    get_settings.cache_clear()


def same_documents(
    client: TestClient, runner: CliRunner, cli_args: tuple[str, ...], params: dict[str, str]
) -> None:
    api = client.get("/v1/offers", params={**params, "limit": "50"})
    assert api.status_code == 200, api.text
    documents = api.json()["data"]
    assert documents

    code, out, err = run(runner, "offers", *cli_args, "--limit", "50", "-f", "json")
    assert code == 0, err
    assert json.loads(out) == documents
    code, out, err = run(runner, "offers", *cli_args, "--limit", "50", "-f", "jsonl")
    assert [json.loads(line) for line in out.splitlines()] == documents

    code, out, err = run(runner, "offers", *cli_args, "--limit", "50", "-f", "csv")
    assert code == 0, err
    header, *lines = list(csv.reader(io.StringIO(out)))
    # every field of the document is a column, or dotted columns under it, in its order
    assert list(dict.fromkeys(c.split(".")[0] for c in header)) == list(documents[0])
    for document, line in zip(documents, lines, strict=True):
        assert dict(zip(header, line, strict=True)) == {c: text_of(document, c) for c in header}


def text_of(document: dict[str, Any], column: str) -> str:
    """What a CSV cell must hold, computed independently of the CLI's code: the JSON value's
    text, lists as compact JSON, null (or under a null object) empty."""
    value: Any = document
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, list):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def test_eligible_cli_and_api_bodies_are_one(
    client: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", settings.database_url)
    get_settings.cache_clear()
    api = client.get("/v1/eligible-providers", params={"gpu": "h100", "explain": "true"})
    assert api.status_code == 200, api.text
    code, out, err = run(CliRunner(), "eligible", "--gpu", "h100", "--explain", "-f", "json")
    assert code == 0, err
    assert json.loads(out) == api.json()
    get_settings.cache_clear()
