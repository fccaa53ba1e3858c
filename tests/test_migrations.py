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


CLOSED_IN_RANGE = "SELECT offer_id FROM price_observation WHERE version_to > 1 AND version_to <= 3"


def test_sqlite_indexes_only_closed_observations_by_version_to(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            ddl = conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'ix_price_observation_version_to'"
            ).scalar()
            plan = " ".join(
                str(row[-1])
                for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {CLOSED_IN_RANGE}")
            )
    finally:
        engine.dispose()
    assert ddl is not None and ddl.endswith("WHERE version_to IS NOT NULL")
    assert "ix_price_observation_version_to" in plan  # a range of versions implies NOT NULL


@pytest.mark.postgres
def test_postgres_indexes_only_closed_observations_by_version_to() -> None:
    with scratch_pg_database() as url:
        upgrade(url)
        engine = make_engine(url)
        try:
            with engine.begin() as conn:
                definition = conn.exec_driver_sql(
                    "SELECT indexdef FROM pg_indexes "
                    "WHERE indexname = 'ix_price_observation_version_to'"
                ).scalar()
                conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
                plan = " ".join(
                    str(row[0]) for row in conn.exec_driver_sql(f"EXPLAIN {CLOSED_IN_RANGE}")
                )
        finally:
            engine.dispose()
    assert definition is not None and definition.endswith("WHERE (version_to IS NOT NULL)")
    assert "ix_price_observation_version_to" in plan
