"""The first ingest's SQLite floor copies exactly the rows the ingest added, drops and
builds again the plain indexes of those tables, and leaves no scratch file behind."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from service.alerts.listeners import install
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from tests.bench import sqlite_floor
from tests.bench.ingest import prepared, synthetic
from tests.bench.user_path import FLOORS, Step, copy_sqlite, print_verdicts


def counts(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


@pytest.mark.slow
def test_the_floor_copies_the_rows_the_first_ingest_added(tmp_path: Path) -> None:
    install()
    db = tmp_path / "catalog.db"
    engine, settings = prepared(f"sqlite:///{db}")
    try:
        empty, full = tmp_path / "empty.db", tmp_path / "full.db"
        copy_sqlite(db, empty)
        result = ingest(engine, settings, CrawlResult("bench", synthetic(300)))
        assert result.status.value == "ok"
        copy_sqlite(db, full)
    finally:
        engine.dispose()
    before, after = counts(empty), counts(full)
    grown = {t for t in after if after[t] != before[t]}
    assert {"offer", "price_observation"} <= grown
    scratch = tmp_path / "scratch.db"

    floor = sqlite_floor.measure(empty, full, scratch)

    assert floor.rows == sum(after[t] for t in grown)  # every row of those tables, once
    assert floor.indexes >= 11  # the offer table's plain indexes at least
    assert 0 < floor.copy_seconds <= floor.seconds
    assert 0 < floor.index_seconds <= floor.seconds
    assert not list(tmp_path.glob("scratch.db*"))
    assert counts(empty) == before  # the inputs are read, not written
    assert counts(full) == after


def test_the_floor_is_printed_beside_the_first_ingest(capsys: pytest.CaptureFixture[str]) -> None:
    FLOORS[1000] = sqlite_floor.Floor(2.0, 0.5, 1.25, 3000, 15)
    try:
        print_verdicts({("SQLite", 1000): [Step("first ingest", 1000, 5.0, 100.0, "0/0")]})
    finally:
        FLOORS.clear()
    out = capsys.readouterr().out
    assert (
        "the first ingest's floor at 1,000 offers: SQLite alone, the same rows: 2.00 s "
        "(3,000 rows copied in 0.50 s, 15 indexes built in 1.25 s, the commit): "
        "the first ingest took 2.5x that"
    ) in out
