"""An unchanged crawl is confirmed without parsing, validating or diffing; anything that
could change what a crawl finds takes the full path (docs/ingest.md, "An unchanged crawl").

Crawls go through the real local replay server (or saved files for multi-payload cases),
on SQLite and PostgreSQL. Whether a run took the shortcut is read from its record (its
log says so) and from whether the pipeline ran at all: ``parse_records`` is wrapped to
count calls, or made to fail, never replaced for a crawl that must parse.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from sqlalchemy import Engine, func, select

import service.crawl.run as run_module
from crawlers.providers.lambda_api import LambdaCloud
from schema.crawl import CrawlRun, CrawlRunPayload, RawPayload, RejectedRecord
from schema.prices import CatalogVersion, Offer, OfferLocation, PriceObservation
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.crawl.run import CrawlReport, crawl_source
from service.query.runs import last_good_crawls
from tests.conftest import FIXTURES
from tests.support.factories import unmapped_occurrences
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure

PATH = "/api/v1/instance-types"
BODY = (FIXTURES / "lambda" / "instance-types.json").read_bytes()
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
RAW = RawPayload.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
OFFER = Offer.__table__  # type: ignore[attr-defined]
OBSERVATION = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
LOCATION = OfferLocation.__table__  # type: ignore[attr-defined]
UNCHANGED = "unchanged: every payload as in crawl run"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How many crawls ran the pipeline: the real parse_records, counted."""
    calls: list[str] = []
    real = run_module.parse_records

    def counted(source_cls: type, output: Any) -> Any:
        calls.append(source_cls.name)  # type: ignore[attr-defined]
        return real(source_cls, output)

    monkeypatch.setattr(run_module, "parse_records", counted)
    return calls


def _crawl(engine: Engine, settings: Settings, server: ReplayServer, body: bytes) -> CrawlReport:
    server.route(PATH, Reply(body, content_type="application/json"))
    report = crawl_source(engine, configure(settings, server, "lambda"), "lambda")
    assert report.status.value in {"ok", "failed", "quarantined"}, report
    return report


def _run(engine: Engine, run_id: int | None) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(RUN).where(RUN.c.id == run_id)).one()


def _catalog(engine: Engine) -> dict[str, Any]:
    """The catalog's state: offers, observations, versions and locations, row by row."""
    with engine.connect() as conn:
        return {
            name: sorted(map(tuple, conn.execute(select(table)).all()), key=repr)
            for name, table in (
                ("offer", OFFER),
                ("observation", OBSERVATION),
                ("version", VERSION),
                ("location", LOCATION),
            )
        }


def _shortcut(engine: Engine, report: CrawlReport) -> bool:
    log = _run(engine, report.crawl_run_id).log or ""
    return log.startswith(UNCHANGED)


def test_identical_crawl_is_confirmed_without_parsing(
    engine: Engine, settings: Settings, server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_reference(engine, REFERENCE_DIR)
    first = _crawl(engine, settings, server, BODY)
    assert first.label == "ok" and first.counts["added"] > 0
    before = _catalog(engine)
    with engine.connect() as conn:
        confirmed_before = last_good_crawls(conn)["lambda"]
        raw_before = conn.execute(select(func.count()).select_from(RAW)).scalar()

    def broken(*_: Any) -> Any:
        raise AssertionError("an unchanged crawl must not be parsed")

    monkeypatch.setattr(run_module, "parse_records", broken)
    second = _crawl(engine, settings, server, BODY)
    assert second.label == "ok", second
    assert _shortcut(engine, second)
    assert second.counts == {**first.counts, "added": 0}
    assert second.catalog_version is None
    assert _catalog(engine) == before  # no offer, observation, version or location written
    row = _run(engine, second.crawl_run_id)
    assert row.status == "ok" and row.seen == first.counts["seen"]
    assert (row.added, row.changed, row.withdrawn, row.updated) == (0, 0, 0, 0)
    with engine.connect() as conn:
        assert last_good_crawls(conn)["lambda"] > confirmed_before  # last_confirmed moves
        assert conn.execute(select(func.count()).select_from(RAW)).scalar() == raw_before
        links = conn.execute(
            select(RUN_PAYLOAD.c.crawl_run_id, RUN_PAYLOAD.c.sha256).order_by(RUN_PAYLOAD.c.id)
        ).all()
    assert [sha for _, sha in links if _ == second.crawl_run_id] == [
        sha for _, sha in links if _ == first.crawl_run_id
    ]


def test_a_reference_load_that_changes_nothing_keeps_the_shortcut(
    engine: Engine, settings: Settings, server: ReplayServer, parses: list[str], tmp_path: Path
) -> None:
    load_reference(engine, REFERENCE_DIR)
    _crawl(engine, settings, server, BODY)
    load_reference(engine, REFERENCE_DIR)  # the same files again
    folder = tmp_path / "reference"
    shutil.copytree(REFERENCE_DIR, folder)
    _edit_regions(folder, lambda rows: _set(rows, "lambda", "us-east-1", city="Ashburn"))
    assert load_reference(engine, folder).changed["regions"] == 1  # a city: not resolution
    again = _crawl(engine, settings, server, BODY)
    assert again.label == "ok" and _shortcut(engine, again) and parses == ["lambda"]


def _set(rows: list[dict[str, Any]], provider: str, code: str, **values: Any) -> None:
    for row in rows:
        if row["provider"] == provider and str(row["code"]) == code:
            row.update(values)
            return
    raise AssertionError(f"no region {provider}/{code}")


def _edit_regions(folder: Path, edit: Any) -> None:
    path = folder / "regions.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["regions"])
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def _edit_gpus(folder: Path, edit: Any) -> None:
    path = folder / "gpus.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["gpus"])
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def _add_alias(rows: list[dict[str, Any]]) -> None:
    rows[0].setdefault("aliases", []).append("Zq Test Accelerator 9000")


def _add_region(rows: list[dict[str, Any]]) -> None:
    template = next(r for r in rows if r["provider"] == "lambda")
    rows.append({**template, "code": "zz-test-1", "name": "Test", "country": "CA"})


def _move_region(rows: list[dict[str, Any]]) -> None:
    _set(rows, "lambda", "us-east-1", country="CA")


@pytest.mark.parametrize(
    ("edit_gpus", "edit_regions"),
    [(_add_alias, None), (None, _add_region), (None, _move_region)],
    ids=["gpu alias", "new region", "region country"],
)
def test_a_reference_change_takes_the_full_path(
    engine: Engine,
    settings: Settings,
    server: ReplayServer,
    parses: list[str],
    tmp_path: Path,
    edit_gpus: Any,
    edit_regions: Any,
) -> None:
    load_reference(engine, REFERENCE_DIR)
    _crawl(engine, settings, server, BODY)
    folder = tmp_path / "reference"
    shutil.copytree(REFERENCE_DIR, folder)
    if edit_gpus:
        _edit_gpus(folder, edit_gpus)
    if edit_regions:
        _edit_regions(folder, edit_regions)
    load_reference(engine, folder)
    again = _crawl(engine, settings, server, BODY)
    assert again.label == "ok" and not _shortcut(engine, again)
    assert parses == ["lambda", "lambda"]
    # and once ingested with the new reference data, the next identical crawl is unchanged
    third = _crawl(engine, settings, server, BODY)
    assert _shortcut(engine, third) and parses == ["lambda", "lambda"]


def test_one_changed_byte_or_a_new_parser_version_takes_the_full_path(
    engine: Engine,
    settings: Settings,
    server: ReplayServer,
    parses: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load_reference(engine, REFERENCE_DIR)
    _crawl(engine, settings, server, BODY)
    # one byte more (a trailing newline): the same prices, still a different payload
    spaced = _crawl(engine, settings, server, BODY + b"\n")
    assert spaced.label == "ok" and not _shortcut(engine, spaced) and len(parses) == 2
    # one byte changed inside a price
    data = orjson.loads(BODY)
    data["data"]["gpu_1x_a10"]["instance_type"]["price_cents_per_hour"] = 76
    changed = _crawl(engine, settings, server, orjson.dumps(data))
    assert changed.counts["changed"] == 1 and not _shortcut(engine, changed)
    assert len(parses) == 3
    repeat = _crawl(engine, settings, server, orjson.dumps(data))
    assert _shortcut(engine, repeat) and len(parses) == 3
    monkeypatch.setattr(LambdaCloud, "parser_version", "9999-test")
    bumped = _crawl(engine, settings, server, orjson.dumps(data))
    assert bumped.label == "ok" and not _shortcut(engine, bumped) and len(parses) == 4
    assert _run(engine, bumped.crawl_run_id).parser_version == "9999-test"


@pytest.mark.parametrize(
    "bad", [b'{"data": {}}', b'{"instance_types": {}}'], ids=["quarantined", "failed"]
)
def test_after_a_quarantined_or_failed_crawl_the_full_path_runs(
    engine: Engine, settings: Settings, server: ReplayServer, parses: list[str], bad: bytes
) -> None:
    load_reference(engine, REFERENCE_DIR)
    _crawl(engine, settings, server, BODY)
    bad_report = _crawl(engine, settings, server, bad)
    assert bad_report.status.value in {"quarantined", "failed"}
    again = _crawl(engine, settings, server, BODY)
    assert again.label == "ok" and not _shortcut(engine, again)


def test_an_added_or_removed_payload_takes_the_full_path(
    engine: Engine, settings: Settings, parses: list[str], tmp_path: Path
) -> None:
    load_reference(engine, REFERENCE_DIR)
    data = orjson.loads(BODY)["data"]
    names = sorted(data)
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_bytes(orjson.dumps({"data": {n: data[n] for n in names[:2]}}))
    two.write_bytes(orjson.dumps({"data": {n: data[n] for n in names[2:]}}))

    def crawl(*files: Path) -> CrawlReport:
        return crawl_source(engine, settings, "lambda", from_files=list(files))

    assert crawl(one, two).label == "ok"
    same = crawl(one, two)
    assert _shortcut(engine, same) and len(parses) == 1
    reordered = crawl(two, one)  # the same bytes in another order: parsed again
    assert not _shortcut(engine, reordered) and len(parses) == 2
    removed = crawl(two)  # a payload fewer: its offers are withdrawn by the full path
    assert not _shortcut(engine, removed) and removed.counts["withdrawn"] == 2
    added = crawl(two, one)
    assert not _shortcut(engine, added) and added.counts["added"] == 2
    assert len(parses) == 4


def test_partly_rejected_crawl_is_confirmed_as_the_full_path_records_it(
    engine: Engine,
    settings: Settings,
    server: ReplayServer,
    parses: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last good crawl rejected records and left names unmapped: the confirmed run
    stores the same rejections and counts the same unmapped names as a full ingest of the
    same payload does, and the catalog is the same."""
    load_reference(engine, REFERENCE_DIR)
    data = orjson.loads(BODY)
    items = data["data"]
    items["gpu_1x_a10"]["instance_type"]["price_cents_per_hour"] = -5  # rejected
    items["gpu_1x_a100"]["instance_type"]["gpu_description"] = "Zq Mystery 9000 (99 GB)"
    body = orjson.dumps(data)
    first = _crawl(engine, settings, server, body)
    assert first.label == "ok" and first.counts["rejected"] >= 1 and first.counts["unmapped"] >= 1
    catalog = _catalog(engine)
    unmapped_1 = unmapped_occurrences(engine, "lambda")

    short = _crawl(engine, settings, server, body)
    assert _shortcut(engine, short) and len(parses) == 1
    unmapped_2 = unmapped_occurrences(engine, "lambda")
    assert _catalog(engine) == catalog

    monkeypatch.setattr(LambdaCloud, "parser_version", "9999-test")  # forces the full path
    full = _crawl(engine, settings, server, body)
    assert not _shortcut(engine, full) and len(parses) == 2
    assert _catalog(engine) == catalog
    unmapped_3 = unmapped_occurrences(engine, "lambda")

    assert short.counts == full.counts  # seen, rejected, unmapped; nothing added or changed
    assert _rejections(engine, short.crawl_run_id) == _rejections(engine, full.crawl_run_id)
    assert _rejections(engine, short.crawl_run_id) == _rejections(engine, first.crawl_run_id)
    # each run counted every unmapped name once more, by the same number of records
    assert set(unmapped_1) == set(unmapped_2) == set(unmapped_3)
    for name, count in unmapped_1.items():
        assert unmapped_2[name] - count == unmapped_3[name] - unmapped_2[name] == count
    assert (
        _run(engine, short.crawl_run_id).unmapped_counts
        == _run(engine, full.crawl_run_id).unmapped_counts
    )


def _rejections(engine: Engine, run_id: int | None) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(REJECTED.c.position, REJECTED.c.reason, REJECTED.c.record)
            .where(REJECTED.c.crawl_run_id == run_id)
            .order_by(REJECTED.c.id)
        ).all()
    return [(position, reason, orjson.dumps(record)) for position, reason, record in rows]
