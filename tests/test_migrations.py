"""Alembic: up, down, up again on SQLite and PostgreSQL; models and migrations agree."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

import schema
from service.db import make_engine
from service.migrate import downgrade, upgrade
from tests.conftest import scratch_pg_database


def _roundtrip(url: str) -> None:
    upgrade(url)
    engine = make_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
        assert set(schema.metadata.tables) <= tables
        downgrade(url, "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(url)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, schema.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
    finally:
        engine.dispose()


def test_sqlite_up_down_up_and_no_drift(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_up_down_up_and_no_drift() -> None:
    with scratch_pg_database() as url:
        _roundtrip(url)
