"""CSV and JSON Lines exports write the same values on every backend: awkward text quoted,
booleans as true/false, timestamps as aware ISO 8601 (SQLite once wrote its stored text)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.catalog.fx import Rate, store_rates
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.support.api_client import api_client
from tests.support.factories import record, records

AWKWARD = ["plain", "with,comma", 'with "quotes"', "two\nlines", "carriage\rreturn", " spaced "]


def awkward_catalog(engine: Engine, settings: Settings) -> None:
    records = [
        record(
            i,
            sku=f"{text}-{i}",
            gpu_name_raw=text if i % 2 else "H100 SXM",
            source_url=f'https://example.com/p?a={i},b="{text}"',
            bare_metal=(None, True, False)[i % 3],
            amount=("0.0000001", "12.5", "100", "3.14159")[i % 4],
            tax_included=(None, True, False)[(i + 1) % 3],
        )
        for i, text in enumerate(AWKWARD * 3)
    ]
    ingest(engine, settings, CrawlResult(source="acme", records=records))


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    awkward_catalog(engine, settings)
    yield from api_client(settings)


def test_csv_and_jsonl_hold_the_same_values(client: TestClient) -> None:
    text = client.get("/v1/export", params={"format": "csv"}).text
    rows = list(csv.DictReader(io.StringIO(text)))
    lines = client.get("/v1/export", params={"format": "jsonl"}).text.splitlines()
    objects = [json.loads(line) for line in lines]
    assert len(rows) == len(objects) >= len(AWKWARD) * 2
    for row, obj in zip(rows, objects, strict=True):
        for name, value in obj.items():
            expected = (
                ""
                if value is None
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )
            assert row[name] == expected, name
        first_seen = datetime.fromisoformat(row["first_seen"])
        assert first_seen.tzinfo is not None and first_seen.utcoffset() == UTC.utcoffset(None)
        assert row["first_seen"] == first_seen.isoformat()
    assert {"with,comma", 'with "quotes"', "two\nlines"} <= {
        r["sku"].rsplit("-", 1)[0] for r in rows
    }


def test_the_tax_flag_is_exported_in_every_format(client: TestClient) -> None:
    rows = list(csv.DictReader(io.StringIO(client.get("/v1/export?format=csv").text)))
    assert {r["price_includes_tax"] for r in rows} == {"", "true", "false"}
    lines = client.get("/v1/export", params={"format": "jsonl"}).text.splitlines()
    assert {json.loads(line)["price_includes_tax"] for line in lines} == {None, True, False}
    table = pq.read_table(io.BytesIO(client.get("/v1/export?format=parquet").content))
    assert str(table.schema.field("price_includes_tax").type) == "bool"
    assert set(table.column("price_includes_tax").to_pylist()) == {None, True, False}


FORMULAS = ['=HYPERLINK("http://evil.example","click")', "+1 GPU", "-x", "@SUM(A1:A9)"]


def test_a_sources_formulas_are_inert_in_csv_and_exact_elsewhere(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    """A scraped name a spreadsheet would run (``=HYPERLINK(...)``) is a text cell in CSV,
    with an apostrophe before it; JSON Lines and Parquet keep it as the source wrote it, and
    no other column (numbers, ``cluster_basis``'s dashes) is touched."""
    records = [
        record(i, sku=f"{text}{i}", region=text, gpu_name_raw=text)
        for i, text in enumerate(FORMULAS)
    ] + [record(9, sku="plain-9", region="eu-1")]
    ingest(engine, settings, CrawlResult(source="acme", records=records))
    clients = api_client(settings)
    client = next(clients)
    try:
        rows = list(csv.DictReader(io.StringIO(client.get("/v1/export?format=csv").text)))
        lines = client.get("/v1/export", params={"format": "jsonl"}).text.splitlines()
        exact = [json.loads(line) for line in lines]
        table = pq.read_table(io.BytesIO(client.get("/v1/export?format=parquet").content))
    finally:
        clients.close()
    assert len(rows) == len(exact) == table.num_rows == 5
    for row, obj, sku in zip(rows, exact, table.column("sku").to_pylist(), strict=True):
        assert obj["sku"] == sku  # Parquet and JSON Lines: as written
        for name in ("sku", "region", "gpu_name_raw"):
            if obj[name][0] in "=+-@":
                assert row[name] == "'" + obj[name]
            else:
                assert row[name] == obj[name]
        for name in ("amount", "price_usd", "cluster_basis", "provider", "source"):
            assert row[name] == ("" if obj[name] is None else str(obj[name]))
    assert {r["region"] for r in rows} == {"'" + text for text in FORMULAS} | {"eu-1"}


def test_an_fx_date_is_iso_in_every_format(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    """SQLite keeps an observation's ``fx_date`` as days since 1970 (migration 0035): its
    CSV and JSON Lines wrote that integer (``20784``), PostgreSQL the date."""
    day = datetime.now(UTC).date() - timedelta(days=3)
    with engine.begin() as conn:
        store_rates(conn, [Rate(day, "USD", Decimal("1.08"))], "test", None)
    euro = [record(i, currency="EUR") for i in range(3)]
    ingest(engine, settings, CrawlResult(source="acme", records=euro))
    clients = api_client(settings)
    client = next(clients)
    rows = list(csv.DictReader(io.StringIO(client.get("/v1/export?format=csv").text)))
    lines = client.get("/v1/export", params={"format": "jsonl"}).text.splitlines()
    table = pq.read_table(io.BytesIO(client.get("/v1/export?format=parquet").content))
    listed = client.get("/v1/offers").json()["data"]
    clients.close()
    assert {r["fx_date"] for r in rows} == {day.isoformat()}
    assert {json.loads(line)["fx_date"] for line in lines} == {day.isoformat()}
    assert set(table.column("fx_date").to_pylist()) == {day}
    assert {o["fx_date"] for o in listed} == {day.isoformat()}


def test_every_row_names_its_crawl_run_in_every_format(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    """An observation stores no crawl run when its version's is the same (migration 0032):
    CSV and JSON Lines read the stored column and left every row's ``crawl_run_id`` empty,
    while ``/v1/offers/{id}`` named the run. Two crawls: each row names the run of its price."""
    ingest(engine, settings, CrawlResult(source="acme", records=records(4)))
    repriced = [dict(r) for r in records(4)]
    repriced[0]["amount"] = "99.5"
    ingest(engine, settings, CrawlResult(source="acme", records=repriced))
    clients = api_client(settings)
    client = next(clients)
    rows = list(csv.DictReader(io.StringIO(client.get("/v1/export?format=csv").text)))
    lines = [json.loads(x) for x in client.get("/v1/export?format=jsonl").text.splitlines()]
    table = pq.read_table(io.BytesIO(client.get("/v1/export?format=parquet").content))
    runs = {o["id"]: o["crawl_run_id"] for o in client.get("/v1/offers").json()["data"]}
    clients.close()
    assert len(set(runs.values())) == 2 and None not in runs.values()
    assert {int(r["id"]): int(r["crawl_run_id"]) for r in rows} == runs
    assert {x["id"]: x["crawl_run_id"] for x in lines} == runs
    parquet = zip(
        table.column("id").to_pylist(), table.column("crawl_run_id").to_pylist(), strict=True
    )
    assert dict(parquet) == runs
