"""Subscriptions over HTTP: API keys, strict bodies, problem documents, Atom feeds."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.alerts.keys import create_api_key
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.support.api_client import api_client
from tests.support.factories import records

A = "{http://www.w3.org/2005/Atom}"


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    yield from api_client(settings)


def auth(engine: Engine) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_api_key(engine, 'api test').key}"}


def problem(response, status: int) -> dict:  # type: ignore[no-untyped-def,type-arg]
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()  # type: ignore[no-any-return]


def test_keys_are_required(client: TestClient, engine: Engine) -> None:
    body = {"channel": "atom", "condition": {"new_offer": True}}
    problem(client.post("/v1/subscriptions", json=body), 401)
    problem(client.get("/v1/subscriptions", headers={"X-API-Key": "gpa_nope_nope"}), 401)
    key = create_api_key(engine, "x").key
    ok = client.post("/v1/subscriptions", json=body, headers={"X-API-Key": key})
    assert ok.status_code == 201, ok.text


def test_create_list_events_delete(client: TestClient, engine: Engine, settings: Settings) -> None:
    headers = auth(engine)
    body = {
        "name": "cheap <H100> & co",
        "channel": "atom",
        "filters": {"gpu": "H100", "country": "de", "max_gpus": 8},
        "condition": {"new_offer": True},
    }
    created = client.post("/v1/subscriptions", json=body, headers=headers)
    assert created.status_code == 201, created.text
    sub = created.json()
    assert sub["secret"] and sub["filters"] == {"gpu": "h100", "country": "DE", "max_gpus": "8"}
    listed = client.get("/v1/subscriptions", headers=headers).json()
    assert [s["id"] for s in listed] == [sub["id"]] and "secret" not in listed[0]
    problem(client.get(f"/v1/subscriptions/{sub['id']}", headers=auth(engine)), 404)  # not yours
    ingest(engine, settings, CrawlResult(source="acme", records=records(3)))
    events = client.get(f"/v1/subscriptions/{sub['id']}/events", headers=headers).json()
    assert len(events) == 3 and {e["event_type"] for e in events} == {"new_offer"}
    older = client.get(
        f"/v1/subscriptions/{sub['id']}/events?before={events[0]['id']}", headers=headers
    ).json()
    assert [e["id"] for e in older] == [e["id"] for e in events[1:]]
    for before in ("0", str(2**31), "99999999999999999999"):  # the last two were a 500
        path = f"/v1/subscriptions/{sub['id']}/events?before={before}"
        assert problem(client.get(path, headers=headers), 422)["invalid_params"][0]["name"] == (
            "before"
        )
    feed = client.get(f"/v1/subscriptions/{sub['id']}/feed.atom?token={sub['secret']}")
    assert feed.headers["content-type"].startswith("application/atom+xml")
    root = ET.fromstring(feed.content)
    assert root.tag == f"{A}feed" and "<H100> & co" in root.findtext(f"{A}title", "")
    for name in ("id", "title", "updated"):
        assert root.findtext(f"{A}{name}")
    entries = root.findall(f"{A}entry")
    assert len(entries) == 3
    for entry in entries:
        for name in ("id", "title", "updated", "content"):
            assert entry.findtext(f"{A}{name}")
        assert entry.find(f"{A}link").get("href", "").startswith("http")  # type: ignore[union-attr]
    problem(client.get(f"/v1/subscriptions/{sub['id']}/feed.atom?token=wrong"), 401)
    assert client.delete(f"/v1/subscriptions/{sub['id']}", headers=headers).status_code == 204
    problem(client.get(f"/v1/subscriptions/{sub['id']}", headers=headers), 404)


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ({"channel": "atom", "condition": {"new_offer": True}, "filters": {"colour": "x"}}, None),
        ({"channel": "atom", "condition": {"new_offer": True}, "extra": 1}, None),
        ({"channel": "atom", "condition": {}}, None),
        ({"channel": "atom", "condition": {"price_drop_pct": 5, "new_offer": True}}, None),
        ({"channel": "atom", "condition": {"price_drop_pct": -5}}, None),
        ({"channel": "webhook", "condition": {"new_offer": True}}, None),
        ({"channel": "pigeon", "condition": {"new_offer": True}}, None),
        (
            {
                "channel": "atom",
                "condition": {"new_offer": True},
                "filters": {"min_gpus": 9, "max_gpus": 1},
            },
            None,
        ),
        (
            {"channel": "webhook", "condition": {"new_offer": True}, "url": "http://10.0.0.1/"},
            "url",
        ),
        ({"channel": "webhook", "condition": {"new_offer": True}, "url": "gopher://x/"}, "url"),
        (  # a public address, but a URL delivery could never send (it stopped the dispatcher)
            {
                "channel": "webhook",
                "condition": {"new_offer": True},
                "url": "http://93.184.215.14/\t",
            },
            "url",
        ),
        (  # two letters, but no country's: the alert could never fire
            {"channel": "atom", "condition": {"new_offer": True}, "filters": {"country": "ZZ"}},
            "filters.country",
        ),
        (
            {"channel": "atom", "condition": {"new_offer": True}, "filters": {"not_country": "qq"}},
            "filters.not_country",
        ),
        # a NUL was a 500 on PostgreSQL (text cannot hold it); control characters and
        # bidirectional overrides are refused as in offer records
        ({"channel": "atom", "condition": {"new_offer": True}, "name": "a\x00b"}, "name"),
        ({"channel": "atom", "condition": {"new_offer": True}, "name": "x\u202ey"}, "name"),
        (
            {"channel": "atom", "condition": {"new_offer": True}, "filters": {"region": "eu\x00"}},
            "filters.region",
        ),
        (  # more decimal places than the database keeps
            {"channel": "atom", "condition": {"new_offer": True}, "filters": {"min_gpus": "1e-99"}},
            "filters.min_gpus",
        ),
        (
            {"channel": "atom", "condition": {"below_usd_per_gpu_hour": "0.000000000001"}},
            "condition.below_usd_per_gpu_hour",
        ),
    ],
)
def test_bad_bodies_are_problems(
    client: TestClient, engine: Engine, body: dict[str, object], name: str | None
) -> None:
    doc = problem(client.post("/v1/subscriptions", json=body, headers=auth(engine)), 422)
    assert doc["invalid_params"]
    if name:
        assert doc["invalid_params"][0]["name"] == name


def test_malformed_and_oversize_bodies(client: TestClient, engine: Engine) -> None:
    headers = {**auth(engine), "Content-Type": "application/json"}
    problem(client.post("/v1/subscriptions", content=b"{not json", headers=headers), 422)
    big = b'{"name": "' + b"x" * 70000 + b'"}'
    problem(client.post("/v1/subscriptions", content=big, headers=headers), 413)


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ({"name": "a\x00b"}, "name"),
        ({"filters": {"region": "eu\x00west"}}, "filters.region"),
        ({"filters": {"gpu": "h100", "provider": "\x00"}}, "filters.provider"),
    ],
)
def test_nul_characters_in_a_body_are_refused(
    client: TestClient, engine: Engine, body: dict[str, object], name: str
) -> None:
    """Refused like a NUL in a query parameter (PostgreSQL text cannot hold one: it was a 500
    there, and a filter no offer could ever match on SQLite)."""
    body = {"channel": "atom", "condition": {"new_offer": True}, **body}
    doc = problem(client.post("/v1/subscriptions", json=body, headers=auth(engine)), 422)
    assert doc["invalid_params"] == [{"name": name, "reason": "contains a NUL character"}]


def test_changes_feed(client: TestClient, engine: Engine, settings: Settings) -> None:
    items = records(4)
    for i, item in enumerate(items):
        item["sku"] = f"gpu-{i}-<b>&"
    ingest(engine, settings, CrawlResult(source="acme", records=items))
    changed = [dict(r) for r in items[:3]]
    changed[0]["amount"] = "12.5"
    ingest(engine, settings, CrawlResult(source="acme", records=changed))
    response = client.get("/v1/changes.atom?provider=acme&limit=50")
    assert response.status_code == 200, response.text
    root = ET.fromstring(response.content)
    titles = [e.findtext(f"{A}title", "") for e in root.findall(f"{A}entry")]
    assert len(titles) == 6  # 4 new prices, 1 change, 1 withdrawal
    assert titles[0].startswith(("Price ", "Withdrawn")) and any("<b>&" in t for t in titles)
    assert any(t.startswith("Withdrawn") for t in titles)
    none = ET.fromstring(client.get("/v1/changes.atom?country=FR").content)
    assert none.findall(f"{A}entry") == []
    problem(client.get("/v1/changes.atom?colour=red"), 400)
    problem(client.get("/v1/changes.atom?min_gpus=lots"), 422)
    problem(client.get("/v1/changes.atom?country=ZZ"), 422)
    # More decimal places than the database keeps: PostgreSQL refused the query (a 500).
    tiny = problem(client.get("/v1/changes.atom?min_gpus=1e-99999"), 422)
    assert tiny["invalid_params"][0]["name"] == "min_gpus"
    problem(client.get("/v1/changes.atom?max_price_per_gpu_hour=0.000000000001"), 422)


def test_atom_survives_hostile_strings() -> None:
    from datetime import UTC, datetime

    from service.alerts.atom import Entry, build_feed

    nasty = "</title><script>alert(1)</script>&amp;\x00\x1b]]>\ud800"
    body = build_feed(
        feed_id="tag:x,2025:t",
        title=nasty,
        self_url="http://h/?a=1&b=<2>",
        alternate_url="http://h/",
        updated=datetime(2025, 1, 1, tzinfo=UTC),
        entries=[
            Entry("tag:x,2025:e", nasty, datetime(2025, 1, 1, tzinfo=UTC), "http://h/", nasty)
        ],
    )
    root = ET.fromstring(body)
    assert "<script>" in root.findtext(f"{A}title", "")
    assert root.findtext(f"{A}entry/{A}content", "").startswith("</title>")
