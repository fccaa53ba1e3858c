"""OfferRecords as JSON Lines: read a file (bad lines rejected, never fatal) and ingest it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine

from schema.enums import CrawlStatus
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult, IngestResult, Payload, Rejection
from service.catalog.runs import finish_crawl_run, start_crawl_run
from service.catalog.unchanged import confirm_unchanged
from service.core.config import Settings
from service.core.gcpause import no_gc_pauses

MAX_LINE_BYTES = 1 << 20


def read_jsonl(path: Path, source: str) -> tuple[list[Any], list[Rejection]]:
    """Each line's object (``source`` filled in when absent) and one rejection per bad line."""
    records: list[Any] = []
    rejections: list[Rejection] = []
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            position = number - 1
            if len(line) > MAX_LINE_BYTES:
                rejections.append(
                    Rejection(position, f"line {number}: longer than {MAX_LINE_BYTES} bytes")
                )
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                rejections.append(Rejection(position, f"line {number}: invalid JSON ({exc})"))
                continue
            if isinstance(value, dict):
                value.setdefault("source", source)
            records.append(value)
    return records, rejections


def ingest_jsonl(
    engine: Engine,
    settings: Settings,
    path: Path,
    source: str | None = None,
    *,
    complete: bool = True,
    trigger: str = "cli:ingest",
) -> IngestResult:
    """Ingest a JSON Lines file as one crawl of ``source`` (default: the file's stem).

    The file is the crawl's one payload: when it is byte-identical to the last good
    crawl's of ``source`` (same path too) and the reference data is the same, the run is
    confirmed without reading the records (see :mod:`~service.catalog.unchanged`)."""
    source = source or path.stem
    url = path.resolve().as_uri()
    payload = Payload(url, None, datetime.now(UTC), "application/jsonl", path=path)
    run_id = start_crawl_run(engine, source, trigger=trigger)
    if complete:
        confirmed = confirm_unchanged(engine, source, run_id, [payload], [url], None)
        if confirmed is not None:
            return confirmed
    try:
        with no_gc_pauses():  # a large file's objects live until the ingest ends
            records, rejections = read_jsonl(path, source)
    except OSError as exc:
        finish_crawl_run(engine, run_id, CrawlStatus.failed, "unreadable file", error=str(exc))
        raise
    return ingest(
        engine,
        settings,
        CrawlResult(
            source=source,
            records=records,
            rejections=rejections,
            payloads=[payload],
            source_urls=[url],
            complete=complete,
            trigger=trigger,
        ),
        crawl_run_id=run_id,
    )
