"""``schema.types.CompactDate``: a date in Python, days since 1970 on SQLite."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import StatementError

from tests.schema.conftest import TYPED as TABLE


def test_stored_as_days_read_as_dates(sqlite_file) -> None:  # type: ignore[no-untyped-def]
    days = [date(2026, 12, 1), date(1970, 1, 1), date(1969, 12, 31), date(9999, 12, 31)]
    with sqlite_file.begin() as conn:
        conn.execute(
            insert(TABLE),
            [{"id": i, "day": d} for i, d in enumerate(days)] + [{"id": 9, "day": None}],
        )
        stored = conn.execute(text("SELECT typeof(day), day FROM t ORDER BY id")).all()
        read = conn.execute(select(TABLE.c.day).order_by(TABLE.c.id)).scalars().all()
        later = conn.execute(select(TABLE.c.id).where(TABLE.c.day > days[1])).scalars().all()
    assert [kind for kind, _ in stored] == ["integer"] * 4 + ["null"]
    assert [value for _, value in stored[:3]] == [20788, 0, -1]
    assert read == [*days, None]
    assert sorted(later) == [0, 3]  # a bound comparison is made on the integers


@pytest.mark.parametrize("bad", [datetime(2026, 12, 1, tzinfo=UTC), "2026-12-01", 20788])
def test_what_is_not_a_date_is_refused(sqlite_file, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StatementError, match="expected a date"), sqlite_file.begin() as conn:
        conn.execute(insert(TABLE), {"id": 1, "day": bad})
