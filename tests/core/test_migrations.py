"""Alembic: up, down, up again on SQLite and PostgreSQL; models and migrations agree."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, column, inspect, select, table, text

import schema
from schema.prices import OBS_GPU_HOUR_KEY_SQLITE, PriceObservation
from schema.types import Digest
from service.core.db import make_engine
from service.core.migrate import downgrade, on_dialect, upgrade
from service.query.sql import OBS_AMOUNT_USD, OBS_FX_RATE, OBS_HOURLY_USD, payload_sha256
from tests.conftest import scratch_pg_database

OBS = PriceObservation.__table__  # type: ignore[attr-defined]

# SQLAlchemy does not reflect SQLite's indexes on an expression, and says so; alembic then
# leaves the model's own out of the comparison (it says so too): the index of 0023 is
# checked by its own test below and by the listing's plan test
EXPRESSION_INDEX_UNREFLECTED = pytest.mark.filterwarnings(
    "ignore:Skipped unsupported reflection of expression-based index "
    "ix_price_observation_gpu_hour_key",
    "ignore:autogenerate skipping metadata-specified expression-based index "
    "'ix_price_observation_gpu_hour_key'",
)


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
            opts = {"compare_type": True, "include_object": on_dialect(conn.dialect.name)}
            context = MigrationContext.configure(conn, opts=opts)
            diff = compare_metadata(context, schema.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
    finally:
        engine.dispose()


@EXPRESSION_INDEX_UNREFLECTED
def test_sqlite_up_down_up_and_no_drift(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_up_down_up_and_no_drift() -> None:
    with scratch_pg_database() as url:
        _roundtrip(url)


CLOSED_IN_RANGE = "SELECT offer_id FROM price_observation WHERE version_to > 1 AND version_to <= 3"


# Per dialect: the index's stored definition, and how to ask for the plan (PostgreSQL is
# told to avoid a sequential scan: its tables here are nearly empty).
INDEX_DDL = {
    "sqlite": "SELECT sql FROM sqlite_master WHERE name = 'ix_price_observation_version_to'",
    "postgresql": "SELECT indexdef FROM pg_indexes "
    "WHERE indexname = 'ix_price_observation_version_to'",
}
PLAN = {
    "sqlite": ("EXPLAIN QUERY PLAN", -1, "WHERE version_to IS NOT NULL"),
    "postgresql": ("EXPLAIN", 0, "WHERE (version_to IS NOT NULL)"),
}


def test_only_closed_observations_are_indexed_by_version_to(engine: Engine) -> None:
    dialect = engine.dialect.name
    explain, column, predicate = PLAN[dialect]
    with engine.begin() as conn:
        ddl = conn.exec_driver_sql(INDEX_DDL[dialect]).scalar()
        if dialect == "postgresql":
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        plan = " ".join(
            str(row[column]) for row in conn.exec_driver_sql(f"{explain} {CLOSED_IN_RANGE}")
        )
    assert ddl is not None and ddl.endswith(predicate)
    assert "ix_price_observation_version_to" in plan  # a range of versions implies NOT NULL


def _crawl_run_columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("crawl_run")}


def _unchanged_columns_roundtrip(url: str) -> None:
    """0013 adds crawl_run.reference_digest and unmapped_counts, and takes them away again,
    keeping the runs."""
    upgrade(url)
    engine = make_engine(url)
    try:
        assert {"reference_digest", "unmapped_counts"} <= _crawl_run_columns(engine)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO crawl_run (source, trigger, started_at, status, source_urls, "
                    "seen, added, changed, withdrawn, updated, rejected, unmapped, "
                    "reference_digest, unmapped_counts) VALUES ('m', 'cli', "
                    "'2026-12-02 00:00:00', 'ok', '[]', 1, 1, 0, 0, 0, 0, 0, 'abc', '[]')"
                )
            )
            # a row that references the run: a table rebuild of crawl_run would fail on it
            conn.execute(
                text(
                    "INSERT INTO rejected_record (crawl_run_id, position, reason) "
                    "SELECT id, 0, 'r' FROM crawl_run WHERE source = 'm'"
                )
            )
        downgrade(url, "0012")
        engine.dispose()
        assert not {"reference_digest", "unmapped_counts"} & _crawl_run_columns(engine)
        upgrade(url)
        engine.dispose()
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT source, reference_digest FROM crawl_run WHERE source = 'm'")
            ).one()
        assert tuple(row) == ("m", None)
    finally:
        engine.dispose()


def test_sqlite_unchanged_crawl_columns_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _unchanged_columns_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_unchanged_crawl_columns_up_down_up() -> None:
    with scratch_pg_database() as url:
        _unchanged_columns_roundtrip(url)


def _indexes(engine: Engine) -> dict[str, list[str | None]]:
    return {
        i["name"]: list(i["column_names"])
        for i in inspect(engine).get_indexes("price_observation")
        if i["name"]
    }


OBSERVATION_ROWS = (
    "INSERT INTO provider (slug, name, kind, status) VALUES ('m', 'M', 'gpu_cloud', 'active')",
    "INSERT INTO crawl_run (id, source, trigger, started_at, status, source_urls, seen, added, "
    "changed, withdrawn, updated, rejected, unmapped) VALUES (1, 'm', 'cli', "
    "'2026-12-02 00:00:00', 'ok', '[]', 1, 1, 0, 0, 0, 0, 0)",
    "INSERT INTO offer (id, source, provider, sku, region, price_kind, unit, price_per, "
    "gpu_inferred, gpu_count, price_floor, status, amount, currency, observation_id, "
    "first_seen_at, first_seen_version, last_changed_at, last_changed_version) VALUES "
    "(1, 'm', 'm', 's', 'r', 'on_demand', 'hour', 'instance', false, '1', false, 'active', "
    "'2.5', 'USD', 2, '2026-12-02 00:00:00', 1, '2026-12-03 00:00:00', 2)",
    "INSERT INTO price_observation (id, offer_id, amount, currency, valid_from, valid_to, "
    "version_from, version_to, crawl_run_id, raw_sha256) VALUES "
    "(1, 1, '2.4', 'USD', '2026-12-02 00:00:00', '2026-12-03 00:00:00', 1, 2, 1, 'ab'), "
    "(2, 1, '2.5', 'USD', '2026-12-03 00:00:00', NULL, 2, NULL, 1, 'cd')",
)
OBSERVATIONS = (
    "SELECT id, offer_id, amount, version_from, version_to, crawl_run_id, raw_sha256 "
    "FROM price_observation ORDER BY id"
)


BEFORE_HISTORY_INDEXES = "0018"
BEFORE_DIGEST = "0024"
"""The revision 0014 follows (main merged 0018 after 0013 first)."""
DIGEST = "0025"


def _history_indexes_roundtrip(url: str) -> None:
    """0014 swaps the observation indexes for (offer, version) and (version, offer) ones and
    back, on a table holding observations (closed and open): every row stays as it was."""
    upgrade(url, BEFORE_HISTORY_INDEXES)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in OBSERVATION_ROWS:
                conn.execute(text(statement))
            rows = conn.execute(text(OBSERVATIONS)).all()
        assert len(rows) == 2
        assert _indexes(engine)["ix_price_observation_offer_valid"] == ["offer_id", "valid_from"]
        upgrade(url, BEFORE_DIGEST)  # the payload's digest is text until 0025
        engine.dispose()
        indexes = _indexes(engine)
        assert "ix_price_observation_offer_valid" not in indexes
        assert indexes["ix_price_observation_offer_version"] == [
            "offer_id",
            "version_from",
            "version_to",
        ]
        assert indexes["ix_price_observation_version_from"] == ["version_from", "offer_id"]
        assert indexes["ix_price_observation_version_to"] == ["version_to", "offer_id"]
        with engine.connect() as conn:
            assert conn.execute(text(OBSERVATIONS)).all() == rows
        downgrade(url, BEFORE_HISTORY_INDEXES)
        engine.dispose()
        indexes = _indexes(engine)
        assert "ix_price_observation_offer_version" not in indexes
        assert indexes["ix_price_observation_offer_valid"] == ["offer_id", "valid_from"]
        assert indexes["ix_price_observation_version_from"] == ["version_from"]
        assert indexes["ix_price_observation_version_to"] == ["version_to"]
        with engine.connect() as conn:
            assert conn.execute(text(OBSERVATIONS)).all() == rows
        upgrade(url, BEFORE_DIGEST)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(OBSERVATIONS)).all() == rows
    finally:
        engine.dispose()


def _offer_columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("offer")}


def _tax_column_roundtrip(url: str) -> None:
    """0017 adds offer.tax_included and region.province and takes them away again, keeping
    the offers, the observations that reference them and the regions."""
    from crawlers.registry import get_source
    from service.compliance.reference_load import load_reference
    from service.core.config import REFERENCE_DIR, Settings
    from service.crawl.run import crawl_source
    from service.crawl.seed import seed_files

    upgrade(url)
    engine = make_engine(url)
    try:
        assert "tax_included" in _offer_columns(engine)
        assert "province" in {c["name"] for c in inspect(engine).get_columns("region")}
        settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
        load_reference(engine, REFERENCE_DIR)
        for name in ("ecb", "tencent"):
            files = seed_files(get_source(name))
            assert crawl_source(engine, settings, name, from_files=files).label == "ok"
        count = "SELECT count(*) FROM offer WHERE source = 'tencent'"
        with engine.connect() as conn:
            offers = conn.execute(text(count)).scalar_one()
            flags = set(conn.execute(text("SELECT DISTINCT tax_included FROM offer")).scalars())
            observations = conn.execute(text("SELECT count(*) FROM price_observation")).scalar()
        assert offers > 0 and flags == {True}
        downgrade(url, "0015")
        engine.dispose()
        assert "tax_included" not in _offer_columns(engine)
        assert "province" not in {c["name"] for c in inspect(engine).get_columns("region")}
        with engine.connect() as conn:
            assert conn.execute(text(count)).scalar_one() == offers
            kept = conn.execute(text("SELECT count(*) FROM price_observation")).scalar()
            assert kept == observations
        upgrade(url)
        engine.dispose()
        with engine.connect() as conn:
            flags = set(conn.execute(text("SELECT DISTINCT tax_included FROM offer")).scalars())
        assert flags == {None}
    finally:
        engine.dispose()


@EXPRESSION_INDEX_UNREFLECTED
def test_sqlite_history_indexes_up_down_up_with_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _history_indexes_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_history_indexes_up_down_up_with_rows() -> None:
    with scratch_pg_database() as url:
        _history_indexes_roundtrip(url)


def test_sqlite_offer_tax_included_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _tax_column_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_offer_tax_included_up_down_up() -> None:
    with scratch_pg_database() as url:
        _tax_column_roundtrip(url)


CLUSTER_COLUMNS = {"interconnect", "interconnect_gbps", "network", "network_gbps", "cluster_basis"}


def _cluster_roundtrip(url: str) -> None:
    """0019 adds the cluster facts (five offer columns, the cluster_reference table) and
    takes them away again, keeping the offers and the observations that reference them; a
    reference load after the upgrade fills the facts of stored offers without a crawl."""
    from crawlers.registry import get_source
    from service.compliance.reference_load import load_reference
    from service.core.config import REFERENCE_DIR, Settings
    from service.crawl.run import crawl_source
    from service.crawl.seed import seed_files

    upgrade(url)
    engine = make_engine(url)
    facts = "SELECT sku, interconnect, network, cluster_basis FROM offer WHERE source = 'oracle'"
    try:
        assert _offer_columns(engine) >= CLUSTER_COLUMNS
        settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
        load_reference(engine, REFERENCE_DIR)
        for name in ("ecb", "oracle"):
            files = seed_files(get_source(name))
            assert crawl_source(engine, settings, name, from_files=files).label == "ok"
        with engine.connect() as conn:
            before = {r[0]: tuple(r[1:]) for r in conn.execute(text(facts))}
            observations = conn.execute(text("SELECT count(*) FROM price_observation")).scalar()
        assert before["BM.GPU.H100.8"] == ("nvswitch", "roce", "rrrr")
        downgrade(url, "0017")
        engine.dispose()
        assert not CLUSTER_COLUMNS & _offer_columns(engine)
        assert "cluster_reference" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert len(
                conn.execute(text("SELECT sku FROM offer WHERE source = 'oracle'")).all()
            ) == len(before)
            assert (
                conn.execute(text("SELECT count(*) FROM price_observation")).scalar()
                == observations
            )
        upgrade(url)
        engine.dispose()
        with engine.connect() as conn:
            assert {r[1:] for r in conn.execute(text(facts))} == {(None, None, None)}
        load_reference(engine, REFERENCE_DIR)
        with engine.connect() as conn:
            assert {r[0]: tuple(r[1:]) for r in conn.execute(text(facts))} == before
    finally:
        engine.dispose()


def test_sqlite_cluster_facts_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _cluster_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_cluster_facts_up_down_up() -> None:
    with scratch_pg_database() as url:
        _cluster_roundtrip(url)


GPU_HOUR_INDEX = {
    "sqlite": "SELECT sql FROM sqlite_master WHERE name = 'ix_price_observation_gpu_hour_key'",
    "postgresql": "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_price_observation_gpu_hour'",
}


def _price_walk_index(engine: Any) -> str | None:
    """The stored definition of the observations' price walk index (None: there is none)."""
    with engine.connect() as conn:
        return conn.execute(text(GPU_HOUR_INDEX[engine.dialect.name])).scalar()


def _gpu_hour_index_roundtrip(url: str) -> None:
    """0023 indexes the observations by price per GPU-hour (SQLite: the exact integer key as
    the listing writes it; PostgreSQL: the NUMERIC) and takes the index away again."""
    upgrade(url, "0035")  # 0036 narrows it
    engine = make_engine(url)
    try:
        definition = _price_walk_index(engine)
        assert definition is not None
        if engine.dialect.name == "sqlite":
            assert OBS_GPU_HOUR_KEY_SQLITE.format(column="gpu_hour_usd") in definition
        else:
            assert "(gpu_hour_usd, offer_id, version_from, version_to)" in definition
        downgrade(url, "0022")
        assert _price_walk_index(engine) is None
        upgrade(url, "0035")
        assert _price_walk_index(engine) == definition
    finally:
        engine.dispose()


def test_sqlite_observation_gpu_hour_index_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _gpu_hour_index_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_gpu_hour_index_up_down_up() -> None:
    with scratch_pg_database() as url:
        _gpu_hour_index_roundtrip(url)


RELOPTIONS = "SELECT relname, reloptions FROM pg_class WHERE relname IN ({names}) ORDER BY relname"


@pytest.mark.postgres
def test_postgres_autovacuum_settings_up_down_up() -> None:
    """0024 has autovacuum take the offers, their locations and the observations once 2 %
    of their rows changed (their visibility map, which a listing's index-only reads need,
    is refreshed soon after an ingest), and gives the defaults back."""
    with scratch_pg_database() as url:
        upgrade(url)
        engine = make_engine(url)
        ask = text(RELOPTIONS.format(names="'offer', 'offer_location', 'price_observation'"))
        try:
            with engine.connect() as conn:
                options = dict(conn.execute(ask).all())
            assert set(options) == {"offer", "offer_location", "price_observation"}
            for table, settings in options.items():
                assert settings is not None, table
                assert "autovacuum_vacuum_scale_factor=0.02" in settings
                assert "autovacuum_vacuum_insert_scale_factor=0.02" in settings
                assert "autovacuum_analyze_scale_factor=0.05" in settings
            downgrade(url, "0023")
            with engine.connect() as conn:
                assert all(value is None for _, value in conn.execute(ask))
            upgrade(url)
            with engine.connect() as conn:
                assert dict(conn.execute(ask).all()) == options
        finally:
            engine.dispose()


SHA_A = hashlib.sha256(b"a").hexdigest()
SHA_B = hashlib.sha256(b"b").hexdigest()
DIGEST_ROWS = tuple(
    statement.replace("'ab'", f"'{SHA_A}'").replace("'cd'", f"'{SHA_B}'")
    for statement in OBSERVATION_ROWS
) + (
    "INSERT INTO price_observation (id, offer_id, amount, currency, valid_from, "
    "version_from, crawl_run_id, raw_sha256) VALUES "
    "(3, 1, '2.6', 'USD', '2026-12-03 00:00:00', 2, 1, NULL)",
)
OBS_INDEX_DDL = {
    "sqlite": "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
    "AND tbl_name = 'price_observation' AND sql IS NOT NULL ORDER BY name",
    "postgresql": "SELECT indexname, indexdef FROM pg_indexes "
    "WHERE tablename = 'price_observation' ORDER BY indexname",
}
STORED = {
    "sqlite": "SELECT id, typeof(raw_sha256), length(raw_sha256) FROM price_observation "
    "ORDER BY id",
    "postgresql": "SELECT id, pg_typeof(raw_sha256)::text, octet_length(raw_sha256) "
    "FROM price_observation ORDER BY id",
}


def _digest_roundtrip(url: str) -> None:
    """0025 stores each observation's payload sha256 as its 32 bytes, reads back the same
    hexadecimal text through the model, keeps every index (SQLite's expression and partial
    ones, rebuilt from their DDL) and its statistics, and writes the text back down."""
    upgrade(url, BEFORE_DIGEST)
    engine = make_engine(url)
    dialect = engine.dialect.name
    try:
        with engine.begin() as conn:
            for statement in DIGEST_ROWS:
                conn.execute(text(statement))
            if dialect == "sqlite":
                conn.execute(text("ANALYZE"))
            before = conn.execute(text(OBSERVATIONS)).all()
            ddl = conn.execute(text(OBS_INDEX_DDL[dialect])).all()
            stats = (
                conn.execute(text("SELECT * FROM sqlite_stat1 ORDER BY idx")).all()
                if dialect == "sqlite"
                else []
            )
        assert [row[-1] for row in before] == [SHA_A, SHA_B, None]
        upgrade(url, DIGEST)
        engine.dispose()
        with engine.connect() as conn:
            stored = conn.execute(text(STORED[dialect])).all()
            typed = conn.execute(
                select(column("id"), column("raw_sha256", Digest))
                .select_from(table("price_observation"))
                .order_by(column("id"))
            ).all()
            assert conn.execute(text(OBS_INDEX_DDL[dialect])).all() == ddl
            if dialect == "sqlite":
                assert conn.execute(text("SELECT * FROM sqlite_stat1 ORDER BY idx")).all() == stats
                assert conn.execute(text("PRAGMA foreign_key_check")).all() == []
        kind = "blob" if dialect == "sqlite" else "bytea"
        assert stored == [
            (1, kind, 32),
            (2, kind, 32),
            (3, "null" if kind == "blob" else kind, None),
        ]
        assert typed == [(1, SHA_A), (2, SHA_B), (3, None)]
        downgrade(url, BEFORE_DIGEST)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(OBSERVATIONS)).all() == before
            assert conn.execute(text(OBS_INDEX_DDL[dialect])).all() == ddl
        upgrade(url, DIGEST)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(STORED[dialect])).all() == stored
    finally:
        engine.dispose()


def test_sqlite_observation_digest_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _digest_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_digest_up_down_up() -> None:
    with scratch_pg_database() as url:
        _digest_roundtrip(url)


def _digest_refused(url: str) -> None:
    """A payload digest that is not hexadecimal text stops 0025, which then changes
    nothing: the rows, their text and the revision stay as they were."""
    upgrade(url, BEFORE_DIGEST)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in DIGEST_ROWS:
                conn.execute(text(statement.replace(SHA_B, "not hex: a hand-edited row")))
            before = conn.execute(text(OBSERVATIONS)).all()
        error = r"hexadecimal digest: 'not hex: a hand-edited row'|invalid hexadecimal"
        with pytest.raises(Exception, match=error):
            upgrade(url, DIGEST)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(OBSERVATIONS)).all() == before
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert revision == BEFORE_DIGEST
    finally:
        engine.dispose()


def test_sqlite_observation_digest_refuses_what_is_not_hex(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _digest_refused(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_digest_refuses_what_is_not_hex() -> None:
    with scratch_pg_database() as url:
        _digest_refused(url)


BEFORE_TIMES = "0025"
TIMES = "0026"
TIME_ROWS = (
    # (id, valid_from, valid_to) as SQLite held them: SQLAlchemy's text, naive UTC
    (1, "2026-12-02 00:00:00.000000", "2026-12-03 23:59:59.999999"),
    (2, "2026-12-03 23:59:59.999999", None),
    (3, "1999-01-01 12:00:00", "2026-12-03 00:00:00.5"),  # shorter texts, as raw SQL writes
)


def test_sqlite_observation_times_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """0026 keeps SQLite's observation times as integers of microseconds: each reads back
    as the same aware UTC time, the indexes and their DDL stay, and the downgrade writes
    SQLAlchemy's text back."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url, BEFORE_TIMES)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in OBSERVATION_ROWS[:3]:
                conn.execute(text(statement))
            for row_id, start, end in TIME_ROWS:
                conn.execute(
                    text(
                        "INSERT INTO price_observation (id, offer_id, amount, currency, "
                        "valid_from, valid_to, version_from, crawl_run_id) "
                        "VALUES (:i, 1, '1', 'USD', :f, :t, 1, 1)"
                    ),
                    {"i": row_id, "f": start, "t": end},
                )
            ddl = conn.execute(text(OBS_INDEX_DDL["sqlite"])).all()
        upgrade(url, TIMES)
        engine.dispose()
        times = "SELECT id, valid_from, valid_to FROM price_observation ORDER BY id"
        with engine.connect() as conn:
            stored = conn.execute(text(times)).all()
            typed = conn.execute(
                select(OBS.c.id, OBS.c.valid_from, OBS.c.valid_to).order_by(OBS.c.id)
            ).all()
            assert conn.execute(text(OBS_INDEX_DDL["sqlite"])).all() == ddl
        expected = [
            (i, datetime.fromisoformat(f).replace(tzinfo=UTC), t and datetime.fromisoformat(t))
            for i, f, t in TIME_ROWS
        ]
        expected = [(i, f, t and t.replace(tzinfo=UTC)) for i, f, t in expected]
        assert typed == expected
        assert all(isinstance(v, int) for row in stored for v in row[1:] if v is not None)
        assert stored[0][1] == 1_796_169_600_000_000  # 2026-12-02T00:00:00Z
        downgrade(url, BEFORE_TIMES)
        engine.dispose()
        with engine.connect() as conn:
            back = conn.execute(text(times)).all()
        assert back == [
            (
                i,
                datetime.fromisoformat(f).strftime("%Y-%m-%d %H:%M:%S.%f"),
                t and datetime.fromisoformat(t).strftime("%Y-%m-%d %H:%M:%S.%f"),
            )
            for i, f, t in TIME_ROWS
        ]
        upgrade(url, TIMES)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(times)).all() == stored
    finally:
        engine.dispose()


def test_sqlite_observation_times_refuse_what_is_not_a_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url, BEFORE_TIMES)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in OBSERVATION_ROWS:
                conn.execute(text(statement.replace("'2026-12-03 00:00:00', NULL", "'soon', NULL")))
            before = conn.execute(text("SELECT * FROM price_observation ORDER BY id")).all()
        with pytest.raises(Exception, match="not one: 'soon'"):
            upgrade(url, TIMES)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT * FROM price_observation ORDER BY id")).all() == before
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert revision == BEFORE_TIMES
    finally:
        engine.dispose()


BEFORE_PAYLOAD_ROW = "0026"
SHA_C = hashlib.sha256(b"c").hexdigest()


def _payload_rows(dialect: str) -> list[str]:
    """At 0026: two runs; run 1 fetched payload A at two URLs (rows 10, 11) and B (12),
    run 2 fetched C (20); observations read from A in run 1, B in run 1, A in run 2 (whose
    run stored no link for A: the same bytes' first row, 10), C in run 2, and none."""

    def blob(sha: str) -> str:
        return f"X'{sha}'" if dialect == "sqlite" else f"decode('{sha}', 'hex')"

    at = "1796169600000000" if dialect == "sqlite" else "'2026-12-02 00:00:00+00'"
    runs = [
        f"INSERT INTO crawl_run (id, source, trigger, started_at, status, source_urls, seen, "
        f"added, changed, withdrawn, updated, rejected, unmapped) VALUES ({run}, 'm', 'cli', "
        "'2026-12-02 00:00:00', 'ok', '[]', 1, 1, 0, 0, 0, 0, 0)"
        for run in (1, 2)
    ]
    payloads = [
        f"INSERT INTO raw_payload (sha256, size, compressed, first_seen_at) VALUES "
        f"('{sha}', 1, {blob('00')}, '2026-12-02 00:00:00')"
        for sha in (SHA_A, SHA_B, SHA_C)
    ]
    links = [
        f"INSERT INTO crawl_run_payload (id, crawl_run_id, sha256, url, fetched_at) VALUES "
        f"({row}, {run}, '{sha}', '{url}', '2026-12-02 00:00:00')"
        for row, run, sha, url in (
            (11, 1, SHA_A, "https://m.example/second"),
            (10, 1, SHA_A, "https://m.example/first"),
            (12, 1, SHA_B, "https://m.example/b"),
            (20, 2, SHA_C, "https://m.example/c"),
        )
    ]
    observations = [
        f"INSERT INTO price_observation (id, offer_id, amount, currency, valid_from, "
        f"version_from, crawl_run_id, raw_sha256) VALUES ({row}, 1, '2.5', 'USD', {at}, "
        f"{row}, {run}, {blob(sha) if sha else 'NULL'})"
        for row, run, sha in (
            (1, 1, SHA_A),
            (2, 1, SHA_B),
            (3, 2, SHA_A),
            (4, 2, SHA_C),
            (5, 2, None),
        )
    ]
    return [OBSERVATION_ROWS[0], *runs, OBSERVATION_ROWS[2], *payloads, *links, *observations]


PAYLOAD_IDS = [(1, 10), (2, 12), (3, 10), (4, 20), (5, None)]


def _payload_row_roundtrip(url: str) -> None:
    """0027 points each observation at its run's first crawl_run_payload row for its
    digest (else the same bytes' first row): the API reads the same sha256 back, every
    index and its statistics stay, and the downgrade writes each digest's bytes back."""
    upgrade(url, BEFORE_PAYLOAD_ROW)
    engine = make_engine(url)
    dialect = engine.dialect.name
    digests = "SELECT id, raw_sha256 FROM price_observation ORDER BY id"
    try:
        with engine.begin() as conn:
            for statement in _payload_rows(dialect):
                conn.execute(text(statement))
            if dialect == "sqlite":
                conn.execute(text("ANALYZE"))
            before = [(i, d and bytes(d)) for i, d in conn.execute(text(digests))]
            ddl = conn.execute(text(OBS_INDEX_DDL[dialect])).all()
            stats = (
                conn.execute(text("SELECT * FROM sqlite_stat1 ORDER BY idx")).all()
                if dialect == "sqlite"
                else []
            )
        assert before[0][1] == bytes.fromhex(SHA_A) and before[4][1] is None
        upgrade(url, "0027")  # (0033 narrows an index these compare)
        engine.dispose()
        with engine.connect() as conn:
            stored = conn.execute(
                text("SELECT id, payload_id FROM price_observation ORDER BY id")
            ).all()
            read = conn.execute(select(OBS.c.id, payload_sha256()).order_by(OBS.c.id)).all()
            assert conn.execute(text(OBS_INDEX_DDL[dialect])).all() == ddl
            if dialect == "sqlite":
                assert conn.execute(text("SELECT * FROM sqlite_stat1 ORDER BY idx")).all() == stats
                assert conn.execute(text("PRAGMA foreign_key_check")).all() == []
                kinds = conn.execute(
                    text("SELECT DISTINCT typeof(payload_id) FROM price_observation")
                ).scalars()
                assert set(kinds) == {"integer", "null"}
        assert stored == PAYLOAD_IDS
        assert read == [(1, SHA_A), (2, SHA_B), (3, SHA_A), (4, SHA_C), (5, None)]
        downgrade(url, BEFORE_PAYLOAD_ROW)
        engine.dispose()
        with engine.connect() as conn:
            assert [(i, d and bytes(d)) for i, d in conn.execute(text(digests))] == before
            assert conn.execute(text(OBS_INDEX_DDL[dialect])).all() == ddl
        upgrade(url, "0027")
        engine.dispose()
        with engine.connect() as conn:
            again = conn.execute(
                text("SELECT id, payload_id FROM price_observation ORDER BY id")
            ).all()
        assert again == PAYLOAD_IDS
    finally:
        engine.dispose()


def test_sqlite_observation_payload_row_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _payload_row_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_payload_row_up_down_up() -> None:
    with scratch_pg_database() as url:
        _payload_row_roundtrip(url)


def _payload_row_refused(url: str) -> None:
    """A digest that no crawl_run_payload row holds stops 0027, named, and nothing
    changes: its provenance would be lost."""
    upgrade(url, BEFORE_PAYLOAD_ROW)
    engine = make_engine(url)
    dialect = engine.dialect.name
    orphan = hashlib.sha256(b"orphan").hexdigest()
    try:
        blob = f"X'{orphan}'" if dialect == "sqlite" else f"decode('{orphan}', 'hex')"
        with engine.begin() as conn:
            for statement in _payload_rows(dialect):
                conn.execute(text(statement))
            conn.execute(text(f"UPDATE price_observation SET raw_sha256 = {blob} WHERE id = 4"))
            before = conn.execute(text("SELECT * FROM price_observation ORDER BY id")).all()
        with pytest.raises(ValueError, match=f"price observation 4 was read from payload {orphan}"):
            upgrade(url)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT * FROM price_observation ORDER BY id")).all() == before
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert revision == BEFORE_PAYLOAD_ROW
    finally:
        engine.dispose()


def test_sqlite_observation_payload_row_refuses_an_unknown_digest(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _payload_row_refused(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_payload_row_refuses_an_unknown_digest() -> None:
    with scratch_pg_database() as url:
        _payload_row_refused(url)


BEFORE_FX_SOURCE = "0029"
FX_SOURCES = [(1, "identity"), (2, "ecb"), (3, "ecb-gbp"), (4, None)]
"""At 0029, as the ingest wrote them: a price in USD, one in EUR (the USD rate of its
fx_date), one in GBP converted on a day without a USD row (its own rate's source), and
one in JPY with no rate."""


def _fx_source_rows(dialect: str) -> list[str]:
    at = "1796169600000000" if dialect == "sqlite" else "'2026-12-02 00:00:00+00'"
    rates = [
        "INSERT INTO fx_rate (id, rate_date, currency, per_eur, source) VALUES "
        f"({n}, '{day}', '{currency}', '{rate}', '{source}')"
        for n, day, currency, rate, source in (
            (1, "2026-12-01", "USD", "1.05", "ecb"),
            (2, "2026-12-01", "GBP", "0.85", "ecb-gbp"),
            (3, "2026-11-30", "GBP", "0.86", "ecb-gbp"),
        )
    ]
    observations = [
        "INSERT INTO price_observation (id, offer_id, amount, currency, fx_rate, fx_date, "
        f"fx_source, valid_from, version_from, crawl_run_id) VALUES ({row}, 1, '2.5', "
        f"'{currency}', {rate}, {day}, {source}, {at}, {row}, 1)"
        for row, currency, rate, day, source in (
            (1, "USD", "'1'", "NULL", "'identity'"),
            (2, "EUR", "'1.05'", "'2026-12-01'", "'ecb'"),
            (3, "GBP", "'1.2209302326'", "'2026-11-30'", "'ecb-gbp'"),
            (4, "JPY", "NULL", "NULL", "NULL"),
        )
    ]
    return [*OBSERVATION_ROWS[:3], *rates, *observations]


def _fx_source_roundtrip(url: str) -> None:
    """0030 drops the observations' fx_source and leaves every other value as it was; the
    downgrade fills it back as the ingest wrote it."""
    upgrade(url, BEFORE_FX_SOURCE)
    engine = make_engine(url)
    kept = "SELECT id, amount, currency, fx_rate, fx_date, valid_from FROM price_observation"
    sources = "SELECT id, fx_source FROM price_observation ORDER BY id"
    try:
        with engine.begin() as conn:
            for statement in _fx_source_rows(engine.dialect.name):
                conn.execute(text(statement))
            before = conn.execute(text(f"{kept} ORDER BY id")).all()
            assert conn.execute(text(sources)).all() == FX_SOURCES
        upgrade(url, BEFORE_USD_FIGURES)  # 0030 (0031 then stores USD figures once)
        engine.dispose()
        columns = {c["name"] for c in inspect(engine).get_columns("price_observation")}
        assert "fx_source" not in columns and "fx_date" in columns
        with engine.connect() as conn:
            assert conn.execute(text(f"{kept} ORDER BY id")).all() == before
        downgrade(url, BEFORE_FX_SOURCE)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(sources)).all() == FX_SOURCES
            assert conn.execute(text(f"{kept} ORDER BY id")).all() == before
        upgrade(url, BEFORE_USD_FIGURES)
    finally:
        engine.dispose()


def test_sqlite_observation_fx_source_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _fx_source_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_fx_source_up_down_up() -> None:
    with scratch_pg_database() as url:
        _fx_source_roundtrip(url)


BEFORE_USD_FIGURES = "0030"
USD_FIGURES = "SELECT id, amount_usd, hourly_usd, fx_rate FROM price_observation ORDER BY id"


def _usd_rows(dialect: str, amount_usd: str = "'2.5'") -> list[str]:
    """At 0030, as the ingest wrote them: two prices in USD (a monthly one: its hourly
    amount is not its amount) and one in EUR."""
    at = "1796169600000000" if dialect == "sqlite" else "'2026-12-02 00:00:00+00'"
    one = "'1'" if dialect == "sqlite" else "1"
    return [
        *OBSERVATION_ROWS[:3],
        "INSERT INTO price_observation (id, offer_id, amount, currency, hourly_amount, "
        "amount_usd, hourly_usd, gpu_hour_usd, fx_rate, fx_date, valid_from, version_from, "
        f"crawl_run_id) VALUES (1, 1, '2.5', 'USD', '2.5', {amount_usd}, '2.5', '2.5', {one}, "
        f"NULL, {at}, 1, 1), (2, 1, '730', 'USD', '1', '730', '1', '0.5', {one}, NULL, {at}, "
        f"2, 1), (3, 1, '2', 'EUR', '2', '2.2', '2.2', '2.2', '1.1', '2026-12-01', {at}, 3, 1)",
    ]


def _read_usd(conn: Any) -> list[tuple[Any, ...]]:
    """What the readers see (service.query.sql.usd_figure), in Decimals."""
    stmt = select(OBS.c.id, OBS_AMOUNT_USD, OBS_HOURLY_USD, OBS_FX_RATE).order_by(OBS.c.id)
    return [tuple(row) for row in conn.execute(stmt)]


READ_USD = [
    (1, Decimal("2.5"), Decimal("2.5"), Decimal(1)),
    (2, Decimal(730), Decimal(1), Decimal(1)),
    (3, Decimal("2.2"), Decimal("2.2"), Decimal("1.1")),
]


def _usd_figures_roundtrip(url: str) -> None:
    """0031 stores a USD price's USD figures once (null, read as its own figures and 1),
    leaves the EUR price as it was, and the downgrade writes them back."""
    upgrade(url, BEFORE_USD_FIGURES)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _usd_rows(engine.dialect.name):
                conn.execute(text(statement))
            before = conn.execute(text(USD_FIGURES)).all()
            assert _read_usd(conn) == READ_USD
        upgrade(url, "0031")
        engine.dispose()
        with engine.connect() as conn:
            stored = conn.execute(text(USD_FIGURES)).all()
            assert stored[:2] == [(1, None, None, None), (2, None, None, None)]
            assert stored[2] == before[2]
            assert _read_usd(conn) == READ_USD
        downgrade(url, BEFORE_USD_FIGURES)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(USD_FIGURES)).all() == before
        upgrade(url, "0031")
    finally:
        engine.dispose()


def test_sqlite_observation_usd_figures_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _usd_figures_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_usd_figures_up_down_up() -> None:
    with scratch_pg_database() as url:
        _usd_figures_roundtrip(url)


def _usd_figures_refused(url: str) -> None:
    """A price in USD whose stored USD amount is not its amount stops 0031, named, and
    nothing changes."""
    upgrade(url, BEFORE_USD_FIGURES)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _usd_rows(engine.dialect.name, amount_usd="'2.6'"):
                conn.execute(text(statement))
            before = conn.execute(text(USD_FIGURES)).all()
        with pytest.raises(ValueError, match="price observation 1 is in USD"):
            upgrade(url)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(USD_FIGURES)).all() == before
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert revision == BEFORE_USD_FIGURES
    finally:
        engine.dispose()


def test_sqlite_observation_usd_figures_refuse_other_figures(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _usd_figures_refused(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_usd_figures_refuse_other_figures() -> None:
    with scratch_pg_database() as url:
        _usd_figures_refused(url)


def _usd_figures_spelled_otherwise(url: str) -> None:
    """A USD row whose USD amount is its amount spelled otherwise (``2.50``) is the same
    figure: 0031 migrates it."""
    upgrade(url, BEFORE_USD_FIGURES)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _usd_rows(engine.dialect.name, amount_usd="'2.50'"):
                conn.execute(text(statement))
        upgrade(url, "0031")
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(USD_FIGURES)).all()[0] == (1, None, None, None)
            assert _read_usd(conn) == READ_USD
    finally:
        engine.dispose()


def test_sqlite_observation_usd_figures_spelled_otherwise(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _usd_figures_spelled_otherwise(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_usd_figures_spelled_otherwise() -> None:
    with scratch_pg_database() as url:
        _usd_figures_spelled_otherwise(url)


BEFORE_VERSIONS_OWN = "0031"
VERSIONS_OWN_TIMES = ("2026-12-02 00:00:00.000001", "2026-12-03 10:30:00.250000")
"""The two catalog versions' times (SQLite's text as SQLAlchemy wrote it before 0032)."""


def _versions_own_rows(dialect: str) -> list[str]:
    """At 0031: two versions of two crawl runs, and four observations of one offer, the
    first two as the ingest wrote them (opened at version 1, closed at version 2; open
    since version 2), a third stating another time and another run, a fourth opened in a
    version that is not there."""
    t1, t2 = VERSIONS_OWN_TIMES

    def micros(at: str) -> str:
        if dialect != "sqlite":
            return f"'{at}+00'"
        when = datetime.fromisoformat(at).replace(tzinfo=UTC)
        return str((when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1))

    run2 = OBSERVATION_ROWS[1].replace("VALUES (1,", "VALUES (2,")
    versions = (
        "INSERT INTO catalog_version (id, created_at, source, crawl_run_id, added, changed, "
        f"withdrawn, updated) VALUES (1, '{t1}', 'm', 1, 1, 0, 0, 0), "
        f"(2, '{t2}', 'm', 2, 0, 1, 0, 0)"
    )
    other = micros("2026-12-01 08:00:00.000000")
    observations = (
        "INSERT INTO price_observation (id, offer_id, amount, currency, valid_from, valid_to, "
        "version_from, version_to, crawl_run_id) VALUES "
        f"(1, 1, '2.4', 'USD', {micros(t1)}, {micros(t2)}, 1, 2, 1), "
        f"(2, 1, '2.5', 'USD', {micros(t2)}, NULL, 2, NULL, 2), "
        f"(3, 1, '2.6', 'USD', {other}, {micros(t2)}, 1, 2, 2), "
        f"(4, 1, '2.7', 'USD', {other}, NULL, 9, NULL, 1)"
    )
    return [*OBSERVATION_ROWS[:3], run2, versions, observations]


VERSIONS_OWN_STORED = (
    "SELECT id, valid_from IS NULL, valid_to IS NULL, crawl_run_id FROM price_observation "
    "ORDER BY id"
)


def _versions_own_roundtrip(url: str) -> None:
    """0032 stores null where an observation's validity and crawl run are its versions'
    (and the versions' times as the observations' are), keeps the others; the readers
    give every value as before, and the downgrade writes them back."""
    from service.query.history import offer_history

    upgrade(url, BEFORE_VERSIONS_OWN)
    engine = make_engine(url)
    kept = (
        "SELECT id, valid_from, valid_to, crawl_run_id, version_from, version_to "
        "FROM price_observation ORDER BY id"
    )
    times = "SELECT id, created_at FROM catalog_version ORDER BY id"
    t1, t2 = (datetime.fromisoformat(t).replace(tzinfo=UTC) for t in VERSIONS_OWN_TIMES)
    other = datetime(2026, 12, 1, 8, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            for statement in _versions_own_rows(engine.dialect.name):
                conn.execute(text(statement))
            before, versions = conn.execute(text(kept)).all(), conn.execute(text(times)).all()
        upgrade(url, "0032")
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(VERSIONS_OWN_STORED)).all() == [
                (1, True, True, None),
                (2, True, True, None),
                (3, False, True, 2),
                (4, False, True, 1),
            ]
            read = [
                (h["id"], h["valid_from"], h["valid_to"], h["crawl_run_id"])
                for h in offer_history(conn, 1)
            ]
        assert read == [
            (3, other, t2, 2),
            (4, other, None, 1),
            (1, t1, t2, 1),
            (2, t2, None, 2),
        ]
        downgrade(url, BEFORE_VERSIONS_OWN)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(kept)).all() == before
            assert conn.execute(text(times)).all() == versions
        upgrade(url, "0032")
    finally:
        engine.dispose()


def test_sqlite_observation_versions_own_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _versions_own_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_versions_own_up_down_up() -> None:
    with scratch_pg_database() as url:
        _versions_own_roundtrip(url)


def _offer_version_index_roundtrip(url: str) -> None:
    """0033 narrows the offer's index to (offer_id, version_from) and back, rows kept."""
    upgrade(url, "0032")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _versions_own_rows(engine.dialect.name):
                conn.execute(text(statement))
            rows = conn.execute(text("SELECT * FROM price_observation ORDER BY id")).all()
        wide = ["offer_id", "version_from", "version_to"]
        assert _indexes(engine)["ix_price_observation_offer_version"] == wide
        upgrade(url, "0033")
        engine.dispose()
        narrow = ["offer_id", "version_from"]
        assert _indexes(engine)["ix_price_observation_offer_version"] == narrow
        with engine.connect() as conn:
            assert conn.execute(text("SELECT * FROM price_observation ORDER BY id")).all() == rows
        downgrade(url, "0032")
        engine.dispose()
        assert _indexes(engine)["ix_price_observation_offer_version"] == wide
        upgrade(url, "0033")
    finally:
        engine.dispose()


@EXPRESSION_INDEX_UNREFLECTED
def test_sqlite_offer_version_index_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _offer_version_index_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_offer_version_index_up_down_up() -> None:
    with scratch_pg_database() as url:
        _offer_version_index_roundtrip(url)


HOURLY = "SELECT id, hourly_amount, hourly_usd FROM price_observation ORDER BY id"


def _hourly_rows(dialect: str, hourly: str = "'2.5'") -> list[str]:
    """At 0033, as the ingest wrote them: a USD price per hour, a EUR one per hour, a
    monthly USD one (its hourly amount is not its amount) and a JPY one with no rate."""
    return [
        *OBSERVATION_ROWS[:3],
        "INSERT INTO price_observation (id, offer_id, amount, currency, hourly_amount, "
        "amount_usd, hourly_usd, gpu_hour_usd, fx_rate, fx_date, version_from) VALUES "
        f"(1, 1, '2.5', 'USD', {hourly}, NULL, NULL, '2.5', NULL, NULL, 1), "
        "(2, 1, '2', 'EUR', '2', '2.2', '2.2', '2.2', '1.1', '2026-12-01', 2), "
        "(3, 1, '730', 'USD', '1', NULL, NULL, '0.5', NULL, NULL, 3), "
        "(4, 1, '300', 'JPY', '300', NULL, NULL, NULL, NULL, NULL, 4)",
    ]


def _read_hourly(conn: Any) -> list[tuple[Any, ...]]:
    from service.query.sql import OBS_HOURLY_AMOUNT

    stmt = select(OBS.c.id, OBS_HOURLY_AMOUNT, OBS_HOURLY_USD).order_by(OBS.c.id)
    return [tuple(row) for row in conn.execute(stmt)]


READ_HOURLY = [
    (1, Decimal("2.5"), Decimal("2.5")),
    (2, Decimal(2), Decimal("2.2")),
    (3, Decimal(1), Decimal(1)),
    (4, Decimal(300), None),
]


def _hourly_roundtrip(url: str) -> None:
    """0034 stores the hourly figures of a price per instance-hour as nulls (read as its
    amounts), keeps the monthly price's, and the downgrade writes them back."""
    upgrade(url, "0033")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _hourly_rows(engine.dialect.name):
                conn.execute(text(statement))
            before = conn.execute(text(HOURLY)).all()
        upgrade(url)
        engine.dispose()
        with engine.connect() as conn:
            stored = conn.execute(text(HOURLY)).all()
            assert [tuple(r) for r in stored] == [
                (1, None, None),
                (2, None, None),
                tuple(before[2]),
                (4, None, None),
            ]
            assert _read_hourly(conn) == READ_HOURLY
        downgrade(url, "0033")
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(HOURLY)).all() == before
        upgrade(url)
    finally:
        engine.dispose()


def test_sqlite_observation_hourly_same_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _hourly_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_hourly_same_up_down_up() -> None:
    with scratch_pg_database() as url:
        _hourly_roundtrip(url)


def _hourly_refused(url: str) -> None:
    """An observation stored without its hourly amount stops 0034, named; nothing changes."""
    upgrade(url, "0033")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _hourly_rows(engine.dialect.name, hourly="NULL"):
                conn.execute(text(statement))
            before = conn.execute(text(HOURLY)).all()
        with pytest.raises(ValueError, match="price observation 1 stores no hourly figure"):
            upgrade(url)
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(HOURLY)).all() == before
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert revision == "0033"
    finally:
        engine.dispose()


def test_sqlite_observation_hourly_same_refuses_unknown(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _hourly_refused(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_hourly_same_refuses_unknown() -> None:
    with scratch_pg_database() as url:
        _hourly_refused(url)


FX_DATES = "SELECT id, fx_date FROM price_observation ORDER BY id"


def _fx_date_roundtrip(url: str) -> None:
    """0035 keeps fx_date as days on SQLite (PostgreSQL: its date, unchanged), read back as
    the same dates, and the downgrade writes the text back."""
    upgrade(url, "0034")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _hourly_rows(engine.dialect.name):
                conn.execute(text(statement))
            before = conn.execute(text(FX_DATES)).all()
        upgrade(url, "0035")
        engine.dispose()
        with engine.connect() as conn:
            stored = conn.execute(text(FX_DATES)).all()
            read = conn.execute(select(OBS.c.id, OBS.c.fx_date).order_by(OBS.c.id)).all()
        assert [tuple(r) for r in read] == [(1, None), (2, date(2026, 12, 1)), (3, None), (4, None)]
        if engine.dialect.name == "sqlite":
            assert stored[1] == (2, (date(2026, 12, 1) - date(1970, 1, 1)).days)
        else:
            assert stored == before
        downgrade(url, "0034")
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(FX_DATES)).all() == before
        upgrade(url, "0035")
    finally:
        engine.dispose()


def test_sqlite_observation_fx_date_days_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _fx_date_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_fx_date_days_up_down_up() -> None:
    with scratch_pg_database() as url:
        _fx_date_roundtrip(url)


def test_sqlite_observation_fx_date_not_a_date_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade(url, "0034")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _hourly_rows("sqlite"):
                conn.execute(text(statement.replace("'2026-12-01', 2)", "'soon', 2)")))
            before = conn.execute(text(FX_DATES)).all()
        with pytest.raises(ValueError, match="an fx_date that is not one: 'soon'"):
            upgrade(url, "0035")
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text(FX_DATES)).all() == before
    finally:
        engine.dispose()


def _price_walk_roundtrip(url: str) -> None:
    """0036 narrows the price walk index to the price alone and restores the offer and
    the versions on the way down."""
    upgrade(url, "0035")
    engine = make_engine(url)
    try:
        before = _price_walk_index(engine)
        assert before is not None and "version_to" in before
        upgrade(url, "0036")
        engine.dispose()
        after = _price_walk_index(engine)
        assert after is not None
        if engine.dialect.name == "sqlite":
            key = OBS_GPU_HOUR_KEY_SQLITE.format(column="gpu_hour_usd")
            assert after.endswith(f"({key})")
        else:
            assert after.endswith("(gpu_hour_usd)")
        downgrade(url, "0035")
        engine.dispose()
        assert _price_walk_index(engine) == before
        upgrade(url)
        engine.dispose()
        assert _price_walk_index(engine) == after
    finally:
        engine.dispose()


def test_sqlite_observation_price_walk_index_up_down_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _price_walk_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_observation_price_walk_index_up_down_up() -> None:
    with scratch_pg_database() as url:
        _price_walk_roundtrip(url)
