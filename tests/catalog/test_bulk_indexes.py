"""Bulk loads on SQLite build secondary indexes afresh instead of row by row.

An ingest that at least doubles the offer or observation table (a first ingest of a
large source) drops those tables' plain indexes inside its transaction and creates them
again, from their exact stored DDL, before it commits. These tests hold that nothing
else can tell: the schema afterwards is byte for byte the same, readers during the
ingest see the indexes, a failure or a SIGKILL at any point leaves the indexes (and the
catalog) as they were, ANALYZE statistics survive, and PostgreSQL is never touched.

SQLite writes many new offers through staging tables joined by ``INSERT ... SELECT``;
PostgreSQL copies their rows while they are built. These tests also hold that every
write path stores the same rows and that a failure in the middle leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sqlite3
import time
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Connection, Engine, Table, event, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import NullPool

import service.catalog.bulk
import service.catalog.diff_listener
import service.catalog.ingest
import service.catalog.writer
from schema.records import OfferRecord
from service.alerts.outbox import enqueue_for_diff
from service.catalog.bulk import indexes_deferred, indexes_worth_rebuilding
from service.catalog.fx import Rate, store_rates
from service.catalog.ingest import ingest
from service.catalog.lines import line_digest
from service.catalog.results import CrawlResult, Payload
from service.catalog.snapshot import read_jsonl
from service.catalog.stream import expected_records
from service.core.config import Settings
from service.core.db import make_engine, writer
from tests.catalog.test_ingest_kill import SIZE as KILL_SIZE
from tests.conftest import truncate_all
from tests.support.factories import check_invariants, offer_count, records
from tests.support.kill_server import KillServer
from tests.support.paged import PagedRecords

SIZE = 600


def schema_indexes(path: Path) -> list[tuple[str, str, str]]:
    """Every index of the database file as SQLite stores it: (name, table, DDL)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return sorted(
            conn.execute(
                "SELECT name, tbl_name, coalesce(sql, '') FROM sqlite_master WHERE type = 'index'"
            ).fetchall()
        )


def db_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


@pytest.fixture
def low_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test-sized ingest take the bulk path (the real threshold is 20,000 rows)."""
    monkeypatch.setattr(service.catalog.bulk, "REBUILD_MIN_ROWS", 100)


@pytest.fixture
def sqlite_settings(sqlite_url: str) -> Settings:
    return Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def spy_drops(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The tables each ingest deferred the indexes of."""
    calls: list[list[str]] = []
    real = service.catalog.writer.indexes_deferred

    @contextlib.contextmanager
    def spy(conn: Connection, tables: list[str]) -> Iterator[None]:
        calls.append(list(tables))
        with real(conn, tables):
            yield

    monkeypatch.setattr(service.catalog.writer, "indexes_deferred", spy)
    return calls


def test_when_a_rebuild_pays() -> None:
    threshold = service.catalog.bulk.REBUILD_MIN_ROWS
    assert indexes_worth_rebuilding(threshold, 0)
    assert not indexes_worth_rebuilding(threshold - 1, 0)  # too small to matter
    assert indexes_worth_rebuilding(300_000, 300_000)  # doubles the table
    # a quarter of the table: the rows already updated one by one cost about what the
    # rebuild costs (docs/ingest.md, "Indexes rebuilt")
    assert indexes_worth_rebuilding(75_000, 300_000)
    assert not indexes_worth_rebuilding(74_999, 300_000)
    assert not indexes_worth_rebuilding(0, 0)


def test_first_bulk_ingest_rebuilds_and_the_schema_is_unchanged(
    sqlite_engine: Engine,
    sqlite_url: str,
    sqlite_settings: Settings,
    low_threshold: None,
    spy_drops: list[list[str]],
) -> None:
    before = schema_indexes(db_path(sqlite_url))
    assert any(name == "ix_offer_status_gpu_hour" for name, _, _ in before)
    result = ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", records(SIZE)))
    assert result.status.value == "ok" and result.added == SIZE
    assert spy_drops == [["offer", "price_observation"]]
    assert schema_indexes(db_path(sqlite_url)) == before
    with sqlite_engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        plan = " ".join(
            str(row[-1])
            for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT id FROM offer WHERE status = 'active' "
                "ORDER BY gpu_hour_usd_e10, id LIMIT 10"
            )
        )
    assert "ix_offer_status_gpu_hour" in plan  # the rebuilt index serves the listing
    check_invariants(sqlite_engine)
    # A small change afterwards is an ordinary insert: nothing is dropped.
    spy_drops.clear()
    changed = records(SIZE + 20, bump_every=7)
    result = ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", changed))
    assert result.status.value == "ok" and result.added == 20
    assert spy_drops == []
    assert schema_indexes(db_path(sqlite_url)) == before
    check_invariants(sqlite_engine)


@pytest.mark.parametrize(
    ("lines", "hinted", "deferred_after"),
    [
        (200, True, 0),  # known to add half the table: rebuilt from the first batch
        (200, False, 50),  # not known: from the batch that reaches a quarter (rows 51-100)
        (80, True, None),  # known to add less than a quarter: row by row
    ],
)
def test_a_load_known_to_be_large_rebuilds_from_its_first_batch(
    sqlite_engine: Engine,
    sqlite_settings: Settings,
    low_threshold: None,
    spy_drops: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    lines: int,
    hinted: bool,
    deferred_after: int | None,
) -> None:
    """A new source's file of ``lines`` offers into a catalog of 400: the file's lines
    say how many offers it adds at least (``JsonlRecords.expected``), so the rebuild
    starts before the first new row; records with no such hint (a plain iterator) start
    it at the batch whose rows reach a quarter of the table, as before."""
    assert ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", records(400))).added == 400
    spy_drops.clear()
    written: list[int] = []
    real = service.catalog.writer.indexes_deferred

    @contextlib.contextmanager
    def counting(conn: Connection, tables: list[str]) -> Iterator[None]:
        written.append(conn.exec_driver_sql("SELECT count(*) FROM offer").scalar() - 400)
        with real(conn, tables):
            yield

    monkeypatch.setattr(service.catalog.writer, "indexes_deferred", counting)
    path = tmp_path / "other.jsonl"
    path.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in records(lines, source="other", provider="o"))
    )
    file_records = read_jsonl(path, "other")
    assert file_records.expected() == lines
    crawl = CrawlResult(
        "other", file_records if hinted else iter(list(file_records)), complete=False
    )
    result = ingest(sqlite_engine, sqlite_settings, crawl, batch_size=50)
    assert (result.status.value, result.added) == ("ok", lines)
    assert written == ([] if deferred_after is None else [deferred_after])
    check_invariants(sqlite_engine)


def test_a_files_lines_are_counted_as_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    for body, lines in [
        (b"", 0),
        (b"{}", 1),
        (b"{}\n", 1),
        (b"{}\n\n{}", 3),
        (b"x" * (3 << 20) + b"\n{}", 2),  # a line longer than a read
    ]:
        path.write_bytes(body)
        assert read_jsonl(path, "acme").expected() == lines
    assert expected_records([1, 2, 3]) == 3
    assert expected_records(iter([1, 2, 3])) is None


def varied(n: int, bump: int = 0) -> list[OfferRecord]:
    """Records that exercise every kind of value a bulk path binds: two currencies (one
    converted through FX), decimals in several spellings, fractional GPU counts, NULLs,
    booleans, URLs, per-GPU prices, monthly units."""
    out = []
    for i, item in enumerate(records(n, bump_every=bump)):
        item["currency"] = ("USD", "EUR", "USD")[i % 3]
        item["vcpus"] = ("8", "8.0", "8.00", None)[i % 4]
        item["memory_gb"] = ("64", None)[i % 2]
        item["gpu_count"] = ("8", "0.5", "1")[i % 3]
        item["gpu_memory_gb"] = ("80", None, "141")[i % 3]
        item["bare_metal"] = (True, None, False)[i % 3]
        item["price_floor"] = i % 5 == 0
        item["source_url"] = f"https://acme.example/p?i={i % 3}&x=\u00e9'" if i % 2 else None
        item["price_per"] = ("instance", "gpu")[i % 2]
        item["unit"] = ("hour", "month")[i % 4 == 3]
        if i % 11 == 0:
            item["gpu_name_raw"] = f"Mystery GPU {i % 3}"  # unmapped
        if i % 13 == 0:  # what COPY's text format and SQL literals must escape
            item["sku"] += "\t\\N 'x' \"y\" \\"
            item["gpu_name_raw"] = f"Odd\\GPU\t{i % 2}\n%s %% 'q'"
        out.append(OfferRecord.model_validate(item))
    return out


@pytest.mark.parametrize("payloads", ["one", "per-record"])
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_every_bulk_path_stores_the_same_rows(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    payloads: str,
    backend: str,
) -> None:
    """The same ingests through each write path (offers bound row by row or staged and
    joined; on SQLite, indexes kept or rebuilt) leave identical tables, and the outbox
    gets the same observation rows."""
    dumps = []
    now = service.catalog.ingest.utcnow()
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        paths = [(10**9, 10**9), (100, 10**9), (10**9, 100), (100, 100)]
    else:
        pg: str = request.getfixturevalue("pg_session_url")
        paths = [(10**9, 10**9)]  # PostgreSQL neither rebuilds indexes nor stages
    for rebuild, stage in paths:
        monkeypatch.setattr(service.catalog.bulk, "REBUILD_MIN_ROWS", rebuild)
        monkeypatch.setattr(service.catalog.writer, "STAGED_MIN_ROWS", stage)
        seen: list[list[tuple[Any, ...]]] = []

        def enqueue(conn: Connection, version: int, diff: Any, when: Any, rows: Any) -> int:
            seen.append(rows())  # noqa: B023 (called before the loop moves on)
            return enqueue_for_diff(conn, version, diff, when, rows)

        monkeypatch.setattr(service.catalog.diff_listener, "listener", enqueue)
        if backend == "sqlite":
            path = tmp_path / f"r{rebuild}-s{stage}.db"
            shutil.copy(template, path)
            url = f"sqlite:///{path}"
        else:
            truncate_all(pg)
            url = pg
        engine = make_engine(url)
        settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
        with writer(engine).begin() as conn:
            rate = Rate(now.date() - timedelta(days=1), "USD", Decimal("1.0832"))
            store_rates(conn, [rate], "test", None)
        for batch in (varied(SIZE), varied(SIZE + 300, bump=5)):
            crawl = CrawlResult(
                "acme", batch, payloads=[Payload("https://acme.example/p", b"one page", now)]
            )
            if payloads == "per-record":
                crawl.payloads = [
                    Payload(f"https://acme.example/p{i}", f"page {i}".encode(), now)
                    for i in range(4)
                ]
                crawl.records = PagedRecords(batch, [p.sha256 for p in crawl.payloads])
            result = ingest(engine, settings, crawl, now=now)
            assert result.status.value == "ok"
        with engine.connect() as conn:
            tables = {
                table: conn.exec_driver_sql(f"SELECT {columns} FROM {table} ORDER BY id").all()
                for table, columns in (
                    ("offer", "*"),
                    ("price_observation", "*"),
                    ("instance_type", "*"),
                    ("unmapped_name", "kind, source, value, occurrences"),  # times: wall clock
                )
            }
            if backend == "sqlite":
                kinds = conn.exec_driver_sql(
                    "SELECT typeof(amount), typeof(gpu_count), typeof(bare_metal), "
                    "typeof(gpu_hour_usd_e10), typeof(observation_id) FROM offer"
                ).all()
            else:  # numerics as stored, scale and all
                kinds = conn.exec_driver_sql(
                    "SELECT amount::text, gpu_count::text, vcpus::text, gpu_hour_usd::text "
                    "FROM offer UNION ALL SELECT amount::text, hourly_amount::text, "
                    "amount_usd::text, fx_rate::text FROM price_observation"
                ).all()
        dumps.append((tables, seen, set(kinds)))
        check_invariants(engine)
        engine.dispose()
    for other in dumps[1:]:
        assert other[0] == dumps[0][0]
        assert other[2] == dumps[0][2]
    # the outbox is handed identical observations, and the USD figures are there
    assert all(len(d[1]) == 2 for d in dumps)
    assert [d[1] for d in dumps[1:]] == [dumps[0][1]] * (len(paths) - 1)
    offers = dumps[0][0]["offer"]
    assert len(offers) == SIZE + 300
    stored = {value for row in offers for value in row if isinstance(value, str)}
    assert "Odd\\GPU\t1\n%s %% 'q'" in stored  # escaped on the way in, exact on the way out
    assert any(value.endswith("\t\\N 'x' \"y\" \\") for value in stored)
    assert any(row._mapping["gpu_hour_usd"] is not None for row in offers)  # converted prices
    # each observation names a crawl_run_payload row of its own run (both runs reprice
    # every offer): one payload a crawl, or four
    raw = {row[-1] for row in dumps[0][0]["price_observation"]}
    assert len(raw) == (8 if payloads == "per-record" else 2)


def test_both_write_paths_record_the_same_line_digests(
    sqlite_reference_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON Lines ingest records each new offer's line digest (service.catalog.lines):
    staged with the offers and written by a join, or bound row by row, the rows are the
    same, each the digest of that offer's own line. A re-ingest of the file with one line
    changed then skips every other recorded line, on both."""
    items = [record.model_dump(mode="json") for record in varied(SIZE)]
    lines = [orjson.dumps(item) for item in items]
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(line + b"\n" for line in lines))
    items[7]["amount"] = str(Decimal(items[7]["amount"]) + 1)
    lines[7] = orjson.dumps(items[7])
    second.write_bytes(b"".join(line + b"\n" for line in lines))
    by_key = {  # the second file's lines: the digests recorded last
        (item["sku"], item["region"], item["unit"]): line
        for item, line in zip(items, lines, strict=True)
    }
    dumps, skipped = [], []
    for stage in (10**9, 100):
        monkeypatch.setattr(service.catalog.writer, "STAGED_MIN_ROWS", stage)
        path = tmp_path / f"s{stage}.db"
        shutil.copy(sqlite_reference_template, path)
        url = f"sqlite:///{path}"
        engine = make_engine(url)
        settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
        try:
            for file in (first, second):
                crawl = read_jsonl(file, "acme")
                result = ingest(
                    engine, settings, CrawlResult("acme", crawl, rejections=crawl.rejections)
                )
                assert result.status.value == "ok"
            skipped.append(result.skipped)
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    "SELECT l.offer_id, l.digest, o.sku, o.region, o.unit FROM offer_line AS l "
                    "JOIN offer AS o ON o.id = l.offer_id ORDER BY l.offer_id"
                ).all()
            check_invariants(engine)
        finally:
            engine.dispose()
        assert len(rows) > SIZE // 2  # the lines of unmapped GPU names are not recorded
        for _, digest, sku, region, unit in rows:
            assert digest == line_digest(by_key[(sku, region, unit)])
        dumps.append(rows)
    assert dumps[1] == dumps[0]
    assert skipped[0] == skipped[1] == len(dumps[0]) - 1


@pytest.mark.parametrize("path", ["rows", "staged"])
def test_a_failure_mid_load_keeps_indexes_and_catalog(
    sqlite_engine: Engine,
    sqlite_url: str,
    sqlite_settings: Settings,
    low_threshold: None,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    """The offers are in, the observations fail: nothing stays, the indexes are back."""
    before = schema_indexes(db_path(sqlite_url))
    if path == "rows":
        real = service.catalog.writer.bulk_insert

        def failing(conn: Connection, table: Table, *args: Any, **kwargs: Any) -> None:
            if table.name == "price_observation":
                raise sqlite3.OperationalError("disk I/O error (injected)")
            real(conn, table, *args, **kwargs)

        monkeypatch.setattr(service.catalog.writer, "bulk_insert", failing)
    else:
        monkeypatch.setattr(service.catalog.writer, "STAGED_MIN_ROWS", 100)

        @contextlib.contextmanager
        def failing_stage(conn: Connection, name: str, *args: Any, **kw: Any) -> Iterator[str]:
            with service.catalog.bulk.staged(conn, name, *args, **kw) as table:
                yield table
            if name == "stage_attributes":  # left last: after both joins have written
                raise sqlite3.OperationalError("disk I/O error (injected)")

        monkeypatch.setattr(service.catalog.writer, "staged", failing_stage)
    with pytest.raises(sqlite3.OperationalError, match="injected"):
        ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", records(SIZE)))
    assert schema_indexes(db_path(sqlite_url)) == before
    assert offer_count(sqlite_engine) == 0
    monkeypatch.undo()
    result = ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", records(SIZE)))
    assert result.status.value == "ok" and offer_count(sqlite_engine) == SIZE
    assert schema_indexes(db_path(sqlite_url)) == before
    check_invariants(sqlite_engine)


@pytest.mark.postgres
def test_postgres_streams_new_offers_and_a_failure_mid_copy_leaves_nothing(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL copies the new offers while their rows are built: when the 2,500th row
    is being built, the server has already stored some of the earlier ones (its COPY
    progress, read from another session, says so). The building then fails: nothing
    stays, and the same ingest works next on the same connection."""
    engine = make_engine(pg_url, pool_size=1, max_overflow=0)  # one session throughout
    watcher = make_engine(pg_url, poolclass=NullPool)
    settings = Settings(database_url=pg_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    batch = records(3000)
    for i, item in enumerate(batch):  # every price its own, so each row computes one
        item["amount"] = str(Decimal(100 + i) / 100)
    calls, progress = [0], []
    real_price = service.catalog.writer.Writer._price

    def failing_price(self: Any, fields: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2500:
            with watcher.connect() as conn:
                for _ in range(500):  # the server stores what it has received
                    done = conn.exec_driver_sql(
                        "SELECT tuples_processed FROM pg_stat_progress_copy "
                        "WHERE relid = 'offer'::regclass"
                    ).scalar()
                    if done:
                        break
                    time.sleep(0.01)
            progress.append(done)
            raise RuntimeError("injected")
        return real_price(self, fields)

    monkeypatch.setattr(service.catalog.writer.Writer, "_price", failing_price)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            ingest(engine, settings, CrawlResult("acme", batch))
        assert progress, "the rows were never built"
        assert progress[0] is not None, "no COPY ran on the server while rows were built"
        assert 0 < progress[0] < 2500
        assert offer_count(engine) == 0
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM price_observation").scalar() == 0
            assert conn.exec_driver_sql("SELECT count(*) FROM catalog_version").scalar() == 0
        monkeypatch.undo()
        result = ingest(engine, settings, CrawlResult("acme", batch))
        assert result.status.value == "ok" and offer_count(engine) == 3000
        check_invariants(engine)
    finally:
        engine.dispose()
        watcher.dispose()


@pytest.mark.parametrize("stage", [100, 10**9], ids=["staged", "rows"])
def test_a_full_disk_mid_load_says_so_and_leaves_everything_as_it_was(
    sqlite_url: str,
    sqlite_settings: Settings,
    low_threshold: None,
    monkeypatch: pytest.MonkeyPatch,
    stage: int,
) -> None:
    """SQLite's own failure (the database may not grow: ``SQLITE_FULL``) in the middle of a
    bulk load: the error says what happened (nothing hides it), and the catalog and its
    indexes are as before; once there is room the same ingest works."""
    monkeypatch.setattr(service.catalog.writer, "STAGED_MIN_ROWS", stage)
    path = db_path(sqlite_url)
    before = schema_indexes(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    full = make_engine(sqlite_url)

    @event.listens_for(full, "connect")
    def _cap(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 12}")

    try:
        with pytest.raises(OperationalError, match=r"(?s)disk is full.*INSERT INTO offer"):
            ingest(full, sqlite_settings, CrawlResult("acme", records(4 * SIZE)))
    finally:
        full.dispose()
    assert schema_indexes(path) == before
    roomy = make_engine(sqlite_url)
    try:
        assert offer_count(roomy) == 0
        with roomy.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        result = ingest(roomy, sqlite_settings, CrawlResult("acme", records(4 * SIZE)))
        assert result.status.value == "ok" and offer_count(roomy) == 4 * SIZE
        assert schema_indexes(path) == before
        check_invariants(roomy)
    finally:
        roomy.dispose()


def test_readers_keep_the_indexes_while_they_are_rebuilt(
    sqlite_engine: Engine,
    sqlite_url: str,
    sqlite_settings: Settings,
    low_threshold: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = db_path(sqlite_url)
    ingest(sqlite_engine, sqlite_settings, CrawlResult("first", records(150, source="first")))
    before = schema_indexes(path)
    seen: list[tuple[list[tuple[str, str, str]], int, str]] = []
    real = service.catalog.writer.bulk_insert

    def reading(conn: Connection, table: Table, *args: Any, **kwargs: Any) -> None:
        real(conn, table, *args, **kwargs)
        if table.name == "offer":  # the offers are in, the indexes are not back yet
            with contextlib.closing(sqlite3.connect(path, timeout=5)) as reader:
                mine = sorted(
                    conn.exec_driver_sql(
                        "SELECT name, tbl_name, coalesce(sql, '') FROM sqlite_master "
                        "WHERE type = 'index'"
                    ).all()
                )
                assert len(mine) < len(before)  # this transaction did drop them
                count = reader.execute(
                    "SELECT count(*) FROM offer INDEXED BY ix_offer_country WHERE country = 'DE'"
                ).fetchone()[0]
                plan = reader.execute(
                    "EXPLAIN QUERY PLAN SELECT id FROM offer WHERE status = 'active' "
                    "ORDER BY gpu_hour_usd_e10, id LIMIT 5"
                ).fetchall()
                seen.append((schema_indexes(path), count, str(plan)))

    monkeypatch.setattr(service.catalog.writer, "bulk_insert", reading)
    result = ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", records(SIZE)))
    assert result.status.value == "ok"
    assert len(seen) == 1
    schema_seen, count, plan = seen[0]
    assert schema_seen == before  # the committed schema, indexes and all
    assert count == 150  # the committed catalog: the first source only
    assert "ix_offer_status_gpu_hour" in plan
    assert schema_indexes(path) == before


def test_analyze_statistics_survive_the_rebuild(
    sqlite_engine: Engine, sqlite_url: str, sqlite_settings: Settings, low_threshold: None
) -> None:
    ingest(sqlite_engine, sqlite_settings, CrawlResult("first", records(120, source="first")))
    with writer(sqlite_engine).begin() as conn:
        conn.exec_driver_sql("ANALYZE")
    query = "SELECT tbl, idx, stat FROM sqlite_stat1 WHERE idx LIKE 'ix_%' ORDER BY idx"
    with sqlite_engine.connect() as conn:
        stats = conn.exec_driver_sql(query).all()
    assert any(idx == "ix_offer_country" for _, idx, _ in stats)
    result = ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", records(SIZE)))
    assert result.status.value == "ok"
    with sqlite_engine.connect() as conn:
        assert conn.exec_driver_sql(query).all() == stats


def test_unique_indexes_keep_checking_during_the_load(
    sqlite_engine: Engine, sqlite_settings: Settings
) -> None:
    """Only plain indexes are deferred: a duplicate identity still fails at its row."""
    ingest(sqlite_engine, sqlite_settings, CrawlResult("acme", records(3)))
    with writer(sqlite_engine).begin() as conn:
        columns = [row[1] for row in conn.exec_driver_sql("PRAGMA table_info(offer)")]
        copied = ", ".join("id + 1000" if c == "id" else c for c in columns)
        with indexes_deferred(conn, ["offer"]):
            names = {
                name
                for (name,) in conn.exec_driver_sql(
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'offer'"
                )
            }
            assert "sqlite_autoindex_offer_1" in names  # the identity's unique index
            assert "ix_offer_country" not in names
            with pytest.raises(IntegrityError, match="UNIQUE"):
                conn.exec_driver_sql(
                    f"INSERT INTO offer ({', '.join(columns)}) "
                    f"SELECT {copied} FROM offer ORDER BY id LIMIT 1"
                )
    assert offer_count(sqlite_engine) == 3


def test_sigkill_during_a_bulk_load_leaves_indexes_and_catalog_whole(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """SIGKILL at random points of a first ingest that takes the rebuild path: each
    time the database has every index exactly as before and holds none or all of the
    offers; then an ingest works."""
    rng = random.Random(20261130)
    template = tmp_path / "empty.db"
    shutil.copy(sqlite_template, template)
    before = schema_indexes(template)

    server = KillServer(f"sqlite:///{template}", rebuild_min_rows=100)
    wait_dead = server.wait_dead

    def spawn(path: Path) -> int:
        return server.spawn("a", f"sqlite:///{path}")

    outcomes = {"before": 0, "after": 0}
    try:
        durations = []
        for attempt in range(2):
            calibration = tmp_path / f"calibrate{attempt}.db"
            shutil.copy(template, calibration)
            started = time.monotonic()
            wait_dead(spawn(calibration))
            durations.append(time.monotonic() - started)
        window = 1.25 * durations[-1]  # the first child also imports lazily
        for kill in range(30):
            if kill >= 10 and outcomes["before"] and outcomes["after"]:
                break
            if kill >= 10:
                window = window * 1.5 if outcomes["before"] else window / 1.5
            path = tmp_path / f"kill{kill}.db"
            shutil.copy(template, path)
            pid = spawn(path)
            time.sleep(rng.uniform(0.0, window))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_dead(pid)
            engine = make_engine(f"sqlite:///{path}")
            try:
                count = offer_count(engine)  # opening recovers the WAL
                assert count in (0, KILL_SIZE), f"half an ingest is visible: {count}"
                outcomes["after" if count else "before"] += 1
                assert schema_indexes(path) == before
                with engine.connect() as conn:
                    assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
                check_invariants(engine)
            finally:
                engine.dispose()
    finally:
        server.close()
    print(f"kill outcomes: {outcomes}")
    if not (outcomes["before"] and outcomes["after"]):
        pytest.fail(f"kills did not land on both sides of the commit: {outcomes}")
    url = f"sqlite:///{tmp_path / 'kill0.db'}"
    engine = make_engine(url)
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    try:
        result = ingest(engine, settings, CrawlResult("acme", records(KILL_SIZE)))
        assert result.status.value == "ok"
        assert offer_count(engine) == KILL_SIZE
        assert schema_indexes(tmp_path / "kill0.db") == before
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgresql_indexes_are_never_dropped(pg_url: str) -> None:
    """On PostgreSQL dropping an index would lock readers out: the helper does nothing."""
    engine = make_engine(pg_url)
    query = "SELECT indexname FROM pg_indexes WHERE tablename = 'offer' ORDER BY indexname"
    try:
        with engine.connect() as conn:
            before = conn.exec_driver_sql(query).all()
        with writer(engine).begin() as conn, indexes_deferred(conn, ["offer"]):
            assert conn.exec_driver_sql(query).all() == before
        assert ("ix_offer_country",) in before
    finally:
        engine.dispose()
