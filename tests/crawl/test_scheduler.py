"""Scheduled crawls run in a child process: a hang or crash ends on its crawl run, nothing more.

The child runner is tested directly with a real source (``oracle``) whose base URL points
at a local server: one that hangs (→ ``failed: timeout``), one that serves good data
(→ ``ok``), and a child that dies by SIGKILL (→ ``failed: crashed``).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from schema.crawl import CrawlRun
from schema.prices import Offer
from schema.types import utcnow
from service.core.config import PROJECT_ROOT, Settings
from service.crawl.child import run_crawl_in_child
from service.crawl.scheduler import build_scheduler
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply

ROUTE = "/pls/apex/cetools/api/v1/products/?currencyCode=USD"
FILE = FIXTURES / "oracle" / "products-USD.json"
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
OFFER = Offer.__table__  # type: ignore[attr-defined]


def crawl_settings(settings: Settings, server: ReplayServer, **update: Any) -> Settings:
    return settings.model_copy(
        update={"source_base_urls": {"oracle": server.url}, "http_max_retries": 0, **update}
    )


def run_row(engine: Engine, run_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(select(RUN).where(RUN.c.id == run_id)).mappings().one())


def offers(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(OFFER)).scalar() or 0)


def test_good_data_is_crawled_in_a_child(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(ROUTE, Reply.file(FILE))
    outcome = run_crawl_in_child(engine, crawl_settings(settings, server), "oracle")
    assert outcome.label == "ok" and outcome.exit_code == 0
    row = run_row(engine, outcome.crawl_run_id)
    assert row["status"] == "ok" and row["trigger"] == "scheduler" and row["finished_at"]
    assert row["catalog_version"] == 1 and offers(engine) > 0
    assert len(server.requests) == 1


def test_a_hanging_crawl_is_killed_and_recorded(
    sqlite_engine: Engine, sqlite_url: str, server: ReplayServer
) -> None:
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    server.route(ROUTE, Reply.file(FILE, delay=30))
    started = time.monotonic()
    outcome = run_crawl_in_child(
        sqlite_engine,
        crawl_settings(settings, server, crawl_timeout_seconds=3, http_timeout_seconds=60),
        "oracle",
    )
    assert time.monotonic() - started < 8
    assert outcome.label == "failed: timeout"
    row = run_row(sqlite_engine, outcome.crawl_run_id)
    assert (row["status"], row["reason"]) == ("failed", "timeout")
    assert "no result after 3 s" in row["error"] and row["finished_at"] is not None
    assert offers(sqlite_engine) == 0  # the catalog is as it was
    server.route(ROUTE, Reply.file(FILE))  # the next crawl of the source works
    assert run_crawl_in_child(sqlite_engine, crawl_settings(settings, server), "oracle").label == (
        "ok"
    )


def test_a_crashing_child_is_recorded(
    sqlite_engine: Engine,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    suicidal = tmp_path / "python"  # stands in for the interpreter: dies at once by SIGKILL
    suicidal.write_text("#!/bin/sh\nkill -KILL $$\n")
    suicidal.chmod(suicidal.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(suicidal))
    outcome = run_crawl_in_child(sqlite_engine, settings, "oracle")
    assert outcome.label == "failed: crashed" and outcome.exit_code == -9
    row = run_row(sqlite_engine, outcome.crawl_run_id)
    assert "killed by signal 9" in row["error"]


def test_a_killed_childs_temporary_files_are_deleted(
    sqlite_engine: Engine,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child spools into a folder of its own (TMPDIR), deleted once it is gone, even
    when it was killed before its own cleanup could run."""
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    where = tmp_path / "where"
    spooling = tmp_path / "python"  # stands in for the interpreter: spools, then dies
    spooling.write_text(
        "#!/bin/sh\n"
        'head -c 100000 /dev/zero > "$TMPDIR/gpuatlas-spooled.payload"\n'
        f'echo "$TMPDIR" > {where}\n'
        "kill -KILL $$\n"
    )
    spooling.chmod(spooling.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(spooling))
    outcome = run_crawl_in_child(sqlite_engine, settings, "oracle")
    assert outcome.label == "failed: crashed"
    scratch = Path(where.read_text().strip())
    assert scratch.name.startswith(f"gpuatlas-run{outcome.crawl_run_id}-")
    assert scratch.parent == Path(tempfile.gettempdir())  # not the system folder itself
    assert not scratch.exists()


def test_the_scheduler_survives_a_failing_crawl(sqlite_engine: Engine, sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]

    def explode(name: str) -> None:
        raise RuntimeError(f"{name} blew up")

    scheduler = build_scheduler(sqlite_engine, settings, run=explode)
    job = scheduler.get_job("crawl:oracle")
    assert job is not None
    job.func(*job.args)  # logged, not raised: the scheduler thread carries on


def test_post_run_triggers_a_crawl_now(
    sqlite_engine: Engine, sqlite_url: str, server: ReplayServer
) -> None:
    from fastapi.testclient import TestClient

    from service.alerts.keys import create_api_key
    from service.api.main import create_app
    from service.crawl.sources import sync_sources

    server.route(ROUTE, Reply.file(FILE))
    sync_sources(sqlite_engine)  # written by seed/scheduler/db upgrade; read by the API
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    app = create_app(crawl_settings(settings, server, scheduler_enabled=False))
    headers = {"X-API-Key": create_api_key(sqlite_engine, "ops").key}
    with TestClient(app) as client:
        assert client.post("/v1/sources/oracle/run").status_code == 401
        missing = client.post("/v1/sources/nope/run", headers=headers)
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("application/problem+json")
        response = client.post("/v1/sources/oracle/run", headers=headers)
        assert response.status_code == 202, response.text
        run_id = response.json()["crawl_run_id"]
        assert client.post("/v1/sources/oracle/run", headers=headers).status_code == 409
        deadline = time.monotonic() + 15
        while run_row(sqlite_engine, run_id)["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    row = run_row(sqlite_engine, run_id)
    assert (row["status"], row["trigger"]) == ("ok", "api")


def test_a_second_scheduler_on_one_sqlite_file_refuses_to_start(sqlite_url: str) -> None:
    from service.crawl.scheduler import SchedulerLockError, SqliteSchedulerLock

    first = SqliteSchedulerLock(sqlite_url)
    first.acquire()
    try:
        with pytest.raises(SchedulerLockError, match="another scheduler is already running"):
            SqliteSchedulerLock(sqlite_url).acquire()
    finally:
        first.release()
    again = SqliteSchedulerLock(sqlite_url)
    again.acquire()  # free once the first one stopped
    again.release()


def test_alert_delivery_has_its_own_thread_when_every_crawl_is_busy(
    sqlite_engine: Engine, sqlite_url: str
) -> None:
    """Every crawl thread blocked (all sources due at once, slow pages): the dispatcher still
    runs on schedule, on its own executor."""
    from threading import Event

    from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent

    settings = Settings(
        database_url=sqlite_url, environment="test", dispatcher_interval_seconds=1, _env_file=None
    )  # type: ignore[call-arg]
    release = Event()
    scheduler = build_scheduler(sqlite_engine, settings, run=lambda name: release.wait(30))
    assert scheduler.get_job("alerts:dispatch").executor == "alerts"  # type: ignore[union-attr]
    dispatched: list[float] = []

    def seen(event: JobExecutionEvent) -> None:
        if event.job_id == "alerts:dispatch":
            dispatched.append(time.monotonic())

    scheduler.add_listener(seen, EVENT_JOB_EXECUTED)
    for job in scheduler.get_jobs():  # every crawl due now: they fill the crawl pool
        if job.id.startswith("crawl:"):
            job.modify(next_run_time=utcnow())
    scheduler.start()
    try:
        deadline = time.monotonic() + 10
        while len(dispatched) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(dispatched) >= 2, "the dispatcher waited behind the crawls"
    finally:
        release.set()
        scheduler.shutdown(wait=False)


ORPHAN_PARENT = """
import sys
from service.core.config import Settings
from service.core.db import make_engine
from service.crawl import child

child.BACKSTOP_SECONDS = 1.0
settings = Settings.model_validate_json(sys.argv[1])
child.run_crawl_in_child(make_engine(settings.database_url), settings, "oracle")
"""


def test_a_hanging_child_of_a_killed_parent_ends_by_itself(
    sqlite_engine: Engine, sqlite_url: str, server: ReplayServer
) -> None:
    """The parent, which enforces the crawl's timeout, is SIGKILLed while its child hangs on
    a slow page: the child (a session of its own, so it survives) ends itself shortly after
    the limit, and its run is closed as interrupted by the next crawl of its source."""
    from service.catalog.run_owner import owner_alive

    server.route(ROUTE, Reply.file(FILE, delay=120))
    base = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    settings = crawl_settings(base, server, crawl_timeout_seconds=3, http_timeout_seconds=120)
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_PARENT, settings.model_dump_json()], env=env
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # the child has claimed its run: it is running
            with sqlite_engine.connect() as conn:
                row = conn.execute(select(RUN.c.id, RUN.c.owner)).one_or_none()
            if row is not None and row.owner and row.owner.split(":")[1] != str(parent.pid):
                break
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        started = time.monotonic()
    finally:
        parent.kill()
        parent.wait()
    assert owner_alive(row.owner) is True  # orphaned, hanging on the page
    while owner_alive(row.owner):  # the limit (3 s) and the backstop (1 s), from its start
        assert time.monotonic() - started < 20, "the orphaned child never ended"
        time.sleep(0.1)
    assert run_row(sqlite_engine, row.id)["status"] == "running"  # nobody closed it yet
    server.route(ROUTE, Reply.file(FILE))
    assert run_crawl_in_child(sqlite_engine, crawl_settings(base, server), "oracle").label == "ok"
    closed = run_row(sqlite_engine, row.id)
    assert (closed["status"], closed["reason"]) == ("failed", "interrupted")


def test_a_misspelt_source_in_the_schedules_is_an_error(sqlite_engine: Engine) -> None:
    """``GPUATLAS_SCHEDULES={"vast-ai": "10m"}`` would be ignored, the source crawled on its
    default: the scheduler refuses to start, naming it."""
    settings = Settings(
        database_url="sqlite://",
        environment="test",
        schedules={"vastai": "10m", "vast-ai": "10m"},
        _env_file=None,
    )  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="GPUATLAS_SCHEDULES names unknown sources: 'vast-ai'"):
        build_scheduler(sqlite_engine, settings, run=lambda name: None)
    from service.crawl.scheduler import Leader

    leader = Leader(sqlite_engine, settings)  # at start, before a lock is taken or a thread
    with pytest.raises(ValueError, match="'vast-ai'"):
        leader.start()
    assert not leader.is_leader and leader._thread is None
    urls = settings.model_copy(update={"schedules": {}, "source_base_urls": {"orcle": "x"}})
    with pytest.raises(
        ValueError, match="GPUATLAS_SOURCE_BASE_URLS names unknown sources: 'orcle'"
    ):
        build_scheduler(sqlite_engine, urls, run=lambda name: None)
    fine = settings.model_copy(update={"schedules": {"vastai": "10m", "aws": "off"}})
    scheduler = build_scheduler(sqlite_engine, fine, run=lambda name: None)
    assert "aws" not in {job.id for job in scheduler.get_jobs()}
