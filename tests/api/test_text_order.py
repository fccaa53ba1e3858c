"""Text is ordered by code point on both databases, whatever the PostgreSQL server's
collation (migration 0037; tests create their PostgreSQL databases with ICU's ``en-US``,
as most servers are set up: tests/support/pg.py).

Under a language's collation ``-``, ``_`` and case weigh less than letters, so the same
reference data listed its regions in another order on PostgreSQL than on SQLite (found by
comparing every list endpoint of a seeded catalog on the two)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, insert, text

from schema import Region
from service.api.main import create_app
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.core.db import make_engine
from tests.support.factories import record

REGION = Region.__table__  # type: ignore[attr-defined]
CODES = ["eu-zeta", "EU-WEST", "eu_north", "euwest", "eu-west", "Eu-east", "eu west"]
"""Region codes whose order by code point differs from a language's (case and
punctuation ignored first)."""


def language_order(codes: list[str]) -> list[str]:
    """Roughly how ``en-US`` orders them: letters first, case and punctuation after."""
    return sorted(codes, key=lambda c: ("".join(ch for ch in c.lower() if ch.isalnum()), c))


def test_the_codes_order_differently_by_language_and_by_code_point() -> None:
    assert language_order(CODES) != sorted(CODES)  # else the tests below prove nothing


@pytest.fixture
def api(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    with engine.begin() as conn:
        conn.execute(
            insert(REGION),
            [{"provider": "lambda", "code": c, "country": "DE", "name": c} for c in CODES],
        )
    with TestClient(create_app(settings.model_copy(update={"scheduler_enabled": False}))) as c:
        yield c


def test_regions_are_listed_by_code_point(api: TestClient) -> None:
    regions = api.get("/v1/regions").json()
    keys = [(r["provider"], r["code"]) for r in regions]
    assert keys == sorted(keys)
    lambdas = [r["code"] for r in regions if r["provider"] == "lambda" and r["code"] in CODES]
    assert lambdas == sorted(CODES)


def test_compliance_sources_list_regions_by_code_point(api: TestClient) -> None:
    datasets = api.get("/v1/compliance/sources").json()["datasets"]
    regions = next(d for d in datasets if d["name"] == "regions")["entries"]
    keys = [e["key"] for e in regions if e["key"].startswith("lambda/")]
    assert [k for k in keys if k.removeprefix("lambda/") in CODES] == [
        f"lambda/{c}" for c in sorted(CODES)
    ]
    assert keys == sorted(keys)


def test_a_fractional_gpu_count_is_carried_by_the_cursor_as_text(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    """The same cursor on both databases (SQLite reads the key as a float)."""
    records = [record(i, sku=f"frac-{i}", gpu_count="0.5", region="r0") for i in range(3)]
    assert ingest(engine, settings, CrawlResult("acme", records)).status.value == "ok"
    with TestClient(create_app(settings.model_copy(update={"scheduler_enabled": False}))) as c:
        page = c.get("/v1/offers", params={"sort": "gpu_count", "limit": 1}).json()
        cursor = page["next_cursor"]
        state = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        assert state["k"] == "0.5"
        rest = c.get("/v1/offers", params={"sort": "gpu_count", "limit": 5, "cursor": cursor})
        assert [o["sku"] for o in page["data"] + rest.json()["data"]] == [
            "frac-0",
            "frac-1",
            "frac-2",
        ]


@pytest.mark.postgres
def test_every_character_column_compares_by_code_point_on_postgresql(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        with engine.connect() as conn:
            columns = conn.execute(
                text(
                    "SELECT table_name, column_name, collation_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name <> 'alembic_version' "
                    "AND data_type IN ('text', 'character varying', 'character')"
                )
            ).all()
    finally:
        engine.dispose()
    assert len(columns) > 50
    assert [c for c in columns if c.collation_name != "C"] == []
