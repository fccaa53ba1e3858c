"""``gpuatlas ingest SRC --file F``: the file is the crawl's payload, and a byte-identical
file is confirmed without reading a record, wherever it is (docs/ingest.md)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import Engine, select

import service.catalog.snapshot as snapshot
from schema.crawl import CrawlRun, CrawlRunPayload
from service.catalog.snapshot import ingest_jsonl
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from tests.support.factories import catalog_state, record, unmapped_occurrences

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]


def _write(path: Path, amount_of_first: str = "20.00") -> Path:
    lines = [orjson.dumps(record(i, source="mytool", provider="lambda")) for i in range(6)]
    lines[0] = orjson.dumps(record(0, source="mytool", provider="lambda", amount=amount_of_first))
    lines.insert(2, b"{not json")
    lines.append(orjson.dumps(record(9, source="mytool", provider="lambda", amount="-1")))
    lines.append(
        orjson.dumps(record(10, source="mytool", provider="lambda", gpu_name_raw="Zq Mystery 9000"))
    )
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _log(engine: Engine, run_id: int) -> str:
    with engine.connect() as conn:
        return conn.execute(select(RUN.c.log).where(RUN.c.id == run_id)).scalar() or ""


def _payload_urls(engine: Engine, run_id: int) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(RUN_PAYLOAD.c.url)
                .where(RUN_PAYLOAD.c.crawl_run_id == run_id)
                .order_by(RUN_PAYLOAD.c.id)
            ).scalars()
        )


def _names(engine: Engine, run_id: int) -> list[list[object]]:
    with engine.connect() as conn:
        return list(
            conn.execute(select(RUN.c.unmapped_counts).where(RUN.c.id == run_id)).scalar() or []
        )


def test_an_identical_file_is_confirmed_without_reading_it(
    engine: Engine, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_reference(engine, REFERENCE_DIR)
    path = _write(tmp_path / "feed.jsonl")
    first = ingest_jsonl(engine, settings, path, "mytool")
    assert first.status.value == "ok" and first.added == 7 and first.rejected == 2
    assert first.unmapped == 1
    state = catalog_state(engine)
    reads: list[Path] = []
    real = snapshot.read_jsonl

    def counted(file: Path, source: str) -> object:
        reads.append(file)
        return real(file, source)

    monkeypatch.setattr(snapshot, "read_jsonl", counted)
    again = ingest_jsonl(engine, settings, path, "mytool")
    assert again.status.value == "ok" and reads == []
    assert _log(engine, again.crawl_run_id).startswith("unchanged:")
    assert again.counts == {**first.counts, "added": 0}
    assert [(r.position, r.reason) for r in again.rejections] == [
        (r.position, r.reason) for r in first.rejections
    ]
    assert catalog_state(engine) == state

    # without --complete: the full path
    partial = ingest_jsonl(engine, settings, path, "mytool", complete=False)
    assert len(reads) == 1 and not _log(engine, partial.crawl_run_id).startswith("unchanged:")
    # one byte changed: the full path, and the change is written
    _write(path, amount_of_first="20.01")
    changed = ingest_jsonl(engine, settings, path, "mytool")
    assert len(reads) == 2 and changed.changed == 1
    # the same bytes at another path: confirmed too (the records are the file's lines),
    # and the run's payload row names the file it read
    other = tmp_path / "elsewhere" / "copy.jsonl"
    other.parent.mkdir()
    other.write_bytes(path.read_bytes())
    before_move = catalog_state(engine)
    moved = ingest_jsonl(engine, settings, other, "mytool")
    assert len(reads) == 2 and moved.status.value == "ok" and moved.changed == 0
    assert _log(engine, moved.crawl_run_id).startswith("unchanged:")
    assert _payload_urls(engine, moved.crawl_run_id) == [other.resolve().as_uri()]
    assert catalog_state(engine) == before_move
    # a byte changed in the copy: the full path, wherever the file is
    _write(other, amount_of_first="20.02")
    changed_there = ingest_jsonl(engine, settings, other, "mytool")
    assert len(reads) == 3 and changed_there.changed == 1


def test_the_ingest_after_one_that_registered_a_provider_is_confirmed(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    """A new provider is registered by the ingest that first names it (and counted once as
    unmapped there). The next ingest of the same file is confirmed, and records what the
    full path records with that provider known: no unmapped provider, the same counts,
    rejections, unmapped names and catalog."""
    path = tmp_path / "feed.jsonl"
    lines = [orjson.dumps(record(i, source="mytool")) for i in range(3)]
    lines.append(orjson.dumps(record(3, source="mytool", gpu_name_raw="Zq Mystery 9000")))
    lines.append(orjson.dumps(record(4, source="mytool", amount="-1")))  # rejected
    path.write_bytes(b"\n".join(lines) + b"\n")
    first = ingest_jsonl(engine, settings, path, "mytool")
    assert first.status.value == "ok" and first.rejected == 1 and first.unmapped == 4
    assert (
        unmapped_occurrences(engine, "mytool")[("provider", "acme")] == 1
    )  # not known yet: reported
    # what a repeat would find, stored for the shortcut: acme known
    assert ["provider", "acme", 1] not in _names(engine, first.crawl_run_id)
    state = catalog_state(engine)
    before = unmapped_occurrences(engine, "mytool")

    second = ingest_jsonl(engine, settings, path, "mytool")
    assert _log(engine, second.crawl_run_id).startswith("unchanged:")
    assert catalog_state(engine) == state
    confirmed = unmapped_occurrences(engine, "mytool")

    # the full path for the same bytes (without --complete the shortcut is not taken)
    full = ingest_jsonl(engine, settings, path, "mytool", complete=False)
    assert not _log(engine, full.crawl_run_id).startswith("unchanged:")
    assert catalog_state(engine) == state
    assert second.counts == full.counts == {**first.counts, "added": 0}
    assert _names(engine, second.crawl_run_id) == _names(engine, full.crawl_run_id)
    assert ["provider", "acme", 1] not in _names(engine, full.crawl_run_id)  # known now
    assert [(r.position, r.reason) for r in second.rejections] == [
        (r.position, r.reason) for r in full.rejections
    ]
    # each run counted the same names again, by the same numbers; the provider by neither
    again = unmapped_occurrences(engine, "mytool")
    for name in again:
        assert confirmed[name] - before[name] == again[name] - confirmed[name], name
    assert again[("provider", "acme")] == 1

    third = ingest_jsonl(engine, settings, path, "mytool")
    assert _log(engine, third.crawl_run_id).startswith("unchanged:")
