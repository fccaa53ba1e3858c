"""``service.query.sql.unix_seconds``: SQLite's whole seconds of an observation time kept
as microseconds (``UTCMicros``), floored as Python floors them, on either side of 1970."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Integer, create_engine, func, literal, select

from schema.types import EPOCH, MICROSECOND, utc_micros
from service.query.sql import unix_seconds

MICROS = [0, 1, 999_999, 1_000_000, -1, -999_999, -1_000_000, -1_000_001, 1_796_436_184_567_891]


@pytest.mark.parametrize("micros", MICROS)
def test_floored_like_python(micros: int) -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        seconds = unix_seconds(literal(micros, Integer))
        got, day = conn.execute(select(seconds, func.date(seconds, "unixepoch"))).one()
    assert got == micros // 1_000_000
    assert day == (EPOCH + micros * MICROSECOND).date().isoformat()


def test_the_stored_value_is_the_time() -> None:
    when = datetime(2026, 12, 5, 23, 59, 59, 999_999, tzinfo=UTC)
    assert EPOCH + utc_micros(when) * MICROSECOND == when
