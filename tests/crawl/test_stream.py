"""A crawl's records are read from its payloads, a batch at a time (service.crawl.records):
each offer still links to the payload it came from, also when the ingest reads the crawl
twice (an ambiguous offer); malformed payloads still fail the crawl with a clear reason,
whether they are met while fetching (a network crawl, through a real local HTTP server)
or while the records are read (``--from-file``); and the crawl path's memory follows its
batch and its largest payload, not the crawl (tracemalloc, as tests/catalog/
test_ingest_memory.py measures an ingest).
"""

from __future__ import annotations

import gc
import hashlib
import shutil
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, select

import crawlers.pipeline as pipeline_module
import crawlers.platforms.gpuhunt as gpuhunt_module
import service.catalog.ingest as ingest_module
import service.catalog.resolver as resolver_module
import service.crawl.run as run_module
from crawlers import http
from crawlers.base import ApiSource, Context, Request, Response
from crawlers.http import json_body, require
from crawlers.pipeline import SourceMeta
from crawlers.platforms.gpuhunt import CHANNEL, GpuhuntCatalog
from crawlers.registry import all_sources, get_source
from schema.crawl import CrawlRun
from schema.prices import Offer, PriceObservation
from service.catalog.ingest import ingest
from service.core.config import Settings
from service.core.db import make_engine
from service.crawl.records import CrawlRecords
from service.crawl.run import crawl_source
from service.query.sql import payload_sha256
from tests.support.factories import catalog_state
from tests.support.peer_csv import parsed_as_before, peer_csv
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, is_spider, replay, zipped

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
NAME = "stream-test"
PARSES: Counter[str] = Counter()
"""Payloads parsed, by URL (how often a crawl's payloads were read)."""


class Paged(ApiSource):
    """/items?page=N, each page's offers and the number of the next page."""

    name = NAME
    provider = "acme"
    base_url = "http://unused"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}/items", params={"page": "1"})

    def parse(self, response: Response, ctx: Context) -> Iterator[dict[str, Any] | Request]:
        PARSES[response.url] += 1
        body = json_body(response)
        for item in require(body, "items"):
            yield {
                "sku": item["sku"],
                "gpu_name_raw": "H100 SXM",
                "gpu_count": "8",
                "region": item.get("region", "r1"),
                "country": "DE",
                "price_kind": "on_demand",
                "unit": "hour",
                "amount": item["price"],
            }
        if body.get("next"):
            yield Request(f"{ctx.base_url}/items", params={"page": str(body["next"])})


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test source, registered; a network crawl keeps none of its parsed records (as
    one past :data:`crawlers.http.KEEP_RECORDS` does)."""
    monkeypatch.setitem(all_sources(), NAME, Paged)
    monkeypatch.setattr(http, "KEEP_RECORDS", 0)
    PARSES.clear()


def page(n: int, items: int = 3, last: bool = False, more: list[Any] | None = None) -> bytes:
    offers = [{"sku": f"p{n}-{i}", "price": f"{n}.{i + 1}"} for i in range(items)]
    return orjson.dumps({"items": offers + (more or []), "next": None if last else n + 1})


API = sorted(
    name
    for name, cls in all_sources().items()
    if not is_spider(cls) and getattr(cls, "kind", None) != "fx"
)


def configured(settings: Settings, server: ReplayServer) -> Settings:
    return settings.model_copy(
        update={
            "source_base_urls": {NAME: server.url},
            "http_max_retries": 1,
            "http_backoff_seconds": 0.01,
        }
    )


def provenance(engine: Engine) -> dict[str, str | None]:
    """Each offer's sku -> the payload (sha256) its open observation links to."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(OFFER.c.sku, payload_sha256())
            .join(OBS, OBS.c.offer_id == OFFER.c.id)
            .where(OBS.c.version_to.is_(None))
        ).all()
    return {str(sku): sha for sku, sha in rows}


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def crawl_three_pages(engine: Engine, settings: Settings, server: ReplayServer) -> Any:
    """A crawl of three pages of three offers each; every offer's observation links to
    the sha256 of its own page."""
    bodies = [page(1), page(2), page(3, last=True)]
    for n, body in enumerate(bodies, start=1):
        server.route(f"/items?page={n}", Reply(body))
    report = crawl_source(engine, configured(settings, server), NAME)
    assert report.label == "ok" and report.counts["added"] == 9, report
    expected = {f"p{n}-{i}": sha(body) for n, body in enumerate(bodies, 1) for i in range(3)}
    assert provenance(engine) == expected
    return report, bodies


def test_each_offer_links_to_the_page_it_came_from(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    report, _ = crawl_three_pages(engine, settings, server)
    # fetched and parsed once for the requests each page leads to, then read once
    assert sorted(PARSES.values()) == [2, 2, 2]
    assert len(report.records) == 9  # counted by the reading
    assert len(list(report.records)) == 9  # read again, from the payloads kept in memory
    assert sorted(PARSES.values()) == [3, 3, 3]


def test_a_small_network_crawl_keeps_its_records_and_their_provenance(
    engine: Engine, settings: Settings, server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to KEEP_RECORDS raw records, a network crawl's responses are parsed once."""
    monkeypatch.setattr(http, "KEEP_RECORDS", 9)
    _, bodies = crawl_three_pages(engine, settings, server)
    assert sorted(PARSES.values()) == [1, 1, 1]
    monkeypatch.setattr(http, "KEEP_RECORDS", 8)  # one too many: none kept, parsed again
    PARSES.clear()
    server.route("/items?page=1", Reply(page(1, more=[{"sku": "p1-9", "price": "7"}])))
    for n, body in enumerate(bodies[1:], start=2):
        server.route(f"/items?page={n}", Reply(body))
    again = crawl_source(engine, configured(settings, server), NAME)
    assert again.label == "ok" and again.counts["added"] == 1, again
    assert sorted(PARSES.values()) == [2, 2, 2]


def test_provenance_holds_when_an_ambiguous_offer_makes_a_second_pass(
    engine: Engine, settings: Settings, server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Page 3 quotes page 1's first offer again with another price, in a later batch
    (batches of 4): the offer is left out and the crawl is read again (a second pass);
    every other offer still links to its own page."""
    monkeypatch.setattr(run_module, "ingest", partial(ingest, batch_size=4))
    again = {"sku": "p1-0", "price": "9.99"}
    bodies = [page(1), page(2), page(3, last=True, more=[again])]
    for n, body in enumerate(bodies, start=1):
        server.route(f"/items?page={n}", Reply(body))
    report = crawl_source(engine, configured(settings, server), NAME)
    assert report.label == "ok", report
    assert report.counts["added"] == 8 and report.counts["rejected"] == 1
    expected = {f"p{n}-{i}": sha(body) for n, body in enumerate(bodies, 1) for i in range(3)}
    del expected["p1-0"]  # ambiguous: neither price is kept
    assert provenance(engine) == expected
    assert sorted(PARSES.values()) == [3, 3, 3]  # fetched, read, read again
    with engine.connect() as conn:
        reasons = conn.execute(
            select(RUN.c.rejected, RUN.c.seen).where(RUN.c.id == report.crawl_run_id)
        ).one()
    assert tuple(reasons) == (1, 8)


def test_saved_files_are_read_when_the_records_are_and_keep_their_provenance(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    files = []
    for n in (1, 2):
        path = tmp_path / f"page-{n}.json"
        path.write_bytes(page(n, items=4, last=n == 2))
        files.append(path)
    report = crawl_source(engine, settings, NAME, from_files=files)
    assert report.label == "ok" and report.counts["added"] == 8, report
    assert sorted(PARSES.values()) == [1, 1]  # never parsed before the ingest read them
    expected = {
        f"p{n}-{i}": sha(path.read_bytes()) for n, path in enumerate(files, 1) for i in range(4)
    }
    assert provenance(engine) == expected
    assert all(path.exists() for path in files)  # saved files are the user's: kept

    dry = crawl_source(None, settings, NAME, from_files=files, dry_run=True)
    assert dry.label == "ok" and dry.counts == {"seen": 8, "rejected": 0, "unmapped": 0}
    assert [r.sku for r in dry.records] == [f"p{n}-{i}" for n in (1, 2) for i in range(4)]


@pytest.mark.parametrize("name", API)
def test_every_api_source_reads_its_records_again_from_its_payloads(
    name: str, server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsed again from its payloads (as a crawl past KEEP_RECORDS is), a network crawl of
    each API source's fixtures gives the records, rejections, unmapped names and counts it
    gives keeping what it parsed while fetching (its ``start`` run again first)."""
    settings = configure(Settings(environment="test", _env_file=None), server, name)  # type: ignore[call-arg]

    def crawl(keep: int) -> Any:
        monkeypatch.setattr(http, "KEEP_RECORDS", keep)
        replay(name).serve(server)
        report = crawl_source(None, settings, name)
        assert report.label == "ok", report
        return (
            # when each crawl fetched its payloads aside
            [record.model_dump(mode="json", exclude={"observed_at"}) for record in report.records],
            [
                (r.position, r.reason, {**(r.record or {}), "observed_at": None})
                for r in report.rejections
            ],
            report.unmapped,
            report.counts,
        )

    kept = crawl(10**9)
    assert kept[0], "no records"
    assert crawl(0) == kept


@pytest.mark.parametrize(
    ("body", "reason", "detail"),
    [
        (b'{"items": [{"sku": "x", "price"', "invalid payload", "JSONDecodeError"),
        (b'{"offers": []}', "layout changed", "missing field 'items'"),
        (b'{"items": [{"price": "1.5"}]}', "layout changed", "KeyError: 'sku'"),
    ],
)
def test_a_malformed_page_fails_the_network_crawl_with_its_reason(
    engine: Engine,
    settings: Settings,
    server: ReplayServer,
    body: bytes,
    reason: str,
    detail: str,
) -> None:
    before = catalog_state(engine)
    server.route("/items?page=1", Reply(page(1)))
    server.route("/items?page=2", Reply(body))
    report = crawl_source(engine, configured(settings, server), NAME)
    assert report.label == f"failed: {reason}", report
    with engine.connect() as conn:
        run = conn.execute(select(RUN).where(RUN.c.id == report.crawl_run_id)).one()
    assert run.status == "failed" and run.reason == reason and detail in (run.error or "")
    assert catalog_state(engine) == before


@pytest.mark.parametrize(
    ("body", "reason", "detail"),
    [
        (b'{"items": [{"sku": "x", "price"', "invalid payload", "JSONDecodeError"),
        (b'{"offers": []}', "layout changed", "missing field 'items'"),
    ],
)
def test_a_malformed_saved_file_fails_the_crawl_when_its_records_are_read(
    engine: Engine,
    settings: Settings,
    tmp_path: Path,
    body: bytes,
    reason: str,
    detail: str,
) -> None:
    """A file is parsed only when the ingest reads the records: its error fails the crawl
    as it did when the files were parsed first, and nothing is written."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_bytes(page(1))
    bad.write_bytes(body)
    before = catalog_state(engine)
    report = crawl_source(engine, settings, NAME, from_files=[good, bad])
    assert report.label == f"failed: {reason}", report
    with engine.connect() as conn:
        run = conn.execute(select(RUN).where(RUN.c.id == report.crawl_run_id)).one()
    assert run.status == "failed" and run.reason == reason and detail in (run.error or "")
    assert catalog_state(engine) == before
    dry = crawl_source(None, settings, NAME, from_files=[good, bad], dry_run=True)
    assert dry.label == f"failed: {reason}"


# ------------------------------------------------------------------------- memory

PER_FILE, SMALL, LARGE, BATCH = 500, 3, 12, 150


def _files(folder: Path, count: int) -> list[Path]:
    """``count`` saved pages of :data:`PER_FILE` offers each, in 7 regions."""
    paths = []
    for n in range(count):
        path = folder / f"page-{count}-{n}.json"
        items = [
            {"sku": f"f{n}-{i}", "price": f"{1 + i % 50}.{i % 100:02d}", "region": f"r{i % 7}"}
            for i in range(PER_FILE)
        ]
        path.write_bytes(orjson.dumps({"items": items, "next": None}))
        paths.append(path)
    return paths


def catalog_copy(template: Path, database: Path) -> tuple[Engine, Settings]:
    """A fresh SQLite catalog at ``database``, copied from ``template``: its engine and
    settings."""
    shutil.copy(template, database)
    url = f"sqlite:///{database}"
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    return make_engine(url), settings


def _peak_bytes(
    template: Path, folder: Path, files: list[Path], batch: int, monkeypatch: pytest.MonkeyPatch
) -> int:
    """Peak traced bytes of ``crawl_source(..., from_files=files)`` into a fresh copy of
    the migrated template, validating and ingesting ``batch`` records at a time."""
    monkeypatch.setattr(pipeline_module, "VALIDATION_BATCH", batch)
    monkeypatch.setattr(run_module, "ingest", partial(ingest, batch_size=batch))
    engine, settings = catalog_copy(template, folder / f"crawl-{len(files)}-{batch}.db")
    try:
        gc.collect()
        tracemalloc.start()
        try:
            report = crawl_source(engine, settings, NAME, from_files=files)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        engine.dispose()
    assert report.label == "ok" and report.counts["added"] == len(files) * PER_FILE, report
    return peak


def test_a_crawl_holds_its_batch_not_its_records(
    sqlite_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crawl of 12 saved pages against one of 3: streamed (batches of 150) the larger
    one may hold more for what an ingest keeps by design (the amount seen under each
    offer's key) but not four times as much; with the whole crawl in one batch it does,
    the check that this measurement can fail."""
    monkeypatch.setattr(resolver_module, "MEMO_ENTRIES", 300)
    small, large = _files(tmp_path, SMALL), _files(tmp_path, LARGE)
    streamed = _peak_bytes(sqlite_template, tmp_path, large, BATCH, monkeypatch)
    streamed_small = _peak_bytes(sqlite_template, tmp_path, small, BATCH, monkeypatch)
    whole_batch = LARGE * PER_FILE
    whole = _peak_bytes(sqlite_template, tmp_path, large, whole_batch, monkeypatch)
    whole_small = _peak_bytes(sqlite_template, tmp_path, small, whole_batch, monkeypatch)
    assert whole > 3 * whole_small, (whole, whole_small)  # the measurement sees a crawl held
    assert streamed < 2.5 * streamed_small, (streamed, streamed_small)
    assert streamed * 3 < whole, (streamed, whole)


# ------------------------------------------------------------------------- peer catalogs

PEER_CRAWLS = ["gpuhunt:gcp", "gpuhunt:runpod", "skypilot:aws", "skypilot:vast"]
VARYING = {"id", "observation_id", "first_seen_at", "last_changed_at", "raw_sha256"}
BY_URL = {"source_url", "fingerprint"}
"""What a saved file's URL changes (its ``file:`` URL is an attribute of the offer)."""


def _peer_state(engine: Engine, name: str) -> tuple[list[dict[str, Any]], set[str | None]]:
    """The source's offers (every column but ids and times) with their open observation's
    amount, and the payloads those observations link to."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(OFFER, OBS.c.amount.label("observed"), payload_sha256())
            .join(OBS, OBS.c.offer_id == OFFER.c.id)
            .where(OFFER.c.source == name, OBS.c.version_to.is_(None))
        ).mappings()
        state, links = [], set()
        for row in rows:
            state.append({k: v for k, v in row.items() if k not in VARYING})
            links.add(row["raw_sha256"])
    return sorted(state, key=lambda r: (r["sku"], r["region"], r["price_kind"], r["unit"])), links


@pytest.mark.parametrize("name", PEER_CRAWLS)
def test_a_peer_catalog_crawl_ingests_what_the_holding_collapse_gave(
    name: str,
    sqlite_reference_template: Path,
    server: ReplayServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A generated catalog (zones and hosts of an offer, ties, repeats far apart, missing
    and unreadable prices) served by the local HTTP server: parsed while fetching and kept,
    parsed again when ingested, or read from a saved file, a crawl validates the records
    the collapse that held them all gave, and stores the same offers and observations,
    each linked to the catalog's payload."""
    cls: Any = get_source(name)
    table = peer_csv(cls, 3000, seed=17)
    if issubclass(cls, GpuhuntCatalog):
        target = f"/{CHANNEL}/{cls.peer}/20261204-1/catalog.zip"
        served = zipped(f"{cls.peer}.csv", table)
        server.route(
            f"/{CHANNEL}/{cls.peer}/version", Reply(b"20261204-1\n", content_type="text/plain")
        )
        server.route(target, Reply(served, content_type="application/zip"))
    else:
        target, served = cls.catalog_path(), table
        server.route(target, Reply(served, content_type="text/csv"))
    saved = tmp_path / f"{cls.peer}.csv"
    saved.write_bytes(table)
    meta = SourceMeta(name=name, provider=cls.provider, currency=cls.currency)
    response = Response(server.url + target, 200, table, {}, None, datetime.now(UTC))
    before, _ = parsed_as_before(cls(), table, response)
    expected = CrawlRecords(meta, lambda: [dict(r) for r in before])
    wanted = [r.model_dump(mode="json", exclude={"observed_at"}) for r in expected]
    rejected = [(r.position, r.reason) for r in expected.rejections]
    assert wanted and rejected  # both kinds met

    hints: list[int | None] = []
    real_hint = ingest_module.expected_records

    def hint(records: Any) -> int | None:
        hints.append(real_hint(records))
        return hints[-1]

    monkeypatch.setattr(ingest_module, "expected_records", hint)

    def crawl(keep: int | None) -> tuple[list[dict[str, Any]], set[str | None]]:
        engine, settings = catalog_copy(sqlite_reference_template, tmp_path / f"peer-{keep}.db")
        try:
            if keep is None:
                report = crawl_source(engine, settings, name, from_files=[saved])
                url = saved.resolve().as_uri()
            else:
                monkeypatch.setattr(http, "KEEP_RECORDS", keep)
                report = crawl_source(engine, configure(settings, server, name), name)
                url = response.url
            assert report.label == "ok", report
            got = [r.model_dump(mode="json", exclude={"observed_at"}) for r in report.records]
            assert got == [{**r, "source_url": url} for r in wanted]
            assert [(r.position, r.reason) for r in report.rejections] == rejected
            return _peer_state(engine, name)
        finally:
            engine.dispose()

    kept, read_again, from_file = crawl(10**9), crawl(0), crawl(None)
    # the size hint each ingest had at its first new offers (crawlers.size): the records
    # kept, or the offers the collapse's first pass announced, valid or not
    assert hints == [len(before)] * 3
    assert kept[0] and kept[0] == read_again[0]
    assert [{k: v for k, v in row.items() if k not in BY_URL} for row in kept[0]] == [
        {k: v for k, v in row.items() if k not in BY_URL} for row in from_file[0]
    ]
    assert kept[1] == read_again[1] == {sha(served)}
    assert from_file[1] == {sha(table)}


def test_a_peer_catalog_is_parsed_when_its_records_are_read_not_while_fetched(
    engine: Engine, settings: Settings, server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog leads to no request: a network crawl leaves it for the ingest's reading
    (one parse of its CSV, in two passes), instead of parsing it while fetching too."""
    monkeypatch.setattr(http, "KEEP_RECORDS", 20_000)
    readings: list[str] = []
    parse = gpuhunt_module.csv_offers

    def counted(source: Any, table: Any, response: Response) -> Iterator[dict[str, Any]]:
        readings.append(response.url)
        return parse(source, table, response)

    monkeypatch.setattr(gpuhunt_module, "csv_offers", counted)
    replay("gpuhunt:runpod").serve(server)
    report = crawl_source(engine, configure(settings, server, "gpuhunt:runpod"), "gpuhunt:runpod")
    assert report.label == "ok" and report.counts["added"], report
    assert len(readings) == 1, readings
