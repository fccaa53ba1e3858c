"""SQLite's own share of a first ingest: the rows the ingest left, written by SQLite alone.

    .venv/bin/python -m tests.bench.user_path   (prints it next to the first ingest)

Given the catalog before a first ingest (``empty``) and after it (``full``), a copy of the
empty one receives every row the ingest added, table by table, by one ``INSERT ... SELECT``
from the attached full catalog, with the plain indexes of those tables dropped first and
built again after (as the ingest defers them: ``service.catalog.bulk.indexes_deferred``),
in one transaction, committed. No Python runs per row: no file read, no validation, no
staging, no binding. What this takes is the least any first ingest of these rows into
this schema can take on this machine, whatever its Python does; the ingest's own time
beside it says how much is left to take out of the interpreter.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Floor:
    seconds: float
    """From the transaction's start to its commit."""
    copy_seconds: float
    """The rows' ``INSERT ... SELECT`` (the unique indexes kept up to date as they go)."""
    index_seconds: float
    """The plain indexes built again."""
    rows: int
    indexes: int


def _grown(empty: sqlite3.Connection, full: sqlite3.Connection) -> list[str]:
    """The tables whose row count the ingest changed (it only adds rows to a catalog)."""
    names = [
        r[0]
        for r in full.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    count = 'SELECT count(*) FROM "{}"'
    return [
        name
        for name in names
        if full.execute(count.format(name)).fetchone()
        != empty.execute(count.format(name)).fetchone()
    ]


def measure(empty: Path, full: Path, scratch: Path) -> Floor:
    """The floor for the rows ``full`` holds beyond ``empty``; ``scratch`` is overwritten."""
    with closing(sqlite3.connect(empty)) as before, closing(sqlite3.connect(full)) as after:
        tables = _grown(before, after)
    shutil.copy(empty, scratch)
    conn = sqlite3.connect(scratch, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # as service.core.db sets it
        conn.execute("ATTACH DATABASE ? AS full", (str(full),))
        plain = [
            (name, sql)
            for table in tables
            for name, sql in conn.execute(
                "SELECT name, sql FROM main.sqlite_master WHERE type = 'index' "
                "AND tbl_name = ? AND sql IS NOT NULL",
                (table,),
            )
            if not sql.upper().startswith("CREATE UNIQUE")
        ]
        started = time.perf_counter()
        conn.execute("BEGIN")
        for name, _ in plain:
            conn.execute(f'DROP INDEX main."{name}"')
        rows = 0
        for table in tables:
            conn.execute(f'DELETE FROM main."{table}"')
            rows += conn.execute(
                f'INSERT INTO main."{table}" SELECT * FROM full."{table}"'
            ).rowcount
        copied = time.perf_counter()
        for _, sql in plain:
            conn.execute(sql)
        indexed = time.perf_counter()
        conn.execute("COMMIT")
        done = time.perf_counter()
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{scratch}{suffix}").unlink(missing_ok=True)
    return Floor(done - started, copied - started, indexed - copied, rows, len(plain))
