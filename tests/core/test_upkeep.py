"""Database upkeep: compaction checks the disk first, and the scheduler compacts weekly.

The compaction itself (SQLite ``VACUUM``, PostgreSQL ``VACUUM (ANALYZE)``) is tested
through the CLI in ``tests/cli/test_cli_db_compact.py``; here: the free-disk rule, its
refusal on a real file (the disk's free space is the one thing made small), the
``compact_schedule`` setting and the scheduler's job."""

from __future__ import annotations

import logging
from collections import namedtuple
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, text

from service.core import upkeep
from service.core.config import Settings
from service.core.db import make_engine
from service.core.upkeep import CompactionRefused, Room, compact, scheduled_compaction
from service.crawl.scheduler import COMPACTION_JOB, build_scheduler
from tests.support.free_pages import leave_free_pages

MB = 1_000_000
Usage = namedtuple("Usage", "total used free")


def _room(database_free: int, temp_free: int, shared: bool) -> Room:
    return Room(Path("/data/gpuatlas.db"), Path("/var/tmp"), database_free, temp_free, shared)


def test_one_disk_must_hold_the_copy_and_the_log() -> None:
    assert _room(200 * MB, 200 * MB, shared=True).shortfall(100 * MB) is None
    reason = _room(199 * MB, 199 * MB, shared=True).shortfall(100 * MB)
    assert reason is not None
    assert "200.0 MB free on the disk of /data/gpuatlas.db" in reason
    assert "/var/tmp" in reason and "199.0 MB are" in reason


def test_two_disks_each_hold_one() -> None:
    assert _room(100 * MB, 100 * MB, shared=False).shortfall(100 * MB) is None
    temp = _room(500 * MB, 99 * MB, shared=False).shortfall(100 * MB)
    assert temp is not None and "free in /var/tmp" in temp and "SQLITE_TMPDIR" in temp
    log = _room(99 * MB, 500 * MB, shared=False).shortfall(100 * MB)
    assert log is not None and "beside /data/gpuatlas.db" in log


def test_sqlite_temp_dir_follows_sqlites_order(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    pick = upkeep.sqlite_temp_dir
    assert pick({"SQLITE_TMPDIR": str(first), "TMPDIR": str(second)}) == first
    assert pick({"SQLITE_TMPDIR": str(tmp_path / "missing"), "TMPDIR": str(second)}) == second
    assert pick({}) in (Path("/var/tmp"), Path("/usr/tmp"), Path("/tmp"), Path.cwd())


def _grown(url: str) -> Engine:
    """An SQLite catalog with 2 MB of free pages (written, then dropped)."""
    leave_free_pages(url)
    return make_engine(url)


def _pages(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("PRAGMA page_count").scalar() or 0)


def test_compaction_refuses_a_disk_too_full_and_changes_nothing(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _grown(sqlite_url)
    try:
        pages = _pages(engine)
        size = pages * 4096
        # the disk has room for one copy of the file, not two
        monkeypatch.setattr(upkeep.shutil, "disk_usage", lambda _: Usage(10**12, 0, size + 1))
        with pytest.raises(CompactionRefused, match=r"compacting needs [\d,.]+ MB free"):
            compact(engine)
        assert _pages(engine) == pages  # not vacuumed
        monkeypatch.setattr(upkeep.shutil, "disk_usage", lambda _: Usage(10**12, 0, 3 * size))
        before, after = compact(engine)
        assert before == pages * 4096 and after < before - 1_500_000
    finally:
        engine.dispose()


def test_the_cli_names_the_shortfall(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from service.core.config import get_settings
    from tests.support.cli import run

    _grown(sqlite_url).dispose()
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", sqlite_url)
    monkeypatch.setattr(upkeep.shutil, "disk_usage", lambda _: Usage(10**12, 0, 1000))
    get_settings.cache_clear()
    try:
        code, out, err = run(CliRunner(), "db", "compact")
    finally:
        get_settings.cache_clear()
    assert code == 1
    assert "compacting needs" in out + err and "0.0 MB are" in out + err


def test_the_scheduled_run_logs_and_never_raises(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    engine = _grown(sqlite_url)
    try:
        with caplog.at_level(logging.INFO, logger="gpuatlas.upkeep"):
            monkeypatch.setattr(upkeep.shutil, "disk_usage", lambda _: Usage(10**12, 0, 1000))
            assert scheduled_compaction(engine) is None
            assert "scheduled compaction skipped: compacting needs" in caplog.text
            monkeypatch.undo()
            sizes = scheduled_compaction(engine)
            assert sizes is not None and sizes[1] < sizes[0]
            assert "database compacted:" in caplog.text
    finally:
        engine.dispose()
    broken = make_engine(f"sqlite:///{Path(sqlite_url[10:]).parent / 'no' / 'such.db'}")
    with caplog.at_level(logging.ERROR, logger="gpuatlas.upkeep"):
        assert scheduled_compaction(broken) is None  # cannot open: logged, not raised
    assert "scheduled compaction failed" in caplog.text
    broken.dispose()


def _settings(url: str, **values: object) -> Settings:
    return Settings(database_url=url, environment="test", _env_file=None, **values)  # type: ignore[call-arg, arg-type]


def test_compact_schedule_setting(sqlite_url: str) -> None:
    assert _settings(sqlite_url).compact_schedule == "30 3 * * sun"
    assert _settings(sqlite_url, compact_schedule="OFF").compact_schedule is None
    assert _settings(sqlite_url, compact_schedule="  ").compact_schedule is None
    assert _settings(sqlite_url, compact_schedule=" 0  4 1 * * ").compact_schedule == "0 4 1 * *"
    for bad in ("weekly", "61 3 * * sun", "0 3 * *", "0 3 * * sun extra", "x" * 10_000):
        with pytest.raises(ValidationError, match="GPUATLAS_COMPACT_SCHEDULE is not a crontab"):
            _settings(sqlite_url, compact_schedule=bad)


def test_the_scheduler_compacts_on_its_schedule(sqlite_engine: Engine, sqlite_url: str) -> None:
    scheduler = build_scheduler(sqlite_engine, _settings(sqlite_url), run=lambda name: None)
    job = scheduler.get_job(COMPACTION_JOB)
    assert job is not None and job.args == (sqlite_engine,)
    after = datetime(2026, 12, 5, 21, 0, tzinfo=UTC)  # a Saturday
    fires = job.trigger.get_next_fire_time(None, after)
    assert fires == datetime(2026, 12, 6, 3, 30, tzinfo=UTC)  # Sunday, 03:30 UTC
    off = build_scheduler(
        sqlite_engine, _settings(sqlite_url, compact_schedule="off"), run=lambda name: None
    )
    assert off.get_job(COMPACTION_JOB) is None
    assert off.get_job("alerts:dispatch") is not None  # the rest is scheduled as before


def test_compaction_waits_for_a_writer(sqlite_url: str) -> None:
    """A compaction started while an ingest-like writer holds the write lock waits for it
    (SQLite's busy timeout) instead of failing, then runs; the writer's row is kept, and
    the next writer finds the lock free."""
    import threading
    import time

    from service.core.db import writer

    engine = _grown(sqlite_url)
    other = make_engine(sqlite_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE marks (v INTEGER)"))
        holding, done = threading.Event(), threading.Event()

        def hold() -> None:
            with writer(other).begin() as conn:  # BEGIN IMMEDIATE, as an ingest's
                conn.execute(text("INSERT INTO marks VALUES (1)"))
                holding.set()
                time.sleep(1.0)
            done.set()

        thread = threading.Thread(target=hold)
        thread.start()
        assert holding.wait(10)
        started = time.monotonic()
        before, after = compact(engine)  # waits for the writer's commit
        waited = time.monotonic() - started
        thread.join(10)
        assert done.is_set() and waited >= 0.5 and after < before
        with writer(other).begin() as conn:  # the lock is free again
            conn.execute(text("INSERT INTO marks VALUES (2)"))
        with engine.connect() as conn:
            marks = [row[0] for row in conn.execute(text("SELECT v FROM marks ORDER BY v"))]
        assert marks == [1, 2]
    finally:
        other.dispose()
        engine.dispose()
