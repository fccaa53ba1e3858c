"""Every price leads to the payload it was read from: the API shows the payload's sha256
and the URL it was fetched at, on the offer, in the listing and in each history point,
for a crawl of one payload and for one of several pages (each price its own page)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, select

import service.query.provenance
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult, Payload
from service.core.config import Settings
from service.query.provenance import with_payloads
from service.query.sql import OBS
from tests.support.api_client import api_client
from tests.support.factories import records
from tests.support.paged import PagedRecords

NOW = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
ONE = Payload("https://one.example/prices", b"the one page", NOW)
PAGES = [Payload(f"https://many.example/p{i}", f"page {i}".encode(), NOW) for i in range(3)]


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    ingest(engine, settings, CrawlResult("one", records(2, source="one"), payloads=[ONE]))
    many = records(6, source="many")
    paged = PagedRecords(many, [p.sha256 for p in PAGES])
    ingest(engine, settings, CrawlResult("many", paged, payloads=PAGES))  # type: ignore[arg-type]
    ingest(engine, settings, CrawlResult("bare", records(1, source="bare")))  # no payload
    yield from api_client(settings)


def test_each_offer_names_its_payload_and_url(client: TestClient) -> None:
    items = client.get("/v1/offers", params={"limit": 100, "include_peers": "true"}).json()["data"]
    seen = {(o["source"], o["raw_payload_sha256"], o["raw_payload_url"]) for o in items}
    assert ("one", ONE.sha256, ONE.url) in seen
    assert {(s, u) for src, s, u in seen if src == "many"} == {(p.sha256, p.url) for p in PAGES}
    assert [(s, u) for src, s, u in seen if src == "bare"] == [(None, None)]
    for offer in items:
        detail = client.get(f"/v1/offers/{offer['id']}").json()
        assert detail["raw_payload_sha256"] == offer["raw_payload_sha256"]
        assert detail["raw_payload_url"] == offer["raw_payload_url"]
        points = client.get(f"/v1/offers/{offer['id']}/history").json()
        assert [(p["raw_payload_sha256"], p["raw_payload_url"]) for p in points] == [
            (offer["raw_payload_sha256"], offer["raw_payload_url"])
        ]


def test_a_page_reads_each_payload_once_in_chunks(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = records(6, source="many")
    ingest(
        engine,
        settings,
        CrawlResult("many", PagedRecords(many, [p.sha256 for p in PAGES]), payloads=PAGES),
    )  # type: ignore[arg-type]
    monkeypatch.setattr(service.query.provenance, "IDS_PER_STATEMENT", 2)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(select(OBS.c.id, OBS.c.payload_id)).mappings()]
        rows += [{"id": -1, "payload_id": None}, {"id": -2}]  # none, and no key at all
        statements.clear()
        with_payloads(conn, rows)
    assert len(statements) == 2  # three payloads, two a statement
    by_url = {p.url: p.sha256 for p in PAGES}
    assert all(by_url[r["raw_url"]] == r["raw_sha256"] for r in rows[:-2])
    assert len({r["raw_url"] for r in rows[:-2]}) == 3
    assert [(r["raw_sha256"], r["raw_url"]) for r in rows[-2:]] == [(None, None)] * 2
