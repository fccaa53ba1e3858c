"""An ingest's memory follows its batch, not its crawl.

Python's allocations are traced (tracemalloc) while the same kind of crawl of 1,500 and of
6,000 offers is ingested from a JSON Lines file, as ``gpuatlas ingest --file`` reads it, in
batches of 150 with the memos bounded at 300 entries: the larger crawl may need more for
what the ingest keeps by design (the amount seen under each offer's key, a few dozen bytes
an offer: 1.9 times the smaller crawl's peak when this test was written) but not four
times as much. Held whole (one batch), it does (3.9 times): the same measurement is the
check that this test can fail. SQLite's page cache is outside Python's
heap; its bound while an ingest writes is tested here too.
"""

from __future__ import annotations

import gc
import shutil
import tracemalloc
from pathlib import Path

import orjson
import pytest
from sqlalchemy import Engine

import service.catalog.resolver as resolver_module
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.catalog.snapshot import read_jsonl
from service.core.config import Settings
from service.core.db import READ_CACHE_KIB, WRITE_CACHE_KIB, make_engine, write_cache
from tests.support.factories import records

SMALL, LARGE, BATCH = 1_500, 6_000, 150


def _crawl_file(folder: Path, n: int) -> Path:
    path = folder / f"crawl-{n}.jsonl"
    with path.open("wb") as handle:
        for i, item in enumerate(records(n)):
            item["region"] = f"r{i % 7}"
            item["vcpus"] = str(8 + i % 5)
            handle.write(orjson.dumps(item) + b"\n")
    return path


def _peak_bytes(template: Path, folder: Path, path: Path, batch: int) -> int:
    """Peak traced bytes of ingesting ``path`` into a fresh copy of the migrated template."""
    database = folder / f"{path.stem}-{batch}.db"
    shutil.copy(template, database)
    url = f"sqlite:///{database}"
    engine = make_engine(url)
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    crawl = read_jsonl(path, "acme")
    try:
        gc.collect()
        tracemalloc.start()
        try:
            result = ingest(
                engine,
                settings,
                CrawlResult("acme", crawl, rejections=crawl.rejections),
                batch_size=batch,
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        engine.dispose()
    assert result.status.value == "ok" and result.counts["added"] > 0
    return peak


def test_an_ingest_holds_its_batch_not_its_crawl(
    sqlite_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolver_module, "MEMO_ENTRIES", 300)
    small, large = _crawl_file(tmp_path, SMALL), _crawl_file(tmp_path, LARGE)
    streamed = _peak_bytes(sqlite_template, tmp_path, large, BATCH)
    streamed_small = _peak_bytes(sqlite_template, tmp_path, small, BATCH)
    whole = _peak_bytes(sqlite_template, tmp_path, large, LARGE)
    whole_small = _peak_bytes(sqlite_template, tmp_path, small, LARGE)
    assert whole > 3 * whole_small, (whole, whole_small)  # the measurement sees a crawl held
    assert streamed < 2.5 * streamed_small, (streamed, streamed_small)
    assert streamed * 3 < whole, (streamed, whole)


def _cache_sizes(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        main = conn.exec_driver_sql("PRAGMA main.cache_size").scalar()
        temp = conn.exec_driver_sql("PRAGMA temp.cache_size").scalar()
    return int(main or 0), int(temp or 0)


def test_the_page_cache_is_bounded_while_an_ingest_writes(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    try:
        assert _cache_sizes(engine) == (-READ_CACHE_KIB, -READ_CACHE_KIB)
        with engine.connect() as conn:
            with write_cache(conn):
                inside = [
                    conn.exec_driver_sql(f"PRAGMA {schema}.cache_size").scalar()
                    for schema in ("main", "temp")
                ]
            after = conn.exec_driver_sql("PRAGMA main.cache_size").scalar()
            with pytest.raises(RuntimeError, match="boom"), write_cache(conn):
                raise RuntimeError("boom")
            after_failure = conn.exec_driver_sql("PRAGMA temp.cache_size").scalar()
        assert inside == [-WRITE_CACHE_KIB, -WRITE_CACHE_KIB]
        assert after == after_failure == -READ_CACHE_KIB
    finally:
        engine.dispose()


def test_an_ingest_gives_its_connection_back_with_the_read_cache(
    sqlite_url: str, tmp_path: Path
) -> None:
    engine = make_engine(sqlite_url)
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    try:
        ingest(engine, settings, CrawlResult("acme", records(30)))
        with engine.connect() as conn:
            pooled = conn.exec_driver_sql("PRAGMA main.cache_size").scalar()
        assert pooled == -READ_CACHE_KIB
    finally:
        engine.dispose()
