"""Shared fixtures: real SQLite files, the real PostgreSQL server, a real local HTTP server."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from service.alerts.listeners import install
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings, get_settings
from service.core.db import make_engine, normalize_url
from service.core.migrate import upgrade
from tests.support.pg import (
    Snapshot,
    can_skip_foreign_keys,
    create_pg_database,
    drop_pg_database,
    empty_database,
    pg_database,
    snapshot,
)
from tests.support.replay import ReplayServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REALDATA = ROOT.parent / "shared" / "realdata"
IN_CI = os.environ.get("CI", "").lower() == "true"
PG_URL = os.environ.get("GPUATLAS_TEST_POSTGRES_URL")

install()  # every ingest of the tests writes its alert events, as the CLI's and API's do


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (tens of seconds each) run first, in their order: under
    pytest-xdist each then starts on a worker at once instead of lengthening the run's
    tail while the other worker idles."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def postgres_admin_url() -> str | None:
    """The test server's URL, or None; under CI=true its absence is a failure."""
    if PG_URL:
        return normalize_url(PG_URL)
    if IN_CI:
        pytest.fail("CI=true but GPUATLAS_TEST_POSTGRES_URL is not set: PostgreSQL is required")
    return None


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def sqlite_reference_template(sqlite_template: Path) -> Path:
    """The migrated template with ``fixtures/reference/`` loaded (once per process)."""
    path = sqlite_template.with_name("reference.db")
    shutil.copy(sqlite_template, path)
    engine = make_engine(f"sqlite:///{path}")
    try:
        load_reference(engine, REFERENCE_DIR)
    finally:
        engine.dispose()
    return path


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    path = tmp_path / "gpuatlas.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_reference_url(sqlite_reference_template: Path, tmp_path: Path) -> str:
    """A file of its own holding the reference data, as ``load_reference`` leaves it."""
    path = tmp_path / "gpuatlas.db"
    shutil.copy(sqlite_reference_template, path)
    return f"sqlite:///{path}"


@contextmanager
def scratch_pg_database() -> Iterator[str]:
    """A PostgreSQL database of its own on the test server, dropped afterwards (the test
    is skipped when no server is configured, and fails under CI=true)."""
    admin = postgres_admin_url()
    if admin is None:
        pytest.skip("PostgreSQL not configured (set GPUATLAS_TEST_POSTGRES_URL)")
    with pg_database(admin) as url:
        yield url


_SESSION_DATABASES: list[str] = []
"""This process's long-lived PostgreSQL databases, dropped together when it ends."""


def session_pg_database() -> str:
    """A migrated PostgreSQL database kept until this process's tests end (skipped when
    no server is configured, a failure under CI=true). Each DROP DATABASE forces a
    checkpoint, which on a busy server takes seconds: they are dropped at once, at the end."""
    admin = postgres_admin_url()
    if admin is None:
        pytest.skip("PostgreSQL not configured (set GPUATLAS_TEST_POSTGRES_URL)")
    url = create_pg_database(admin)
    _SESSION_DATABASES.append(url)
    upgrade(url)
    return url


def pytest_sessionfinish(session: pytest.Session) -> None:
    admin = postgres_admin_url() if _SESSION_DATABASES else None
    if admin is None:
        return
    with ThreadPoolExecutor(len(_SESSION_DATABASES)) as pool:
        list(pool.map(lambda url: drop_pg_database(admin, url), _SESSION_DATABASES))
    _SESSION_DATABASES.clear()


@pytest.fixture(scope="session")
def pg_session_url() -> str:
    return session_pg_database()


_FAST_EMPTY: dict[str, bool] = {}


@pytest.fixture(scope="session")
def pg_module_session_url() -> str:
    """A second PostgreSQL database of this process, migrated once: the one that a module
    shares (``module_db_url``), so that no ``pg_url`` test empties it under the module."""
    return session_pg_database()


@pytest.fixture(scope="session")
def pg_second_session_url() -> str:
    """One more PostgreSQL database of this process, migrated once, for tests that compare
    two databases (empty it, or give it the reference data, with ``with_reference``)."""
    return session_pg_database()


def truncate_all(url: str, restore: Snapshot | None = None) -> None:
    """Empty every table (sequences restarted), then put ``restore`` back if given."""
    if url not in _FAST_EMPTY:
        _FAST_EMPTY[url] = can_skip_foreign_keys(url)
    if _FAST_EMPTY[url]:
        empty_database(url, restore)
        return
    _truncate_every_table(url)
    if restore is not None:
        raise RuntimeError("restoring a snapshot needs session_replication_role")


def _truncate_every_table(url: str) -> None:
    """The slow way (a role that may not skip foreign keys): TRUNCATE every table."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    text(
                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                        "AND tablename <> 'alembic_version'"
                    )
                )
            ]
            if tables:
                conn.execute(
                    text(
                        "TRUNCATE "
                        + ", ".join(f'"{t}"' for t in tables)
                        + " RESTART IDENTITY CASCADE"
                    )
                )
    finally:
        engine.dispose()


@pytest.fixture
def pg_url(pg_session_url: str) -> str:
    truncate_all(pg_session_url)
    return pg_session_url


_PG_REFERENCE: dict[str, Snapshot | None] = {}


def with_reference(url: str) -> str:
    """``url`` (a database of this process) emptied, then holding the reference data: loaded
    once per process and snapshotted, then restored from the snapshot (loaded again each
    time when the role may not skip foreign keys)."""
    if url not in _PG_REFERENCE:
        truncate_all(url)
        engine = make_engine(url)
        try:
            load_reference(engine, REFERENCE_DIR)
        finally:
            engine.dispose()
        _PG_REFERENCE[url] = snapshot(url) if _FAST_EMPTY[url] else None
        return url
    shot = _PG_REFERENCE[url]
    truncate_all(url, shot)
    if shot is None:
        engine = make_engine(url)
        try:
            load_reference(engine, REFERENCE_DIR)
        finally:
            engine.dispose()
    return url


@pytest.fixture
def pg_reference_url(pg_session_url: str) -> str:
    return with_reference(pg_session_url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each test using this runs on a fresh SQLite file and on the PostgreSQL server; when
    the test (or a fixture it uses) requests ``reference_data``, the database starts with
    ``fixtures/reference/`` loaded."""
    reference = "reference_data" in request.fixturenames
    if request.param == "sqlite":
        fixture = "sqlite_reference_url" if reference else "sqlite_url"
    else:
        fixture = "pg_reference_url" if reference else "pg_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def module_db_url(
    request: pytest.FixtureRequest,
    sqlite_reference_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """A database with the reference data for a module's tests to share, on SQLite and on
    PostgreSQL. Only for tests that read: the module's fixture seeds it once and wraps
    its tests in ``tests.support.readonly.unchanged``, which proves that they only read.
    (PostgreSQL: ``pg_module_session_url``, emptied and given the reference data again
    for each module: one module's fixture at a time lives in a process.)"""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("module") / "gpuatlas.db"
        shutil.copy(sqlite_reference_template, path)
        yield f"sqlite:///{path}"
        return
    yield with_reference(request.getfixturevalue("pg_module_session_url"))


@pytest.fixture(scope="module")
def module_engine(module_db_url: str) -> Iterator[Engine]:
    engine = make_engine(module_db_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def module_settings(module_db_url: str) -> Settings:
    return Settings(database_url=module_db_url, environment="test", _env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def reference_data(db_url: str) -> None:
    """Request this instead of calling ``load_reference(engine, REFERENCE_DIR)`` first
    thing: ``db_url``'s database then already holds the reference data, loaded once per
    test process and copied (SQLite: a template file; PostgreSQL: a snapshot of the rows,
    see tests/support/pg.py) rather than loaded again for each test. The data equals a
    fresh load's except for the load time that compliance versions record (minutes older)."""


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(database_url=db_url, environment="test", _env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", db_url)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as replay:
        yield replay


@pytest.fixture
def realdata() -> Path:
    if not REALDATA.is_dir():
        if IN_CI:
            pytest.fail(f"CI=true but {REALDATA} is missing")
        pytest.skip("../shared/realdata is not present")
    return REALDATA
