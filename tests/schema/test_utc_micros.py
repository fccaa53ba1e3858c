"""``schema.types.UTCMicros``: aware UTC in Python, microseconds since 1970 on SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import StatementError

from tests.schema.conftest import TYPED as TABLE


def test_stored_as_microseconds_read_as_aware_utc(sqlite_file) -> None:  # type: ignore[no-untyped-def]
    paris = timezone(timedelta(hours=1))
    times = [
        datetime(2026, 12, 5, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 12, 6, 0, 30, tzinfo=paris),  # 23:30 UTC the day before
        datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),
    ]
    with sqlite_file.begin() as conn:
        conn.execute(
            insert(TABLE),
            [{"id": i, "at": t} for i, t in enumerate(times)] + [{"id": 9, "at": None}],
        )
        stored = conn.execute(text("SELECT typeof(at), at FROM t ORDER BY id")).all()
        read = conn.execute(select(TABLE.c.at).order_by(TABLE.c.id)).scalars().all()
        later = conn.execute(select(TABLE.c.id).where(TABLE.c.at > times[1])).scalars().all()
    assert [kind for kind, _ in stored] == ["integer"] * 3 + ["null"]
    assert stored[0][1] == 1_796_515_199_999_999
    assert read == [t.astimezone(UTC) for t in times] + [None]
    assert all(t.tzinfo is UTC for t in read[:3])
    assert later == [0]  # a bound comparison is made on the integers


@pytest.mark.parametrize(
    ("bad", "error"),
    [(datetime(2026, 12, 5), ValueError), ("2026-12-05T00:00:00Z", TypeError), (0, TypeError)],
)
def test_what_is_not_an_aware_datetime_is_refused(sqlite_file, bad, error) -> None:  # type: ignore[no-untyped-def]
    with sqlite_file.begin() as conn, pytest.raises(StatementError) as raised:
        conn.execute(insert(TABLE), {"id": 1, "at": bad})
    assert isinstance(raised.value.orig, error)
    with sqlite_file.connect() as conn:
        assert conn.execute(select(TABLE.c.id)).all() == []
