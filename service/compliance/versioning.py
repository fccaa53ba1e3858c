"""Record-time versioning shared by every compliance table.

A row is never updated in place. Loading a changed row sets ``superseded_at`` on the current
version and inserts a new version with ``recorded_at`` = the load time; a row that disappears
from the file is superseded without a successor.

Reading "as of" a day D picks, per logical key, the version that was current at the end of D
(UTC). Before the first version of a key was recorded, that first version stands in: the
catalog knew nothing else, and the rows' own validity dates still decide whether the fact held
on D. A key withdrawn before the end of D has no version on D.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Connection, Table, insert, select, update


def end_of_day(day: date) -> datetime:
    """The first instant after ``day`` (UTC): versions recorded before it were known on ``day``."""
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)


def sync_versions(
    conn: Connection,
    table: Table,
    key: Sequence[str],
    rows: Sequence[dict[str, Any]],
    now: datetime,
) -> int:
    """Make ``rows`` the current versions of ``table``; returns the number of versions written.

    Unchanged rows write nothing, so loading the same file twice is a no-op.
    """
    current = [
        dict(r)
        for r in conn.execute(select(table).where(table.c.superseded_at.is_(None))).mappings()
    ]
    by_key = {tuple(r[k] for k in key): r for r in current}
    superseded: list[int] = []
    inserts: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        row_key = tuple(row[k] for k in key)
        seen.add(row_key)
        old = by_key.get(row_key)
        if old is not None and all(old[c] == v for c, v in row.items()):
            continue
        if old is not None:
            superseded.append(old["id"])
        inserts.append({**row, "recorded_at": now, "superseded_at": None})
    removed = [old["id"] for row_key, old in by_key.items() if row_key not in seen]
    superseded += removed
    for start in range(0, len(superseded), 500):
        ids = superseded[start : start + 500]
        conn.execute(update(table).where(table.c.id.in_(ids)).values(superseded_at=now))
    if inserts:
        conn.execute(insert(table), inserts)
    return len(inserts) + len(removed)


def version_on(versions: Sequence[dict[str, Any]], day: date) -> dict[str, Any] | None:
    """The version of one logical row that the catalog held at the end of ``day``."""
    if not versions:
        return None
    cutoff = end_of_day(day)
    known = [v for v in versions if v["recorded_at"] < cutoff]
    if not known:
        return min(versions, key=lambda v: v["recorded_at"])
    latest = max(known, key=lambda v: (v["recorded_at"], v["id"]))
    superseded = latest["superseded_at"]
    return latest if superseded is None or superseded >= cutoff else None


def rows_on(
    rows: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], Hashable], day: date
) -> list[dict[str, Any]]:
    """Group all versions by ``key`` and keep the version held on ``day`` for each."""
    groups: dict[Hashable, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    chosen = [version_on(versions, day) for versions in groups.values()]
    return [v for v in chosen if v is not None]


def all_versions(conn: Connection, table: Table, *where: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(select(table).where(*where)).mappings()]


def within(day: date, start: date | None, end: date | None) -> bool:
    """Inclusive validity test; ``None`` is an open end."""
    return (start is None or start <= day) and (end is None or day <= end)
