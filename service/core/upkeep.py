"""Database upkeep: compaction (``gpuatlas db compact``).

A catalog grown by ingests keeps its indexes less than full (rows arrive in an order
other than most indexes'), and a migration that rewrites a table leaves its old pages
free inside an SQLite file. SQLite's ``VACUUM`` rewrites the file with every table and
index packed (a 5,000,000-observation catalog: 127 -> 119 bytes per observation,
docs/benchmarks.md); PostgreSQL's ``VACUUM (ANALYZE)`` marks dead rows' space reusable
and refreshes the planner's statistics (autovacuum does the same on its own schedule)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine


def database_bytes(conn: Connection) -> int:
    """The database's size: SQLite's pages in use (the file, once checkpointed), or
    PostgreSQL's ``pg_database_size``."""
    if conn.dialect.name == "sqlite":
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar() or 0
        size = conn.exec_driver_sql("PRAGMA page_size").scalar() or 0
        return int(pages) * int(size)
    return int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0)


def compact(engine: Engine) -> tuple[int, int]:
    """Compact the database; its size before and after, in bytes. Runs outside any
    transaction (neither database vacuums inside one)."""
    with engine.connect() as conn:
        before = database_bytes(conn)
        conn.rollback()
    if engine.dialect.name == "sqlite":
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
