"""``gpuatlas db compact``: SQLite gives its free pages back (VACUUM), PostgreSQL vacuums;
the catalog reads the same after."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from service.core.db import make_engine
from tests.support.cli import run
from tests.support.free_pages import leave_free_pages


def _pages(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql("PRAGMA page_count").scalar() or 0)
    finally:
        engine.dispose()


def test_compact_gives_free_space_back_and_keeps_the_catalog(cli: CliRunner, db_url: str) -> None:
    leave_free_pages(db_url)
    sqlite = db_url.startswith("sqlite")
    before = _pages(db_url) if sqlite else 0
    code, versions, _ = run(cli, "versions", "--format", "json")
    assert code == 0
    code, out, err = run(cli, "db", "compact")
    assert code == 0, out + err
    assert re.search(r"database compacted: [\d,.]+ MB -> [\d,.]+ MB", out + err)
    if sqlite:
        assert _pages(db_url) < before - 400  # the 2 MB of dropped pages are gone
    assert run(cli, "versions", "--format", "json")[1] == versions


def test_the_pooled_connection_is_given_back_as_it_came(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """VACUUM runs on the driver's connection in autocommit; the pool gets it back in the
    driver's mode it lent it in (the project's engines keep pysqlite in autocommit and
    begin themselves; a plain engine keeps pysqlite's default, which must survive)."""
    from sqlalchemy import create_engine

    from service.core.upkeep import compact

    engine = create_engine(f"sqlite:///{tmp_path / 'c.db'}")

    def modes() -> set[object]:
        raw = engine.raw_connection()
        try:
            return {raw.driver_connection.isolation_level}  # type: ignore[union-attr]
        finally:
            raw.close()

    try:
        lent = modes()
        compact(engine)
        assert modes() == lent and lent != {None}
    finally:
        engine.dispose()
