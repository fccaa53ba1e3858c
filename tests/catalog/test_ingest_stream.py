"""The streaming ingest: batch by batch, with the same result as the whole crawl at once.

Every crawl here is applied twice, to two fresh databases of the same kind: in batches of
7 records (so duplicates, conflicts and invalid records straddle batch boundaries), and in
one batch (what the ingest did before it streamed). Both catalogs must be the same, row for
row (ids of offers aside: an ingest numbers new offers in identity order per batch)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

import service.catalog.ingest as ingest_module
import service.catalog.resolver as resolver_module
from schema.catalog import InstanceType
from schema.crawl import CrawlRun, RejectedRecord, UnmappedName
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult, IngestResult
from service.catalog.snapshot import MAX_LINE_BYTES, ingest_jsonl, read_jsonl
from service.catalog.writer import Writer
from service.core.config import Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from tests.conftest import scratch_pg_database
from tests.support.factories import OBS, OFFER, VERSION, catalog_state, record, records

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]
SKU = InstanceType.__table__  # type: ignore[attr-defined]
SMALL = 7
CLOCK: list[datetime] = []


@pytest.fixture
def twin(db_url: str, sqlite_template: Path, tmp_path: Path) -> Iterator[Engine]:
    """A second fresh database of the same kind as ``engine``'s."""
    if db_url.startswith("sqlite"):
        path = tmp_path / "twin.db"
        shutil.copy(sqlite_template, path)
        twin = make_engine(f"sqlite:///{path}")
        yield twin
        twin.dispose()
        return
    with scratch_pg_database() as url:
        upgrade(url)
        twin = make_engine(url)
        yield twin
        twin.dispose()


@pytest.fixture(autouse=True)
def memos_emptied_every_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ingest's memos (fingerprints, cluster facts, prices, bound attributes) are
    emptied between batches once they grow past a bound: here at every batch, so the
    streamed catalog must come out the same without them."""
    monkeypatch.setattr(resolver_module, "MEMO_ENTRIES", 0)


def text(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return value


def dump(engine: Engine) -> dict[str, Any]:
    """Everything an ingest writes, keyed by offer identity instead of offer id."""
    with engine.connect() as conn:
        offers = conn.execute(select(OFFER).order_by(OFFER.c.id)).mappings().all()
        key_of = {
            o["id"]: (o["source"], o["provider"], o["sku"], o["region"], o["price_kind"], o["unit"])
            for o in offers
        }
        observations = conn.execute(select(OBS).order_by(OBS.c.id)).mappings().all()
        return {
            "offers": sorted(
                (
                    key_of[o["id"]],
                    *(text(v) for k, v in o.items() if k not in ("id", "observation_id")),
                )
                for o in offers
            ),
            "observations": sorted(
                (
                    key_of[o["offer_id"]],
                    *(text(v) for k, v in o.items() if k not in ("id", "offer_id")),
                )
                for o in observations
            ),
            "versions": [
                tuple(map(text, r)) for r in conn.execute(select(VERSION).order_by(VERSION.c.id))
            ],
            "runs": [
                (
                    r.id,
                    r.status,
                    r.reason,
                    r.seen,
                    r.added,
                    r.changed,
                    r.withdrawn,
                    r.updated,
                    r.rejected,
                    r.unmapped,
                    r.catalog_version,
                    r.unmapped_counts,
                )
                for r in conn.execute(select(RUN).order_by(RUN.c.id))
            ],
            "rejected": [
                (r.crawl_run_id, r.position, r.reason, r.record)
                for r in conn.execute(select(REJECTED).order_by(REJECTED.c.id))
            ],
            "unmapped": sorted(
                (r.kind, r.source, r.value, r.occurrences) for r in conn.execute(select(UNMAPPED))
            ),
            "instance_types": [
                tuple(map(text, r[1:])) for r in conn.execute(select(SKU).order_by(SKU.c.id))
            ],
        }


def summary(result: IngestResult) -> tuple[Any, ...]:
    return (
        result.status.value,
        result.reason,
        result.catalog_version,
        result.counts,
        [(r.position, r.reason) for r in result.rejections],
    )


def both(
    engine: Engine, twin: Engine, settings: Settings, crawl: list[Any], **kwargs: Any
) -> IngestResult:
    """``crawl`` ingested in batches of 7 into ``engine`` and in one batch into ``twin``, at
    the same time: the same result."""
    now = datetime(2026, 6, 1, tzinfo=UTC) + timedelta(hours=len(CLOCK))
    CLOCK.append(now)
    streamed = ingest(
        engine, settings, CrawlResult("acme", list(crawl), **kwargs), batch_size=SMALL, now=now
    )
    whole = ingest(
        twin, settings, CrawlResult("acme", list(crawl), **kwargs), batch_size=10**6, now=now
    )
    assert summary(streamed) == summary(whole)
    return streamed


def first_crawl() -> list[Any]:
    crawl: list[Any] = records(40)
    crawl[3]["region"] = "global"  # an offer that gets locations
    crawl[4]["gpu_name_raw"] = "Mystery Accelerator 9000"  # unmapped
    crawl.insert(12, dict(crawl[2]))  # the same offer again, same price: one offer
    crawl.insert(30, {**crawl[5], "amount": "99.99"})  # batch 4 contradicts batch 0
    crawl.insert(31, {**crawl[4], "amount": "-1"})  # invalid; batch 0's unmapped offer
    crawl.insert(9, {**crawl[8], "amount": "77"})  # a contradiction in one batch
    crawl.insert(20, {"sku": "no identity", "amount": "1"})  # invalid, no key
    crawl.insert(21, record(90, source="elsewhere"))  # another source's record
    crawl.append(dict(crawl[0]))  # the same offer again, at the end
    return crawl


def test_a_streamed_ingest_writes_what_the_whole_crawl_at_once_writes(
    engine: Engine, twin: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes: list[int] = []
    real = ingest_module.Batches

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            passes.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "Batches", Counted)
    first = both(engine, twin, settings, first_crawl())
    assert first.status.value == "ok"
    assert (first.added, first.rejected) == (37, 5)
    assert [r.position for r in first.rejections] == [9, 20, 21, 33, 34]
    assert len(passes) == 3  # batch 4's contradiction: a second pass of the streamed one

    passes.clear()
    second: list[Any] = records(40, bump_every=6)[:34]  # reprices; 6 withdrawn
    second[10]["amount"] = "23.00"
    second.insert(25, {**second[11], "amount": "1.5"})  # an offer's conflict: kept as it was
    second.insert(26, {**second[12], "currency": "??"})  # invalid, known key: not withdrawn
    second.append({**second[1], "amount": "1"})  # the first batch's offer: late again
    result = both(engine, twin, settings, second)
    assert result.status.value == "ok" and result.withdrawn > 0 and result.changed > 0
    assert len(passes) == 3

    passes.clear()
    third = records(40)  # the withdrawn offers come back, prices as at first
    result = both(engine, twin, settings, third)
    assert result.status.value == "ok" and result.added > 0
    assert len(passes) == 2  # nothing ambiguous: one pass each
    assert dump(engine) == dump(twin)


def test_a_late_contradiction_of_an_implausible_price_does_not_quarantine(
    engine: Engine, twin: Engine, settings: Settings
) -> None:
    both(engine, twin, settings, records(30))
    again: list[Any] = records(30)
    again[2]["amount"] = "20000"  # far outside the band, in the first batch
    again.append({**again[2], "amount": "21"})  # then ambiguous: neither price is kept
    result = both(engine, twin, settings, again)
    assert result.status.value == "ok" and result.changed == 0
    assert dump(engine) == dump(twin)


@pytest.mark.parametrize("why", ["offer count", "price band"])
def test_quarantine_after_batches_were_written_leaves_nothing_visible(
    engine: Engine, twin: Engine, settings: Settings, why: str
) -> None:
    both(engine, twin, settings, records(40))
    before = catalog_state(engine)
    if why == "offer count":  # 14 repriced offers written in two batches, then too few
        crawl: list[Any] = records(14, bump_every=1)
    else:  # every batch repriced and written, the last price implausible
        crawl = records(40, bump_every=1)
        crawl[-1]["amount"] = "9000"
    crawl.insert(3, {**crawl[2], "amount": "bad"})
    result = both(engine, twin, settings, crawl)
    assert result.status.value == "quarantined"
    assert catalog_state(engine) == before
    assert dump(engine) == dump(twin)
    with engine.connect() as conn:
        run = conn.execute(select(RUN).where(RUN.c.id == result.crawl_run_id)).one()
        rejected = conn.execute(
            select(REJECTED.c.position).where(REJECTED.c.crawl_run_id == result.crawl_run_id)
        ).scalars()
        assert list(rejected) == [3]
        assert run.status == "quarantined" and run.catalog_version is None


class Lazy:
    """Records made as they are read, counting how many were."""

    def __init__(self, n: int) -> None:
        self.n, self.read = n, 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.read = 0
        for i in range(self.n):
            self.read += 1
            yield record(i, region=f"r{i}")


def test_the_records_are_read_as_they_are_written(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory follows the batch, not the crawl: when the first batch is written, only a
    few batches (the one written, those validated ahead) have been read."""
    lazy = Lazy(400)
    read_at_writes: list[int] = []
    real = Writer.write

    def write(self: Writer, *args: Any) -> None:
        read_at_writes.append(lazy.read)
        real(self, *args)

    monkeypatch.setattr(Writer, "write", write)
    result = ingest(engine, settings, CrawlResult("acme", lazy), batch_size=10)
    assert result.status.value == "ok" and result.added == 400
    assert read_at_writes[0] <= 5 * 10  # 1 written + 2 queued + 1 being validated (+1 read)
    assert len(read_at_writes) == 40


def test_a_one_shot_iterator_is_kept_for_a_second_pass(
    engine: Engine, twin: Engine, settings: Settings
) -> None:
    crawl = first_crawl()
    now = datetime(2026, 6, 1, tzinfo=UTC)
    streamed = ingest(engine, settings, CrawlResult("acme", iter(crawl)), batch_size=SMALL, now=now)
    whole = ingest(twin, settings, CrawlResult("acme", crawl), now=now)
    assert summary(streamed) == summary(whole)
    assert dump(engine) == dump(twin)


def test_a_jsonl_file_streams_with_its_bad_lines_rejected(
    engine: Engine, twin: Engine, settings: Settings, tmp_path: Path
) -> None:
    import orjson

    lines = [orjson.dumps(r) for r in first_crawl()]
    lines.insert(5, b"{not json")
    lines.insert(17, b"")
    lines.insert(18, b'{"sku": "' + b"x" * MAX_LINE_BYTES + b'"}')  # never held whole
    lines.insert(40, b"[1, 2]")
    path = tmp_path / "acme.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    reader = read_jsonl(path, "acme")
    items = list(reader)
    assert [(r.position, r.reason.split(" (")[0]) for r in reader.rejections] == [
        (5, "line 6: invalid JSON"),
        (18, f"line 19: longer than {MAX_LINE_BYTES} bytes"),
    ]
    streamed = ingest_jsonl(engine, settings, path, "acme")
    whole = ingest(twin, settings, CrawlResult("acme", items, rejections=reader.rejections))
    assert summary(streamed)[:4] == summary(whole)[:4]
    # the same rejections; the file's at their lines, the list's at their places in it
    unreadable = len(reader.rejections)
    at_lines = [
        *whole.rejections[:unreadable],
        *(
            replace(r, position=reader.line_position(r.position))
            for r in whole.rejections[unreadable:]
        ),
    ]
    assert summary(streamed)[4] == [(r.position, r.reason) for r in at_lines]
    assert (40, "record: Input should be a valid dictionary or instance of OfferRecord") in [
        (r.position, r.reason) for r in streamed.rejections
    ]


def test_an_unreadable_file_fails_its_run(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "gone.jsonl"
    path.write_bytes(b"")
    path.unlink()
    path.mkdir()  # a directory: opening it fails
    with pytest.raises(OSError):
        ingest_jsonl(engine, settings, path, "acme")
    with engine.connect() as conn:
        run = conn.execute(select(RUN.c.status, RUN.c.reason)).one()
    assert tuple(run) == ("failed", "unreadable file")
