"""The catalog (or a filtered part of it) as CSV, JSON Lines or Parquet, streamed.

Every export reads one statement in one snapshot (PostgreSQL: a REPEATABLE READ
transaction), in offer id order, and is sent in chunks of about 64 KiB.

PostgreSQL, CSV and JSON Lines: the server writes the body. The export's statement
(:func:`service.query.offers.base_query` with the same filters, ``version`` and compliance sets)
selects every column already as the Python path's text (:func:`_server_columns`: NUMERIC
through ``trim_scale``, timestamps as ``isoformat()`` of the UTC value, booleans as
true/false) and runs as ``COPY (…) TO STDOUT`` (:mod:`service.query.pg_copy`; its parameters bound
by psycopg, never pasted); CSV in COPY's default CSV dialect, which is ``csv.writer``'s
(a field holding a bare CR, which only data from other writers than ingest can hold, is the
one difference and is rewritten by Python: :func:`_as_csv_writer`); JSON Lines as
``row_to_json`` of that row (compact, keys in order, as orjson writes it). The bytes equal
the Python path's (``tests/api/test_export_pg_copy.py`` compares both on awkward data, every
filter kind and pinned versions). Per 200,000 rows, CSV costs 0.3-0.4 CPU-s in the app and
1.2-1.3 in PostgreSQL, against 3.9-4.3 + 0.8 for the Python path; JSON Lines 0.5 + 2.4
against 4.0 + 0.8 (docs/benchmarks.md: 143,000-152,000 CSV rows/s over HTTP, was 34,000-43,000).

SQLite (and other drivers): the Python path. One statement read from the driver in
batches without SQLAlchemy's type processing, each column converted once by kind (decimals
are already canonical text on SQLite; the few distinct timestamps are formatted once), rows
formatted by ``csv.writer`` / orjson. (Letting SQLite write whole CSV lines was measured
and dropped: its expression evaluation costs about what ``csv.writer`` does, 1.18 against
1.25 CPU-seconds per 200,000 rows, where fetching the raw columns alone takes 0.76.)
Parquet reads typed rows on both backends (it needs them typed anyway).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from typing import Any, Literal

import anyio
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy import (
    Boolean,
    Connection,
    Date,
    DateTime,
    Dialect,
    Engine,
    String,
    Text,
    case,
    cast,
    func,
    select,
)
from sqlalchemy.types import TypeDecorator
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from schema.types import DecimalType, UTCDateTime, decimal_to_text
from service.api.deps import ConnDep, cache, get_engine, reject_unknown_params
from service.api.params import FILTER_PARAMS, ListingDep
from service.catalog.locations import locations_text
from service.core.spreadsheet import FORMULA_START, INERT_COLUMNS, inert
from service.query.filters import ComplianceSets, OfferFilters
from service.query.offers import base_query, stream_offers
from service.query.offers import stream_raw_offers as stream_raw
from service.query.pg_copy import CSV, LINES, compile_copy, copy_out, usable
from service.query.places import location_columns
from service.query.sql import OFFER, OFFER_COLUMNS, observation_run, payload_sha256

router = APIRouter(prefix="/v1", tags=["export"])

COLUMNS = (
    ("id", "id"),
    ("source", "source"),
    ("provider", "provider"),
    ("sku", "sku"),
    ("region", "region"),
    ("country", "country"),
    ("gpu", "gpu_slug"),
    ("gpu_name_raw", "gpu_name_raw"),
    ("gpu_count", "gpu_count"),
    ("gpu_memory_gb", "gpu_memory_gb"),
    ("vcpus", "vcpus"),
    ("memory_gb", "memory_gb"),
    ("bare_metal", "bare_metal"),
    ("price_kind", "price_kind"),
    ("unit", "unit"),
    ("price_per", "price_per"),
    ("amount", "amount"),
    ("currency", "currency"),
    ("hourly_amount", "hourly_amount"),
    ("price_usd", "amount_usd"),
    ("hourly_usd", "hourly_usd"),
    ("price_per_gpu_hour_usd", "gpu_hour_usd"),
    ("fx_rate_usd", "fx_rate"),
    ("fx_date", "fx_date"),
    ("price_is_floor", "price_floor"),
    # true / false as the source says; empty when it does not say (docs/sources/cny-clouds.md)
    ("price_includes_tax", "tax_included"),
    ("first_seen", "first_seen_at"),
    ("last_changed", "last_changed_at"),
    ("catalog_version", "version_from"),
    ("crawl_run_id", "crawl_run_id"),
    ("raw_payload_sha256", "raw_sha256"),
    ("source_url", "source_url"),
    # the cluster facts (docs/cluster-facts.md); cluster_basis: one letter per fact in this
    # order, s = the source, r = the reference data, - = unknown
    ("interconnect", "interconnect"),
    ("interconnect_gbps_per_gpu", "interconnect_gbps"),
    ("network", "network"),
    ("network_gbps_per_node", "network_gbps"),
    ("cluster_basis", "cluster_basis"),
    # where an offer quoted for several places can run (docs/locations.md); ``country`` is
    # then the matching (or first) location's, as in the listing
    ("location_region", "location_region"),
    ("locations", "locations"),
)
NAMES = [name for name, _ in COLUMNS]
MEDIA = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}
PARQUET_SCHEMA = pa.schema(
    [
        (name, pa.int64())
        if name in ("id", "catalog_version", "crawl_run_id")
        else (name, pa.bool_())
        if name in ("bare_metal", "price_is_floor", "price_includes_tax")
        else (name, pa.timestamp("us", tz="UTC"))
        if name in ("first_seen", "last_changed")
        else (name, pa.date32())
        if name == "fx_date"
        else (name, pa.string())
        for name in NAMES
    ]
)


CHUNK = 64 * 1024
"""Bytes per streamed chunk (about)."""

SELECTED: dict[str, Any] = {
    c.name: c for c in (*OFFER_COLUMNS, payload_sha256(), observation_run())
}  # the last two: an observation stores neither (the run: its version's, when not its own)
EXPORT_COLUMNS = [SELECTED[column] for _, column in COLUMNS if column in SELECTED]
"""The offer's own columns; :func:`_columns` adds the location ones for a request."""


def _columns(filters: OfferFilters, compliance: ComplianceSets, dialect: str) -> list[Any]:
    """The export's columns for these filters: ``country`` and the two location columns
    follow the location filters (:func:`service.query.places.location_columns`)."""
    country, location_region, locations = location_columns(filters, compliance, dialect)
    columns = [country if c.name == "country" else c for c in EXPORT_COLUMNS]
    return [*columns, location_region, locations]


Convert = Callable[[Any], Any]


@contextmanager
def _snapshot(engine: Engine) -> Iterator[Connection]:
    """One connection (PostgreSQL: REPEATABLE READ) for the whole export."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        yield conn


def _rows(
    engine: Engine, filters: OfferFilters, compliance: ComplianceSets, version: int | None
) -> Iterator[list[dict[str, Any]]]:
    with _snapshot(engine) as conn:
        yield from stream_offers(conn, filters, version=version, compliance=compliance)


def _memo(convert: Convert) -> Convert:
    """``convert`` once per distinct value (an ingest stamps one time on many rows)."""
    seen: dict[Any, Any] = {None: None}

    def once(value: Any) -> Any:
        try:
            return seen[value]
        except KeyError:
            out = seen[value] = convert(value)
            return out

    return once


Kind = Literal["bool", "datetime", "decimal", "date", "text", "number"]


def _kind(column: Any) -> Kind:
    """What a column holds, by its SQL type (``python_type`` says ``object`` for the
    project's and SQLModel's own types)."""
    kind = column.type
    if isinstance(kind, TypeDecorator) and not isinstance(kind, DecimalType | UTCDateTime):
        kind = kind.impl  # e.g. SQLModel's AutoString: a String
    if isinstance(kind, DecimalType):
        return "decimal"
    if isinstance(kind, UTCDateTime | DateTime):
        return "datetime"
    if isinstance(kind, Boolean):
        return "bool"
    if isinstance(kind, Date):
        return "date"
    return "text" if isinstance(kind, String) else "number"


def _converters(dialect: Dialect, jsonl: bool) -> list[tuple[int, Convert]]:
    """(position, conversion) for the columns whose driver values need one.

    The output equals the typed path's: decimals as canonical text, timestamps as
    ``isoformat()`` of the aware UTC value, dates as ISO text, booleans as true/false.
    """
    out: list[tuple[int, Convert]] = []
    sqlite = dialect.name == "sqlite"
    for position, column in enumerate(EXPORT_COLUMNS):
        kind = _kind(column)
        if kind == "bool":
            if sqlite or not jsonl:
                truth = {None: None, 0: False, 1: True} if jsonl else {0: "false", 1: "true"}
                out.append((position, truth.get))
        elif kind == "datetime":
            typed = column.type.dialect_impl(dialect).result_processor(dialect, None)
            out.append((position, _memo(_isoformat(typed))))
        elif kind == "decimal" and not sqlite:
            out.append((position, _memo(decimal_to_text)))
        elif kind == "date":
            if sqlite:  # days since 1970 (schema.types.CompactDate): read as the date
                typed = column.type.dialect_impl(dialect).result_processor(dialect, None)
                out.append((position, _memo(_isoformat(typed))))
            else:
                out.append((position, _memo(date.isoformat)))
    if not jsonl:
        out += [(NAMES.index(name), _memo(inert)) for name in sorted(INERT_COLUMNS)]
    return out


def _isoformat(typed: Convert) -> Convert:
    def convert(value: Any) -> Any:
        return typed(value).isoformat()

    return convert


def _raw(
    engine: Engine,
    filters: OfferFilters,
    compliance: ComplianceSets,
    version: int | None,
    jsonl: bool,
) -> Iterator[Iterator[list[Any]]]:
    """Batches of export rows (``COLUMNS`` order) with every value converted, in one
    snapshot (also used by ``gpuatlas export``, which counts the rows as they pass)."""
    with _snapshot(engine) as conn:
        yield from _batches(conn, filters, compliance, version, jsonl)


def _batches(
    conn: Connection,
    filters: OfferFilters,
    compliance: ComplianceSets,
    version: int | None,
    jsonl: bool,
) -> Iterator[Iterator[list[Any]]]:
    converters = _converters(conn.dialect, jsonl)
    columns = _columns(filters, compliance, conn.dialect.name)
    batches = stream_raw(conn, columns, filters, version=version, compliance=compliance)
    for part in batches:
        yield _convert(part, converters)


def _convert(
    part: Sequence[Sequence[Any]], converters: list[tuple[int, Convert]]
) -> Iterator[list[Any]]:
    for raw in part:
        row = list(raw)
        for position, convert in converters:
            row[position] = convert(row[position])
        yield row


def _csv(batches: Iterator[Iterator[list[Any]]]) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # the dialect ``pg_copy.CSV`` matches
    writer.writerow(NAMES)
    for batch in batches:
        writer.writerows(batch)  # None is written as an empty field
        if buffer.tell() >= CHUNK:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def _jsonl(batches: Iterator[Iterator[list[Any]]]) -> Iterator[bytes]:
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    chunk: list[bytes] = []
    size = 0
    for batch in batches:
        for row in batch:
            line = dumps(dict(zip(NAMES, row, strict=True)), option=newline)
            chunk.append(line)
            size += len(line)
            if size >= CHUNK:
                yield b"".join(chunk)
                chunk, size = [], 0
    yield b"".join(chunk)


def _iso_utc(column: Any) -> Any:
    """``datetime.isoformat()`` of the aware UTC value, in SQL: seconds, then ``.ffffff``
    only when the microseconds are not zero, then ``+00:00`` (NULL stays NULL)."""
    utc = func.timezone("UTC", column)  # the UTC wall time, whatever the session's TimeZone
    whole = case(
        (func.date_trunc("second", utc) == utc, 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
        else_='YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"',
    )
    return func.to_char(utc, whole)


def _server_columns(jsonl: bool, columns: Sequence[Any]) -> list[Any]:
    """The export columns as PostgreSQL expressions whose text is the Python path's text.

    Decimals: ``trim_scale`` drops NUMERIC's padding zeros (the canonical text);
    timestamps: see :func:`_iso_utc`; dates: ISO; booleans: ``true``/``false`` (JSON:
    native). CSV only: an empty string becomes NULL, which COPY writes unquoted, as
    ``csv.writer`` writes ``""`` (COPY would quote it to tell it from NULL), and a source's
    free text that a spreadsheet would run as a formula gets its apostrophe
    (:mod:`service.core.spreadsheet`).
    """
    out: list[Any] = []
    for name, column in zip(NAMES, columns, strict=True):
        kind = _kind(column)
        value: Any
        if kind == "decimal":
            value = cast(func.trim_scale(column), Text)
        elif kind == "datetime":
            value = _iso_utc(column)
        elif kind == "date":
            value = func.to_char(column, "YYYY-MM-DD")
        elif kind == "bool" and not jsonl:
            value = cast(column, Text)
        elif kind == "text" and not jsonl:
            value = func.nullif(column, "")
            if name in INERT_COLUMNS:  # service.core.spreadsheet
                value = case((func.left(value, 1).in_(FORMULA_START), "'" + value), else_=value)
        else:
            value = column
        out.append(value.label(name))
    return out


def _copied(
    conn: Connection,
    filters: OfferFilters,
    compliance: ComplianceSets,
    version: int | None,
    jsonl: bool,
) -> Iterator[bytes]:
    """The CSV / JSON Lines body written by PostgreSQL (``COPY … TO STDOUT``).

    The same statement as the Python path (:func:`service.query.offers.base_query`, id order);
    JSON Lines: ``row_to_json`` of it (compact, keys in ``COLUMNS`` order, non-ASCII as
    is, control characters escaped as orjson escapes them).
    """
    dialect = conn.dialect.name
    columns = _server_columns(jsonl, _columns(filters, compliance, dialect))
    stmt = base_query(columns, filters, dialect, version, compliance, scan=True)
    if jsonl:
        row = stmt.subquery("e")
        line = func.row_to_json(row.table_valued())
        lines = select(line).select_from(row).order_by(row.c.id)
        statement, params = compile_copy(conn, lines, LINES)
        yield from copy_out(conn, statement, params, CHUNK)
        return
    statement, params = compile_copy(conn, stmt.order_by(OFFER.c.id), CSV)
    yield from copy_out(conn, statement, params, CHUNK, head=_HEADER, fix=_as_csv_writer)


def _as_csv_writer(rows: bytes) -> bytes:
    """Whole CSV rows as ``csv.writer`` writes them.

    The one difference between the two writers: a field holding a carriage return but no
    comma, quote or line feed is quoted by PostgreSQL and, on Python 3.11 (lineterminator
    ``\n``), not by ``csv.writer``. Ingest refuses control characters, so only data from
    other writers has one; a piece holding a CR is read back and rewritten by Python
    (identity for every other row), any other piece passes untouched.
    """
    if b"\r" not in rows:
        return rows
    out = io.StringIO()
    parsed = csv.reader(io.StringIO(rows.decode(), newline=""))
    csv.writer(out, lineterminator="\n").writerows(parsed)
    return out.getvalue().encode()


_HEADER = (",".join(NAMES) + "\n").encode()
"""``csv.writer``'s header line (no name needs quoting)."""


def _text(
    engine: Engine,
    filters: OfferFilters,
    compliance: ComplianceSets,
    version: int | None,
    jsonl: bool,
    *,
    server: bool = True,
) -> Iterator[bytes]:
    """The CSV / JSON Lines body in one snapshot: written by PostgreSQL when it can
    (``server``), else formatted here (SQLite, other drivers)."""
    with _snapshot(engine) as conn:
        if server and usable(conn):
            yield from _copied(conn, filters, compliance, version, jsonl)
            return
        batches = _batches(conn, filters, compliance, version, jsonl)
        yield from _jsonl(batches) if jsonl else _csv(batches)


class _Sink(io.RawIOBase):
    """A write-only file whose bytes are drained after every row group."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.chunks.append(chunk)
        self.position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.position

    def drain(self) -> bytes:
        out, self.chunks = b"".join(self.chunks), []
        return out


def _parquet(batches: Iterator[list[dict[str, Any]]]) -> Iterator[bytes]:
    sink = _Sink()
    writer = pq.ParquetWriter(sink, PARQUET_SCHEMA, compression="zstd")
    for batch in batches:
        columns = {}
        for name, column in COLUMNS:
            values = [r[column] for r in batch]
            if name == "locations":
                values = [locations_text(v) for v in values]
            if PARQUET_SCHEMA.field(name).type == pa.string():
                values = [None if v is None else str(v) for v in values]
            columns[name] = values
        writer.write_table(pa.table(columns, schema=PARQUET_SCHEMA))
        yield sink.drain()
    writer.close()
    yield sink.drain()


class ClosingStream(StreamingResponse):
    """A streamed body whose generator is closed when the response ends, also when the
    client went away in the middle: Starlette stops reading a plain iterator then, but
    never closes it. Until a garbage collection found it, the export's connection stayed
    out of the pool, in its snapshot; on PostgreSQL its COPY waited in ``ClientWrite`` for
    a reader that was gone, and held up ``DROP DATABASE`` on the whole server."""

    def __init__(self, content: Iterator[bytes], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.source = content

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # No piece is being read now (a thread's read is waited for, never abandoned);
            # closing cancels the COPY and gives the connection back: I/O, so in a thread.
            close = getattr(self.source, "close", None)
            if close is not None:
                with anyio.CancelScope(shield=True):
                    await run_in_threadpool(close)


@router.get(
    "/export",
    dependencies=[Depends(reject_unknown_params(FILTER_PARAMS | {"format"}))],
    response_class=StreamingResponse,
    responses={200: {"content": {m: {} for m in MEDIA.values()}}},
    description="Every matching offer (same filters as /v1/offers), in offer id order, "
    "streamed. Decimals are exact strings in every format.",
)
def export(
    request: Request,
    response: Response,
    conn: ConnDep,
    listing: ListingDep,
    format: Literal["csv", "jsonl", "parquet"] = "csv",
) -> StreamingResponse:
    cache(response, pinned=listing.as_of)
    engine = get_engine(request)
    filters, compliance, version = listing.filters, listing.compliance, listing.pinned_version
    body: Iterator[bytes]
    if format == "parquet":
        body = _parquet(_rows(engine, filters, compliance, version))
    else:
        body = _text(engine, filters, compliance, version, jsonl=format == "jsonl")
    headers = dict(response.headers)
    headers["Content-Disposition"] = f'attachment; filename="gpuatlas-v{listing.version}.{format}"'
    headers["X-Catalog-Version"] = str(listing.version)
    return ClosingStream(body, media_type=MEDIA[format], headers=headers)
