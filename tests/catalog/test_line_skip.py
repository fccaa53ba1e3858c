"""Unchanged lines skipped (service.catalog.lines): an ingest that skips the lines stored
with their offers' current state writes exactly what the full path writes.

Every test ingests the same files into two fresh databases of one kind: ``engine`` with
the shortcut, ``twin`` with it disabled (no stored digest offered to the reader, so every
line is parsed, validated and diffed), and compares results and every row written.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Engine, insert, inspect, select, text, update

from schema.catalog import Region
from schema.prices import Offer, OfferLine
from service.catalog import snapshot
from service.catalog.ingest import ingest
from service.catalog.lines import LineIndex, line_digest
from service.catalog.results import CrawlResult, IngestResult
from service.catalog.snapshot import MAX_LINE_BYTES, ingest_jsonl, read_jsonl
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.core.migrate import downgrade, upgrade
from tests.catalog.test_ingest_stream import dump, summary
from tests.conftest import scratch_pg_database, with_reference
from tests.support.factories import record

OFFER = Offer.__table__  # type: ignore[attr-defined]
LINE = OfferLine.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
START = datetime(2026, 6, 1, tzinfo=UTC)
OFFERS = 10
SKIPPABLE = OFFERS - 4
"""Offers whose lines are skipped once recorded: not offer 1 (region global: locations
follow each line), 2 (an unmapped GPU name, counted from its record), nor 0 and 5 while
their region zz is unknown (unmapped)."""


@contextmanager
def full_path() -> Iterator[None]:
    """Ingests within skip nothing: the reader is offered no stored digest."""
    with mock.patch.object(LineIndex, "open", lambda index, state: index.release()):
        yield


class Pair:
    """Two fresh databases of one kind: ``a`` ingests with the shortcut, ``b`` without."""

    def __init__(self, a: Engine, b: Engine, settings: Settings, folder: Path) -> None:
        self.a, self.b, self.settings, self.folder = a, b, settings, folder
        self.crawls = 0

    def ingest(
        self, lines: list[bytes], *, parser: str | None = None, complete: bool = True
    ) -> IngestResult:
        """One crawl of ``lines`` into both, at the same time: the same result."""
        self.crawls += 1
        path = self.folder / f"acme-{self.crawls}.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        now = START + timedelta(hours=self.crawls)
        results = []
        for engine in (self.a, self.b):
            records = read_jsonl(path, "acme")
            crawl = CrawlResult(
                "acme",
                records,
                rejections=records.rejections,
                parser_version=parser,
                complete=complete,
            )
            with full_path() if engine is self.b else _nothing():
                results.append(ingest(engine, self.settings, crawl, now=now, batch_size=3))
        skipping, full = results
        assert summary(skipping) == summary(full)
        assert full.skipped == 0
        return skipping

    def both(self, statement: Any) -> None:
        for engine in (self.a, self.b):
            with engine.begin() as conn:
                conn.execute(statement)

    def same(self) -> None:
        assert dump(self.a) == dump(self.b)
        assert digests(self.a) == digests(self.b)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def digests(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(OFFER.c.sku, OFFER.c.region, LINE.c.digest).outerjoin(
                LINE, LINE.c.offer_id == OFFER.c.id
            )
        )
        return sorted((sku, region, bytes(d) if d else None) for sku, region, d in rows)


@pytest.fixture(scope="session")
def reference_template(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite catalog with the reference data (GPU models resolve)."""
    path = tmp_path_factory.mktemp("reference") / "reference.db"
    shutil.copy(sqlite_template, path)
    engine = make_engine(f"sqlite:///{path}")
    load_reference(engine, REFERENCE_DIR)
    engine.dispose()
    return path


@pytest.fixture
def second_url(db_url: str, request: pytest.FixtureRequest) -> str | None:
    """PostgreSQL: the process's second database (SQLite: None, a file is copied)."""
    return None if db_url.startswith("sqlite") else request.getfixturevalue("pg_second_session_url")


@contextmanager
def two_databases(
    db_url: str, template: Path, folder: Path, second: str | None
) -> Iterator[tuple[Engine, Engine]]:
    """Two fresh catalogs with reference data, of ``db_url``'s kind (PostgreSQL: ``db_url``
    and ``second``, emptied and given the reference data)."""
    if db_url.startswith("sqlite"):
        for name in ("a.db", "b.db"):
            shutil.copy(template, folder / name)
        a, b = (make_engine(f"sqlite:///{folder / name}") for name in ("a.db", "b.db"))
        try:
            yield a, b
        finally:
            a.dispose()
            b.dispose()
        return
    assert second is not None
    a, b = make_engine(with_reference(db_url)), make_engine(with_reference(second))
    try:
        yield a, b
    finally:
        a.dispose()
        b.dispose()


@pytest.fixture
def pair(
    db_url: str,
    reference_template: Path,
    settings: Settings,
    tmp_path: Path,
    second_url: str | None,
) -> Iterator[Pair]:
    with two_databases(db_url, reference_template, tmp_path, second_url) as (a, b):
        yield Pair(a, b, settings, tmp_path)


def offer(i: int, variant: int = 0) -> dict[str, Any]:
    """Offer ``i`` at price ``variant`` (2: price 0 spelled otherwise)."""
    item = record(i)
    if i % 5 == 0:  # placed by its region's reference row, once there is one
        item["region"], item["country"] = "zz", None
        item.pop("country")
    if i == 1:
        item["region"] = "global"  # an offer with locations
    if i == 2:
        item["gpu_name_raw"] = "Mystery Accelerator 9000"  # unmapped
    if variant == 1:
        item["amount"] = str(float(item["amount"]) + 1)
    elif variant == 2:
        item["amount"] += "000"
    return item


def line(item: dict[str, Any], spaced: bool = False) -> bytes:
    return json.dumps(item).encode() if spaced else orjson.dumps(item)


def lines_of(variants: dict[int, int]) -> list[bytes]:
    return [line(offer(i, v)) for i, v in variants.items()]


# -- the catalog with the shortcut equals the catalog without it ----------------------------

EXTRA = st.sampled_from(
    ["same", "same-spaced", "other-price", "invalid", "garbage", "nul", "spaced"]
)
CRAWL = st.fixed_dictionaries(
    {
        "prices": st.lists(
            st.sampled_from([None, 0, 0, 0, 1, 1, 2]), min_size=OFFERS, max_size=OFFERS
        ),
        "extras": st.lists(
            st.tuples(EXTRA, st.integers(0, OFFERS - 1), st.integers(0, 20)), max_size=4
        ),
        "parser": st.sampled_from([None, None, None, "v2"]),
        "reference": st.sampled_from([None, None, None, "FR", "NL"]),
        "complete": st.sampled_from([True, True, True, False]),
    }
)


BACK_AND_FORTH = {
    "prices": [0] * OFFERS,
    "extras": [],
    "parser": None,
    "reference": None,
    "complete": True,
}
"""Every price changed, then back: the lines of the first prices come again."""


def crawl_lines(prices: list[int | None], extras: list[tuple[str, int, int]]) -> list[bytes]:
    out = [line(offer(i, v)) for i, v in enumerate(prices) if v is not None]
    for kind, i, at in extras:
        price = prices[i] or 0
        extra = {
            "same": line(offer(i, price)),
            "same-spaced": line(offer(i, price), spaced=True),
            "other-price": line(offer(i, 1 - min(price, 1))),
            "invalid": line({**offer(i, price), "amount": "-1"}),
            "garbage": b'{"sku": ',
            "nul": line(offer(i, price))[:-1] + b',"x":"\x00"}',
            "spaced": b"  " + line(offer(i, price)),
        }[kind]
        out.insert(min(at, len(out)), extra)
    return out


@pytest.mark.slow
def test_the_shortcut_writes_what_the_full_path_writes(
    db_url: str,
    reference_template: Path,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    second_url: str | None,
) -> None:
    """Random sequences of crawls (lines changed, added, removed, duplicated with equal
    and other prices, invalid, respelled; withdrawn offers back; parser versions; a
    region's country set or moved): the same results and rows with the shortcut as
    without it."""

    @given(crawls=st.lists(CRAWL, min_size=2, max_size=5))
    @example(crawls=[BACK_AND_FORTH | {"prices": [1] * OFFERS}, BACK_AND_FORTH])
    @hsettings(
        max_examples=20 if db_url.startswith("sqlite") else 6,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    def check(crawls: list[dict[str, Any]]) -> None:
        folder = tmp_path_factory.mktemp("crawls")
        with two_databases(db_url, reference_template, folder, second_url) as (a, b):
            _run(Pair(a, b, settings, folder), crawls)

    SKIPPED.clear()
    check()
    assert sum(SKIPPED) > 0  # not vacuous: lines were skipped


SKIPPED: list[int] = []


def _run(pair: Pair, crawls: list[dict[str, Any]]) -> None:
    # the first crawl offers every offer once, so later ones have stored lines to skip
    pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    for crawl in crawls:
        if crawl["reference"] is not None:
            set_region_country(pair, crawl["reference"])
        result = pair.ingest(
            crawl_lines(crawl["prices"], crawl["extras"]),
            parser=crawl["parser"],
            complete=crawl["complete"],
        )
        SKIPPED.append(result.skipped)
    pair.same()


def set_region_country(pair: Pair, country: str) -> None:
    """Region ``zz`` of acme placed in ``country``: its offers resolve otherwise."""
    with pair.a.connect() as conn:
        known = conn.execute(select(REGION.c.id).where(REGION.c.code == "zz")).first()
    if known is None:
        pair.both(insert(REGION).values(provider="acme", code="zz", country=country))
    else:
        pair.both(update(REGION).where(REGION.c.code == "zz").values(country=country))


# -- what is never skipped ------------------------------------------------------------------


def test_an_unchanged_line_is_skipped_and_counted_as_the_full_path_counts(pair: Pair) -> None:
    first = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))  # digests recorded
    assert (first.added, first.skipped) == (OFFERS, 0)
    for _ in range(2):
        again = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
        assert again.skipped == SKIPPABLE
        assert (again.seen, again.added, again.changed, again.unmapped) == (OFFERS, 0, 0, 3)
    with pair.a.connect() as conn:
        log = conn.execute(text("SELECT log FROM crawl_run ORDER BY id DESC")).scalar()
    assert log.startswith(f"{SKIPPABLE} lines as stored")
    pair.same()


def test_a_changed_line_is_never_skipped(pair: Pair) -> None:
    for _ in range(3):
        pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    changed = pair.ingest(lines_of({**dict.fromkeys(range(OFFERS), 0), 3: 1}))
    assert (changed.changed, changed.skipped) == (1, SKIPPABLE - 1)
    # the new line was recorded with the state it wrote
    same = pair.ingest(lines_of({**dict.fromkeys(range(OFFERS), 0), 3: 1}))
    assert (same.changed, same.skipped) == (0, SKIPPABLE)
    # the old line again: its digest went with the state it gave
    back = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    assert (back.changed, back.skipped) == (1, SKIPPABLE - 1)
    pair.same()


def test_lines_written_with_ten_decimal_places_read_back_as_written(pair: Pair) -> None:
    """The first ingest records the lines of the offers it adds: their amounts, at the
    most places a record may have, read back equal on both databases, so the next ingest
    skips them and finds nothing changed (the full path agrees)."""
    amounts = ["1.0123456789", "12.5000000000", "99999999.9999999999", "0.0000000001"]
    crawl = [line({**offer(i), "amount": a}) for i, a in zip((3, 4, 6, 7), amounts, strict=True)]
    first = pair.ingest(crawl)
    assert (first.added, first.skipped) == (4, 0)
    again = pair.ingest(crawl)
    assert (again.skipped, again.changed, again.updated) == (4, 0, 0)
    pair.same()


def test_a_new_parser_version_skips_nothing_and_records_its_own_lines(pair: Pair) -> None:
    for _ in range(3):
        pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)), parser="v1")
    other = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)), parser="v2")
    assert other.skipped == 0
    again = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)), parser="v2")
    assert again.skipped == SKIPPABLE
    back = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)), parser="v1")
    assert back.skipped == 0
    pair.same()


def placed_in_france(pair: Pair) -> None:
    """Region zz known (in FR), and every offer's line recorded."""
    pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))  # registers acme
    set_region_country(pair, "FR")
    for _ in range(2):
        pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    assert pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0))).skipped == OFFERS - 2


def test_a_reference_change_that_changes_resolution_skips_nothing(pair: Pair) -> None:
    placed_in_france(pair)
    set_region_country(pair, "NL")
    moved = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    assert moved.skipped == 0
    assert moved.updated == len(range(0, OFFERS, 5))  # the offers of region zz
    with pair.a.connect() as conn:
        countries = conn.execute(select(OFFER.c.country).where(OFFER.c.region == "zz"))
        assert set(countries.scalars()) == {"NL"}
    # an offer updated in place has its line recorded with the update
    assert pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0))).skipped == OFFERS - 2
    pair.same()


def test_an_offer_protected_through_a_reference_change_is_read_again(pair: Pair) -> None:
    placed_in_france(pair)
    set_region_country(pair, "NL")
    crawl = lines_of(dict.fromkeys(range(OFFERS), 0))
    crawl[5] = line({**offer(5), "amount": "-1"})
    kept = pair.ingest(crawl)  # offer 5 as it was; its line, recorded before, forgotten
    assert (kept.updated, kept.rejected) == (1, 1)
    again = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    # offer 5, now in NL (offer 0's line was recorded with its update)
    assert (again.updated, again.skipped) == (1, OFFERS - 3)
    pair.same()


def test_a_withdrawn_offer_coming_back_is_reopened(pair: Pair) -> None:
    for _ in range(2):
        pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    gone = pair.ingest(lines_of(dict.fromkeys(range(1, OFFERS), 0)))
    assert gone.withdrawn == 1
    back = pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    assert back.added == 1  # reopened
    pair.same()


def test_a_skipped_line_contradicted_later_keeps_neither(pair: Pair) -> None:
    for _ in range(2):
        pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    crawl = lines_of(dict.fromkeys(range(OFFERS), 0))
    late = pair.ingest([*crawl, line(offer(3, 1)), line(offer(4, 2))])
    assert [r.reason for r in late.rejections] == ["duplicate offer with a different price"]
    early = pair.ingest([line(offer(3, 1)), *crawl])
    assert [(r.position, r.reason) for r in early.rejections] == [
        (4, "duplicate offer with a different price")
    ]
    pair.same()


@contextmanager
def read_ahead(lines: int) -> Iterator[list[int]]:
    """The reader reads and digests up to ``lines`` lines before the index opens, as when
    the source's state takes long to read (the index reports itself not open until the
    reader waits for it); yields the lines digested by the time it opened (one entry per
    opening)."""
    digested = [0]
    seen_at_open: list[int] = []
    real_digest, real_open, real_wait = snapshot.line_digest, LineIndex.open, LineIndex.wait
    waiting = threading.Event()  # the reader is done reading ahead

    def counting(line: bytes) -> bytes:
        digested[0] += 1
        return real_digest(line)

    def opening(index: LineIndex, state: Any) -> None:
        assert waiting.wait(30)
        seen_at_open.append(digested[0])
        real_open(index, state)

    def wait(index: LineIndex) -> Any:
        waiting.set()
        return real_wait(index)

    with (
        mock.patch.object(snapshot, "READ_AHEAD", lines),
        mock.patch.object(snapshot, "line_digest", counting),
        mock.patch.object(LineIndex, "ready", mock.PropertyMock(return_value=False)),
        mock.patch.object(LineIndex, "open", opening),
        mock.patch.object(LineIndex, "wait", wait),
    ):
        yield seen_at_open


def test_lines_read_ahead_of_the_state_give_what_they_give_after(pair: Pair) -> None:
    """Lines digested while the state is read are judged as they would be after: the
    hostile ones among them too (a line too long, a blank one, a changed price)."""
    for _ in range(2):
        pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    good = lines_of(dict.fromkeys(range(OFFERS), 0))
    crawl = [good[3], b"  ", b'{"sku": "' + b"x" * MAX_LINE_BYTES + b'"}', line(offer(4, 1))]
    crawl += [x for i, x in enumerate(good) if i not in (3, 4)]
    with read_ahead(4) as opened:
        result = pair.ingest(crawl)
    # the shortcut's ingest: four lines read before it opened, three digested (not the one
    # too long)
    assert opened == [3]
    assert (result.changed, result.skipped) == (1, SKIPPABLE - 1)  # offer 4 repriced
    assert [r.reason.split(" (")[0] for r in result.rejections] == [
        "line 3: longer than 1048576 bytes"
    ]
    with read_ahead(100) as opened:  # more than the file: it is read whole, then judged
        again = pair.ingest(crawl)
    assert opened == [len(crawl) - 1]
    assert (again.changed, again.skipped) == (0, SKIPPABLE)
    pair.same()


# -- malformed and hostile input ------------------------------------------------------------


def test_hostile_lines_lose_nothing(pair: Pair) -> None:
    for _ in range(2):
        pair.ingest(lines_of(dict.fromkeys(range(OFFERS), 0)))
    good = lines_of(dict.fromkeys(range(OFFERS), 0))
    hostile = [
        b" " + good[3],  # the same record, another line
        good[4][:-1] + b" }",
        good[6].replace(b'"acme"', b'"acme\x00"', 1),  # a NUL: invalid
        b'{"sku": "' + b"x" * MAX_LINE_BYTES + b'"}',  # too long: never held whole
        good[7] + b"\x00",
    ]
    crawl = [x for i, x in enumerate(good) if i not in (3, 4, 6, 7)] + hostile
    result = pair.ingest(crawl)
    assert result.skipped == 2  # offers 8 and 9
    assert [r.reason.split(" (")[0] for r in result.rejections] == [
        "line 9: invalid JSON",
        "line 10: longer than 1048576 bytes",
        "line 11: invalid JSON",
    ]
    assert (result.seen, result.withdrawn) == (OFFERS - 2, 2)  # 6 and 7: unreadable
    pair.same()


def test_line_digests_ignore_only_the_newline() -> None:
    assert line_digest(b'{"a": 1}\n') == line_digest(b'{"a": 1}')
    assert line_digest(b'{"a": 1}\r\n') != line_digest(b'{"a": 1}')
    assert line_digest(b'{"a": 1} ') != line_digest(b'{"a": 1}')
    assert len(line_digest(b"x")) == 16


def test_ingest_file_skips_the_unchanged_lines_of_another_file(pair: Pair, tmp_path: Path) -> None:
    """The user's path: another file with one line changed (not the same bytes, so not
    confirmed whole) has its other lines skipped, one by one."""
    data = [line(offer(i)) + b"\n" for i in range(OFFERS)]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"".join(data))
    data[3] = line(offer(3, 1)) + b"\n"  # offer 3 (a skippable one) repriced
    second.write_bytes(b"".join(data))
    engine, settings = pair.a, pair.settings
    ingest_jsonl(engine, settings, first, "acme")  # registers acme, records the lines
    result = ingest_jsonl(engine, settings, second, "acme")
    assert (result.seen, result.skipped, result.added, result.changed) == (
        OFFERS,
        SKIPPABLE - 1,
        0,
        1,
    )


# -- migration 0022 -------------------------------------------------------------------------


def _roundtrip(url: str, tmp_path: Path) -> None:
    """0022 up with offers and digests, down (table gone, offers kept), up again."""
    upgrade(url)
    engine = make_engine(url)
    try:
        settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
        load_reference(engine, REFERENCE_DIR)
        path = tmp_path / "acme.jsonl"
        path.write_bytes(b"".join(line(offer(i)) + b"\n" for i in range(OFFERS)))
        for _ in range(2):
            ingest_jsonl(engine, settings, path, "acme", complete=False)
        assert sum(d is not None for *_, d in digests(engine)) == SKIPPABLE
        downgrade(url, "0021")
        engine.dispose()
        with engine.connect() as conn:
            assert "offer_line" not in _tables(conn)
            assert conn.execute(text("SELECT count(*) FROM offer")).scalar() == OFFERS
        upgrade(url)
        engine.dispose()
        assert {d for *_, d in digests(engine)} == {None}
        result = ingest_jsonl(engine, settings, path, "acme", complete=False)
        assert (result.seen, result.skipped) == (OFFERS, 0)
    finally:
        engine.dispose()


def _tables(conn: Any) -> set[str]:
    return set(inspect(conn).get_table_names())


def test_sqlite_0022_up_down_up(tmp_path: Path) -> None:
    _roundtrip(f"sqlite:///{tmp_path / 'm.db'}", tmp_path)


@pytest.mark.postgres
def test_postgres_0022_up_down_up(tmp_path: Path) -> None:
    with scratch_pg_database() as url:
        _roundtrip(url, tmp_path)
