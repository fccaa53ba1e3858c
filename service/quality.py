"""Data-quality reports: names the reference data does not know yet (invariant 6)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from schema.crawl import UnmappedName

UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]


def list_unmapped(
    conn: Connection, kind: str | None = None, source: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Unknown GPU names, regions and providers, most frequent first."""
    stmt = (
        select(
            UNMAPPED.c.kind,
            UNMAPPED.c.source,
            UNMAPPED.c.value,
            UNMAPPED.c.occurrences,
            UNMAPPED.c.first_seen_at,
            UNMAPPED.c.last_seen_at,
            UNMAPPED.c.last_crawl_run_id,
        )
        .order_by(UNMAPPED.c.occurrences.desc(), UNMAPPED.c.kind, UNMAPPED.c.value)
        .limit(limit)
    )
    if kind:
        stmt = stmt.where(UNMAPPED.c.kind == kind)
    if source:
        stmt = stmt.where(UNMAPPED.c.source == source)
    return [dict(row) for row in conn.execute(stmt).mappings()]
