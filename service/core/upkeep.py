"""Database upkeep: compaction (``gpuatlas db compact``, and the scheduler's weekly run).

A catalog grown by ingests keeps its indexes less than full (rows arrive in an order
other than most indexes'), and a migration that rewrites a table leaves its old pages
free inside an SQLite file. SQLite's ``VACUUM`` rewrites the file with every table and
index packed (a 5,000,000-observation catalog: 127 -> 119 bytes per observation,
docs/benchmarks.md); PostgreSQL's ``VACUUM (ANALYZE)`` marks dead rows' space reusable
and refreshes the planner's statistics (autovacuum does the same on its own schedule).

SQLite's ``VACUUM`` copies the database into a temporary file, then writes it back
through the write-ahead log: it needs free disk as large as the database twice (once
where SQLite keeps temporary files, once beside the database). :func:`compact` checks
that first and refuses, naming both, rather than filling a disk the catalog lives on."""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import make_url

log = logging.getLogger("gpuatlas.upkeep")


class CompactionRefused(RuntimeError):
    """Compaction would not fit on the disk (nothing was changed)."""


def database_bytes(conn: Connection) -> int:
    """The database's size: SQLite's pages in use (the file, once checkpointed), or
    PostgreSQL's ``pg_database_size``."""
    if conn.dialect.name == "sqlite":
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar() or 0
        size = conn.exec_driver_sql("PRAGMA page_size").scalar() or 0
        return int(pages) * int(size)
    return int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0)


def sqlite_temp_dir(environ: dict[str, str] | None = None) -> Path:
    """Where SQLite (its unix VFS) writes temporary files: ``SQLITE_TMPDIR``, ``TMPDIR``,
    ``/var/tmp``, ``/usr/tmp``, ``/tmp``, the first that is a writable directory, else
    the working directory."""
    env = os.environ if environ is None else environ
    # only where free space is read, nothing is written there
    fixed = ["/var/tmp", "/usr/tmp", "/tmp"]  # noqa: S108
    candidates = [env.get("SQLITE_TMPDIR"), env.get("TMPDIR"), *fixed]
    for candidate in candidates:
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return Path(candidate)
    return Path.cwd()


@dataclass(frozen=True)
class Room:
    """Free disk where a ``VACUUM`` writes: its temporary copy and the write-ahead log."""

    database: Path
    temp: Path
    database_free: int
    temp_free: int
    shared: bool
    """Whether both are on one file system (then it must hold both copies)."""

    def shortfall(self, size: int) -> str | None:
        """Why ``size`` bytes cannot be compacted here (None: they can)."""
        if self.shared:
            if self.database_free < 2 * size:
                return (
                    f"compacting needs {_mb(2 * size)} free on the disk of {self.database} "
                    f"(a temporary copy in {self.temp} and the write-ahead log), "
                    f"{_mb(self.database_free)} are"
                )
            return None
        if self.temp_free < size:
            return (
                f"compacting needs {_mb(size)} free in {self.temp} (SQLite's temporary copy; "
                f"SQLITE_TMPDIR sets where), {_mb(self.temp_free)} are"
            )
        if self.database_free < size:
            return (
                f"compacting needs {_mb(size)} free beside {self.database} (the write-ahead "
                f"log), {_mb(self.database_free)} are"
            )
        return None


def room(database: Path, temp: Path | None = None) -> Room:
    """The free disk a ``VACUUM`` of the SQLite file ``database`` can use."""
    temp = temp if temp is not None else sqlite_temp_dir()
    folder = database.resolve().parent
    return Room(
        database=database,
        temp=temp,
        database_free=shutil.disk_usage(folder).free,
        temp_free=shutil.disk_usage(temp).free,
        shared=os.stat(folder).st_dev == os.stat(temp).st_dev,
    )


def compact(engine: Engine) -> tuple[int, int]:
    """Compact the database; its size before and after, in bytes. Runs outside any
    transaction (neither database vacuums inside one). On SQLite, raises
    :class:`CompactionRefused` first when the disk could not hold it (:class:`Room`)."""
    with engine.connect() as conn:
        before = database_bytes(conn)
        conn.rollback()
    if engine.dialect.name == "sqlite":
        database = make_url(engine.url).database
        if database and database != ":memory:":
            reason = room(Path(database)).shortfall(before)
            if reason is not None:
                raise CompactionRefused(reason)
        # on the driver's own connection: the engine's opens a transaction itself
        raw = engine.raw_connection()
        driver: Any = raw.driver_connection
        previous = driver.isolation_level
        try:
            driver.isolation_level = None
            driver.execute("VACUUM")
            driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:  # back to the pool as it came
            driver.isolation_level = previous
            raw.close()
    else:
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM (ANALYZE)")
    with engine.connect() as conn:
        after = database_bytes(conn)
    return before, after


def scheduled_compaction(engine: Engine) -> tuple[int, int] | None:
    """The scheduler's run of :func:`compact`: logged, never raised (a database busy or a
    disk too full for it leaves the catalog as it was, and the next run tries again)."""
    try:
        before, after = compact(engine)
    except CompactionRefused as exc:
        log.warning("scheduled compaction skipped: %s", exc)
        return None
    except Exception:
        log.exception("scheduled compaction failed; the next one tries again")
        return None
    log.info("database compacted: %s -> %s", _mb(before), _mb(after))
    return before, after


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"
