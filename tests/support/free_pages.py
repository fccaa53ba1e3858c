"""A database with space to give back: 2 MB written, then dropped (free pages on SQLite,
dead space PostgreSQL's VACUUM marks reusable)."""

from __future__ import annotations

from sqlalchemy import text

from service.core.db import make_engine


def leave_free_pages(url: str) -> None:
    """Write a 2 MB table into the database at ``url``, then drop it."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE scratch (v TEXT)"))
            conn.execute(text("INSERT INTO scratch VALUES (:v)"), [{"v": "x" * 2000}] * 1000)
            conn.execute(text("DROP TABLE scratch"))
    finally:
        engine.dispose()
