"""The sources the service knows, as data: written from the crawler registry by the
processes that crawl, read by the API (which never imports ``crawlers/``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from schema.crawl import SourceInfo
from schema.types import utcnow
from service.core.db import writer

SOURCE = SourceInfo.__table__  # type: ignore[attr-defined]


def sync_sources(engine: Engine) -> int:
    """Write every registered source's metadata (idempotent); returns how many there are."""
    from crawlers.registry import all_sources  # the crawling side only

    now = utcnow()
    rows = [
        {
            "name": name,
            "provider": getattr(cls, "provider", name),
            "kind": getattr(cls, "kind", "api"),
            "schedule": getattr(cls, "schedule", "6h"),
            "credential": getattr(cls, "credential", None),
            "parser_version": getattr(cls, "parser_version", None),
            "docs_url": getattr(cls, "docs_url", None),
            "updated_at": now,
        }
        for name, cls in all_sources().items()
    ]
    columns = [c for c in rows[0] if c != "name"] if rows else []
    with writer(engine).begin() as conn:
        # Upsert, so several processes (replicas starting at once) can sync concurrently.
        upsert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        for row in rows:
            stmt = upsert(SOURCE).values(**row)
            stmt = stmt.on_conflict_do_update(
                index_elements=["name"], set_={c: stmt.excluded[c] for c in columns}
            )
            conn.execute(stmt)
        conn.execute(delete(SOURCE).where(SOURCE.c.name.not_in([r["name"] for r in rows])))
    return len(rows)


def list_sources(conn: Connection) -> dict[str, dict[str, Any]]:
    """Source name -> its metadata, in name order."""
    return {
        row["name"]: dict(row)
        for row in conn.execute(select(SOURCE).order_by(SOURCE.c.name)).mappings()
    }
