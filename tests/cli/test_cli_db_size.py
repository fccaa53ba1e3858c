"""``gpuatlas db size``: every table's rows and bytes, on SQLite and PostgreSQL; SQLite's free
pages, which ``db compact`` gives back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest
from sqlalchemy import func, select, text
from typer.testing import CliRunner

from schema.prices import Offer, PriceObservation
from service.core.config import get_settings
from service.core.db import make_engine
from tests.support.cli import run
from tests.support.factories import records
from tests.support.free_pages import leave_free_pages

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]


def _size(cli: CliRunner) -> tuple[dict[str, dict[str, object]], str]:
    code, out, err = run(cli, "db", "size", "-f", "json")
    assert code == 0, err
    return {row["table"]: row for row in json.loads(out)}, err


def test_every_table_with_its_rows_and_bytes(cli: CliRunner, db_url: str, tmp_path: Path) -> None:
    file = tmp_path / "feed.jsonl"
    feed = records(300, source="mytool", provider="lambda", gpu_name_raw="H100 SXM")
    file.write_bytes(b"\n".join(orjson.dumps(r) for r in feed) + b"\n")
    assert run(cli, "ingest", "mytool", "--file", str(file))[0] == 0
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:  # a table whose name needs quoting is counted too
            conn.execute(text('CREATE TABLE "odd ""name""" (v INTEGER)'))
            conn.execute(text('INSERT INTO "odd ""name""" VALUES (1), (2)'))
        with engine.connect() as conn:
            offers = conn.execute(select(func.count()).select_from(OFFER)).scalar()
            observations = conn.execute(select(func.count()).select_from(OBS)).scalar()
        tables, err = _size(cli)
    finally:  # the PostgreSQL database is the worker's, emptied (not dropped) between tests
        with engine.begin() as conn:
            conn.execute(text('DROP TABLE IF EXISTS "odd ""name"""'))
        engine.dispose()
    assert tables["offer"]["rows"] == offers == 300
    assert tables["price_observation"]["rows"] == observations == 300
    assert tables['odd "name"']["rows"] == 2
    offer = tables["offer"]
    assert offer["table_mb"] > 0 and offer["indexes_mb"] > 0  # type: ignore[operator]
    assert abs(offer["total_mb"] - offer["table_mb"] - offer["indexes_mb"]) < 0.02  # type: ignore[operator]
    per_row = offer["bytes_per_row"]
    assert per_row is not None and 100 < per_row < 100_000  # type: ignore[operator]
    assert tables["alembic_version"]["rows"] == 1
    totals = [row["total_mb"] for row in tables.values()]
    assert totals == sorted(totals, reverse=True)  # largest first
    assert re.search(r"[\d,.]+ MB in all", err)
    code, out, _ = run(cli, "db", "size")  # the table for people
    assert code == 0 and "price_observation" in out


def test_sqlite_free_pages_are_shown_until_compacted(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    leave_free_pages(sqlite_url)
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    try:
        cli = CliRunner()
        tables, err = _size(cli)
        found = re.search(r"([\d,.]+) MB of it free pages", err)
        assert found is not None and float(found.group(1).replace(",", "")) > 1.5
        assert "scratch" not in tables
        assert run(cli, "db", "compact")[0] == 0
        _, err = _size(cli)
        assert "0.0 MB of it free pages" in err
    finally:
        get_settings.cache_clear()
