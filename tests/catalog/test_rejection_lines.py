"""A JSON Lines file's rejections name the lines they are on.

Blank, overlong and unreadable lines hand no record on, so a record's place among the
records read is not its line: every rejection is stored (and printed) at its line, whether
the line was unreadable or its record invalid, in every batch, on the first ingest and
when the unchanged lines are skipped.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from schema.crawl import RejectedRecord
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.catalog.snapshot import MAX_LINE_BYTES, JsonlRecords, ingest_jsonl, read_jsonl
from service.core.config import Settings
from tests.support.factories import record

REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]


def line(i: int, **overrides: str) -> bytes:
    return orjson.dumps(record(i, source="mytool", **overrides))


LINES = [
    line(0),  # 0
    b"",  # 1: blank, skipped
    b"{not json",  # 2
    b"x" * (MAX_LINE_BYTES + 10),  # 3: too long
    line(1, amount="-1"),  # 4
    b"   ",  # 5: blank
    line(2),  # 6
    b"[1, 2, 3]",  # 7: not an object
    line(2, amount="99"),  # 8: line 6's offer with another price: neither is kept
    line(3, currency="XXY"),  # 9
    line(4),  # 10
]
EXPECTED = [
    (2, "invalid JSON"),
    (3, "longer than"),
    (4, "amount: price must be positive"),
    (7, "record: Input should be a valid dictionary"),
    (8, "duplicate offer with a different price"),
    (9, "currency: unknown ISO 4217 currency"),
]


def stored(engine: Engine, run_id: int) -> list[tuple[int, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(REJECTED.c.position, REJECTED.c.reason).where(REJECTED.c.crawl_run_id == run_id)
        ).all()
    return sorted((position, reason) for position, reason in rows)


def matches(found: list[tuple[int, str]]) -> bool:
    return len(found) == len(EXPECTED) and all(
        position == want and text in reason
        for (position, reason), (want, text) in zip(found, EXPECTED, strict=True)
    )


@pytest.mark.parametrize("batch_size", [1, 2, 3, 2_500])
def test_every_rejection_is_stored_at_its_line(
    engine: Engine, settings: Settings, tmp_path: Path, batch_size: int
) -> None:
    path = tmp_path / "mytool.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    records = read_jsonl(path, "mytool")
    crawl = CrawlResult(source="mytool", records=records, rejections=records.rejections)
    result = ingest(engine, settings, crawl, batch_size=batch_size)
    assert result.status.value == "ok" and result.counts["added"] == 2  # lines 0 and 10
    found = sorted((r.position, r.reason) for r in result.rejections)
    assert matches(found), found
    assert matches(stored(engine, result.crawl_run_id))


def test_rejections_keep_their_lines_when_unchanged_lines_are_skipped(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "mytool.jsonl"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    first = ingest_jsonl(engine, settings, path, "mytool")
    again = LINES[:10] + [line(4, amount="30")]  # the last offer repriced: not confirmed
    path.write_bytes(b"\n".join(again) + b"\n")
    second = ingest_jsonl(engine, settings, path, "mytool")
    assert second.status.value == "ok" and second.counts["changed"] == 1
    for result in (first, second):
        found = sorted((r.position, r.reason) for r in result.rejections)
        assert matches(found), found
        assert matches(stored(engine, result.crawl_run_id))


@given(st.lists(st.sampled_from(["record", "blank", "unreadable"]), max_size=60))
def test_each_item_is_placed_at_its_line(kinds: list[str]) -> None:
    """The runs of skipped lines against a plain count, on every arrangement."""
    records = JsonlRecords(Path("unused.jsonl"), "mytool")
    items = []
    for position, kind in enumerate(kinds):
        if kind == "record":
            items.append(position)
        else:
            records._skip(position)
    assert [records.line_position(i) for i in range(len(items))] == items
