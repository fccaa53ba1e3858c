"""The catalog (or a filtered part of it) as CSV, JSON Lines or Parquet, streamed."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Literal

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine

from service.api.deps import ConnDep, cache, get_engine, reject_unknown_params
from service.api.params import FILTER_PARAMS, ListingDep
from service.queries import ComplianceSets, OfferFilters, stream_offers

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
    ("first_seen", "first_seen_at"),
    ("last_changed", "last_changed_at"),
    ("catalog_version", "version_from"),
    ("crawl_run_id", "crawl_run_id"),
    ("raw_payload_sha256", "raw_sha256"),
    ("source_url", "source_url"),
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
        if name in ("bare_metal", "price_is_floor")
        else (name, pa.timestamp("us", tz="UTC"))
        if name in ("first_seen", "last_changed")
        else (name, pa.date32())
        if name == "fx_date"
        else (name, pa.string())
        for name in NAMES
    ]
)


def _text(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal | int | str):
        return str(value)
    return value.isoformat()


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError


def _rows(
    engine: Engine, filters: OfferFilters, compliance: ComplianceSets, version: int | None
) -> Iterator[list[dict[str, Any]]]:
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        yield from stream_offers(conn, filters, version=version, compliance=compliance)


def _csv(batches: Iterator[list[dict[str, Any]]]) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(NAMES)
    yield buffer.getvalue().encode()
    for batch in batches:
        buffer.seek(0)
        buffer.truncate()
        writer.writerows([_text(r[column]) for _, column in COLUMNS] for r in batch)
        yield buffer.getvalue().encode()


def _jsonl(batches: Iterator[list[dict[str, Any]]]) -> Iterator[bytes]:
    for batch in batches:
        yield b"".join(
            orjson.dumps(
                {name: r[column] for name, column in COLUMNS},
                default=_json_default,
                option=orjson.OPT_APPEND_NEWLINE,
            )
            for r in batch
        )


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
            if PARQUET_SCHEMA.field(name).type == pa.string():
                values = [None if v is None else str(v) for v in values]
            columns[name] = values
        writer.write_table(pa.table(columns, schema=PARQUET_SCHEMA))
        yield sink.drain()
    writer.close()
    yield sink.drain()


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
    cache(request, response, listing.version, pinned=listing.as_of)
    engine = get_engine(request)
    batches = _rows(engine, listing.filters, listing.compliance, listing.pinned_version)
    body = {"csv": _csv, "jsonl": _jsonl, "parquet": _parquet}[format](batches)
    headers = dict(response.headers)
    headers["Content-Disposition"] = f'attachment; filename="gpuatlas-v{listing.version}.{format}"'
    headers["X-Catalog-Version"] = str(listing.version)
    return StreamingResponse(body, media_type=MEDIA[format], headers=headers)
