"""PostgreSQL exports written by the server (``COPY … TO STDOUT``) are byte for byte the
Python formatting path's output, for awkward data, every filter kind, pinned versions and
empty results; and an export keeps the snapshot it started with."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text, update

from schema.enums import PriceKind
from service.api.main import create_app
from service.api.params import Listing, listing
from service.api.routes import export
from service.catalog.fx import Rate, store_rates
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from service.query.pg_copy import usable
from tests.conftest import scratch_pg_database
from tests.support.factories import OBS, OFFER, record

pytestmark = pytest.mark.postgres

HOSTILE = [
    "plain",
    "with,comma",
    'with "quotes"',
    '"',
    '""',
    ",",
    "two\nlines",
    "carriage\rreturn",
    "crlf\r\nend",
    "back\\slash \\N \\.",
    "tab\there",
    "Ünïcødé – 東京 😀 עברית",
    "mixed, \"all\"\nof 'them'",
    '=HYPERLINK("http://x","y")',  # formulas, for a spreadsheet: made inert in CSV
    "+1 GPU",
    "-dash",
    "@SUM(1)",
]
"""What ingest accepts (it strips outer whitespace and refuses control characters)."""

RAW = [
    "",
    " ",
    "  spaced  ",
    "\\.",
    "\u200frtl\u200e marks \u202e",
    "line\u2028separator\u2029",
    "controls \x01\x08\x0b\x0c\x1b\x1f\x7f",
    "".join(chr(c) for c in range(1, 128)),
    "\x85 next line, \xa0 nbsp",
    'trailing quote"',
    "\r",
    "\n",
    "\t=tab first",
]
"""Written straight into the tables: what older data or another writer may hold."""

CURRENCIES = ("USD", "EUR", "GBP", "JPY")
AMOUNTS = ("0.0000001", "12.5", "100", "3.14159", "1234567.1234567891", "0.1000000001")
COUNTS = ("8", "0.5", "0.125", "1", "2.25")
PROVIDERS = ("aws", "lambda", "runpod")
COUNTRIES = ("DE", "US", "FR", "JP", None)
GPUS = (
    ("nvidia-h100-sxm-80gb", "H100 SXM"),
    ("nvidia-h100-pcie-80gb", "H100 PCIe"),
    (None, "Mystery GPU"),
)


def _settings(url: str) -> Settings:
    return Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]


def _records(n: int, bump: str = "0") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        provider = PROVIDERS[i % 3]
        slug, name = GPUS[i % 3]
        hostile = HOSTILE[i % len(HOSTILE)]
        item = record(
            i,
            provider=provider,
            source=provider,
            sku=f"{hostile}-{i}",
            gpu_model=slug,
            gpu_name_raw=hostile if i % 2 else name,
            gpu_count=COUNTS[i % len(COUNTS)],
            gpu_memory_gb=(None, "80", "40.5")[i % 3],
            vcpus=(None, "26", "7.5")[i % 3],
            memory_gb=(None, "1000000.123", "64")[(i // 3) % 3],
            country=COUNTRIES[i % len(COUNTRIES)],
            region=f"r{i % 4}",
            source_url=None if i % 7 == 0 else f'https://example.com/p?a={i},b="{hostile}"',
            bare_metal=(None, True, False)[i % 3],
            price_floor=i % 4 == 1,
            price_kind=("on_demand", "spot", "reserved_1y")[i % 3],
            currency=CURRENCIES[i % len(CURRENCIES)],
            amount=str(Decimal(AMOUNTS[i % len(AMOUNTS)]) + Decimal(bump)),
        )
        if i % 3 == 2:
            item["price_per"] = "gpu"
        out.append(item)
    return out


def _build(url: str, n: int = 60) -> Engine:
    """Two ingests per provider (so version 2 and the current state differ), then raw
    hostile values written straight into some rows."""
    engine = make_engine(url)
    settings = _settings(url)
    load_reference(engine, REFERENCE_DIR)
    with engine.begin() as conn:
        day = datetime.now(UTC).date() - timedelta(days=3)
        rates = [("USD", "1.08"), ("GBP", "0.85"), ("JPY", "162.123456")]
        store_rates(conn, [Rate(day, c, Decimal(r)) for c, r in rates], "test", None)
    first = _records(n)
    for provider in PROVIDERS:
        mine = [r for r in first if r["provider"] == provider]
        ingest(engine, settings, CrawlResult(source=provider, records=mine))
    # aws again: some repriced, one withdrawn, one new
    again = [r for r in _records(n + 3, bump="0.01") if r["provider"] == "aws"][1:]
    ingest(engine, settings, CrawlResult(source="aws", records=again))
    with engine.begin() as conn:
        ids = [r[0] for r in conn.execute(text("SELECT id FROM offer ORDER BY id"))]
        for k, value in enumerate(RAW):
            offer_id = ids[(5 * k + 1) % len(ids)]
            conn.execute(
                update(OFFER)
                .where(OFFER.c.id == offer_id)
                .values(
                    gpu_name_raw=value, sku=f"{value}#{k}", region=value[:100], source_url=value
                )
            )
            digest = f"{k}:{value}"[:64]  # any text a payload row holds, exported as is
            conn.execute(
                text(
                    "INSERT INTO raw_payload (sha256, size, compressed, first_seen_at) "
                    "VALUES (:d, 0, '', now())"
                ),
                {"d": digest},
            )
            link = conn.execute(
                text(
                    "INSERT INTO crawl_run_payload (crawl_run_id, sha256, url, fetched_at) "
                    "SELECT min(id), :d, :d, now() FROM crawl_run RETURNING id"
                ),
                {"d": digest},
            ).scalar()
            conn.execute(
                text("UPDATE price_observation SET payload_id = :p WHERE offer_id = :id"),
                {"p": link, "id": offer_id},
            )
        times = [
            "2026-01-02 03:04:05+00",  # no microseconds: isoformat leaves them out
            "2026-01-02 03:04:05.12+00",  # isoformat writes .120000
            "2026-06-30 23:59:59.000001+02",  # another offset: UTC in the output
            "0999-12-31 23:00:00.5+00",  # a three-digit year
        ]
        for k, when in enumerate(times):
            conn.execute(
                text(
                    "UPDATE offer SET first_seen_at = CAST(:t AS timestamptz), "
                    "last_changed_at = CAST(:t AS timestamptz) + interval '1 microsecond' "
                    "WHERE id = :id"
                ),
                {"t": when, "id": ids[3 * k + 2]},
            )
        extremes = ["0.0000000001", "99999999999999999.9999999999", "1000000", "0"]
        for k, value in enumerate(extremes):
            conn.execute(
                update(OBS)
                .where(OBS.c.offer_id == ids[4 * k + 3])
                .values(hourly_amount=Decimal(value), fx_rate=Decimal(value))
            )
    return engine


def _listing(engine: Engine, **params: Any) -> Listing:
    with engine.connect() as conn:
        return listing(conn, **params)


def _body(engine: Engine, found: Listing, jsonl: bool, *, server: bool) -> bytes:
    chunks = export._text(
        engine, found.filters, found.compliance, found.pinned_version, jsonl, server=server
    )
    return b"".join(chunks)


@pytest.fixture(scope="module")
def catalog_url() -> Iterator[str]:
    """A database of its own, built once and only read by the tests using it."""
    with scratch_pg_database() as url:
        upgrade(url)
        _build(url).dispose()
        yield url


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Engine]:
    engine = make_engine(catalog_url)
    yield engine
    engine.dispose()


FILTERS: list[dict[str, Any]] = [
    {},
    {"gpu": "h100"},
    {"gpu": "nvidia-h100-pcie-80gb", "country": "de"},
    {"country": "US"},
    {"not_country": ["US,JP"]},
    {"provider": ["aws", "runpod"]},
    {"cert": ["iso27001"]},
    {"gdpr": "eu_eea"},
    {"min_gpus": Decimal("0.5"), "max_gpus": Decimal("2.25")},
    {"bare_metal": True},
    {"bare_metal": False, "price_kind": PriceKind("reserved_1y")},
    {"max_price_per_gpu_hour": Decimal("50")},
    {"region": "r1", "source": "lambda"},
    {"as_of": "2"},
    {"as_of": "1", "gpu": "h100"},
    {"export_destination": "GB"},
    {"provider_hq_not_in": ["DE"]},
    {"include_peers": True, "min_gpu_memory_gb": Decimal("50")},
    {"cert": ["pci_dss"], "gdpr": "any"},
    {"country": "BR"},  # nothing matches
    {"gpu": "h100", "country": "JP", "cert": ["iso27001"], "as_of": "3"},
]


@pytest.mark.parametrize("params", FILTERS, ids=[str(sorted(p)) or "all" for p in FILTERS])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_copy_output_is_the_python_output(
    catalog: Engine, params: dict[str, Any], fmt: str
) -> None:
    with catalog.connect() as conn:
        assert usable(conn)  # else both calls below would take the Python path
    found = _listing(catalog, **params)
    jsonl = fmt == "jsonl"
    python = _body(catalog, found, jsonl, server=False)
    server = _body(catalog, found, jsonl, server=True)
    assert server == python
    lines = python.count(b"\n") - (0 if jsonl else python.count(b"\r\n"))
    if params.get("country") == "BR":
        assert python == (b"" if jsonl else (",".join(export.NAMES) + "\n").encode())
    else:
        assert lines > (0 if jsonl else 1)


def test_awkward_values_are_present(catalog: Engine) -> None:
    """The catalog holds what the byte comparison is meant to cover."""
    body = _body(catalog, _listing(catalog), False, server=True).decode()
    for value in ('"with ""quotes"""', '"two\nlines', "\u200frtl\u200e", "\\.", ",,", "Ünïcødé"):
        assert value in body
    for value in ("0.0000001", "1234567.1234567891", "99999999999999999.9999999999", ",0,"):
        assert value in body
    for value in ("T03:04:05+00:00", "T03:04:05.120000+00:00", "T21:59:59.000001+00:00"):
        assert value in body
    assert "0999-12-31T23:00:00.500000+00:00" in body
    assert ",true," in body and ",false," in body and ",EUR," in body and ",JPY," in body
    assert '"\'=HYPERLINK(""http://x"",""y"")' in body and ",'@SUM(1)," in body
    assert "\n=HYPERLINK" not in body and ",=HYPERLINK" not in body and ",@SUM" not in body
    jsonl = _body(catalog, _listing(catalog), True, server=True).decode()
    assert '"=HYPERLINK(\\"http://x\\",\\"y\\")' in jsonl  # exact in JSON
    assert '"controls \\u0001\\b\\u000b\\f\\u001b\\u001f\x7f"' in jsonl
    assert '"bare_metal":null' in jsonl and '"price_is_floor":true' in jsonl


def test_the_route_streams_the_server_output(catalog: Engine, catalog_url: str) -> None:
    app = create_app(_settings(catalog_url).model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as client:
        for fmt in ("csv", "jsonl"):
            for params in ({}, {"gpu": "h100", "as_of": "2"}, {"cert": "iso27001"}):
                got = client.get("/v1/export", params={"format": fmt, **params})
                assert got.status_code == 200
                plain = {k: [v] if k == "cert" else v for k, v in params.items()}
                found = _listing(catalog, **plain)
                assert got.content == _body(catalog, found, fmt == "jsonl", server=False)


def test_chunks_are_about_64_kib(pg_url: str) -> None:
    engine = _build(pg_url, n=900)
    try:
        chunks = list(_stream(engine, _listing(engine), jsonl=False))
        assert len(chunks) > 3
        # whole rows of at most a few KiB; a piece holding a CR is rewritten (a little shorter)
        assert all(export.CHUNK - 4096 <= len(c) < export.CHUNK + 4096 for c in chunks[:-1])
        assert b"".join(chunks) == _body(engine, _listing(engine), False, server=False)
    finally:
        engine.dispose()


def _stream(engine: Engine, found: Listing, jsonl: bool) -> Generator[bytes, None, None]:
    """The body as the route streams it (server-written on PostgreSQL)."""
    yield from export._text(engine, found.filters, found.compliance, found.pinned_version, jsonl)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_an_export_keeps_its_snapshot(pg_url: str, fmt: str) -> None:
    """An ingest that commits while an export streams is not in that export."""
    engine = _build(pg_url, n=900)
    jsonl = fmt == "jsonl"
    try:
        found = _listing(engine)
        before = _body(engine, found, jsonl, server=False)
        chunks = _stream(engine, found, jsonl=jsonl)
        first = next(chunks)  # the COPY runs: its snapshot is taken
        repriced = [r for r in _records(903, bump="7") if r["provider"] == "lambda"]
        ingest(engine, _settings(pg_url), CrawlResult(source="lambda", records=repriced))
        assert first + b"".join(chunks) == before
        after = _body(engine, found, jsonl, server=True)
        assert after != before
        assert after == _body(engine, found, jsonl, server=False)
    finally:
        engine.dispose()


def test_an_export_stopped_early_leaves_the_connection_usable(pg_url: str) -> None:
    engine = _build(pg_url, n=900)
    try:
        chunks = _stream(engine, _listing(engine), jsonl=False)
        next(chunks)
        chunks.close()  # the client went away: the COPY is cancelled
        with engine.connect() as conn:
            assert int(conn.execute(text("SELECT count(*) FROM offer")).scalar() or 0) > 700
            busy = text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND query LIKE 'COPY (%' AND state <> 'idle'"
            )
            assert conn.execute(busy).scalar() == 0  # cancelled, rolled back, back in the pool
        body = _body(engine, _listing(engine), False, server=True)
        assert body == _body(engine, _listing(engine), False, server=False)
    finally:
        engine.dispose()


def test_dates_are_iso(catalog: Engine) -> None:
    body = _body(catalog, _listing(catalog), True, server=True).decode()
    day = (datetime.now(UTC).date() - timedelta(days=3)).isoformat()
    assert f'"fx_date":"{day}"' in body
    assert isinstance(date.fromisoformat(day), date)


def test_the_copy_runs_in_a_repeatable_read_transaction(catalog: Engine) -> None:
    """One snapshot for the whole export, as the Python path has (COPY is one statement,
    the transaction pins it the same way for both paths)."""
    with export._snapshot(catalog) as conn:
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("SHOW transaction_isolation")
        assert cursor.fetchone() == ("repeatable read",)
