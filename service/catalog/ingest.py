"""Crawl result -> catalog version. The only writer of prices.

One call of :func:`ingest` is one transaction: it diffs a source's records against that
source's current offers and writes one new catalog version holding every change (new
offers, changed prices, withdrawn offers), or nothing at all. An implausible crawl is
quarantined with its reason and changes nothing; invalid records are rejected one by
one with a reason, and the rest proceed.

This module runs the steps in order; each lives in a module of its own: records in and
results out (:mod:`~service.catalog.results`), crawl runs (:mod:`~service.catalog.runs`),
validation (:mod:`~service.catalog.validation`), reference lookups
(:mod:`~service.catalog.resolver`), the diff and plausibility check
(:mod:`~service.catalog.diff`) and the bulk writes (:mod:`~service.catalog.writer`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, select, update

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.prices import CatalogVersion
from schema.types import utcnow
from service.catalog import diff_listener
from service.catalog.columns import Key
from service.catalog.diff import diff_offers, implausible, load_current
from service.catalog.diff_listener import DiffListener
from service.catalog.fx import FxTable, Rate, check_against_stored, store_rates
from service.catalog.locations import refresh_after_ingest
from service.catalog.resolver import Reference, Resolver
from service.catalog.results import CrawlResult, IngestResult, Payload, clip
from service.catalog.runs import INGEST_LOCK_KEY as INGEST_LOCK_KEY
from service.catalog.runs import (
    lock_writer,
    start_crawl_run,
    store_payloads,
    store_rejections,
    store_unmapped,
)
from service.catalog.unchanged import reference_digest, unmapped_list
from service.catalog.validation import Validated, validate
from service.catalog.writer import Writer, ensure_instance_types, ensure_providers
from service.core.config import Settings
from service.core.db import writer
from service.core.gcpause import no_gc_pauses

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]


def ingest(
    engine: Engine,
    settings: Settings,
    crawl: CrawlResult,
    *,
    crawl_run_id: int | None = None,
    now: datetime | None = None,
) -> IngestResult:
    """Apply one crawl of one source to the catalog, atomically."""
    on_diff = diff_listener.required()
    if crawl_run_id is None:
        crawl_run_id = start_crawl_run(
            engine, crawl.source, trigger=crawl.trigger, parser_version=crawl.parser_version
        )
    # The crawl is validated on another thread while this one takes the lock, reads the
    # source's current offers and stores the raw payloads: the read is one long database
    # step and the payloads' compression a long zlib call, both without the GIL (see
    # service.catalog.diff.load_current), so the two threads use both cores. Validation
    # touches only the crawl; its errors surface from result(), inside the transaction.
    with no_gc_pauses(), ThreadPoolExecutor(1, "gpuatlas-validate") as pool:
        validating = pool.submit(validate, crawl)
        with writer(engine).begin() as conn:
            lock_writer(conn)
            # taken under the lock: runs of a source finish in the order they wrote, which
            # is the order an unchanged crawl reads them in (service.catalog.unchanged)
            now = now or utcnow()
            current = load_current(conn, crawl.source)
            store_payloads(conn, crawl_run_id, crawl.payloads)
            validated = validating.result()
            return _apply(conn, settings, crawl, validated, current, crawl_run_id, now, on_diff)


def _apply(
    conn: Connection,
    settings: Settings,
    crawl: CrawlResult,
    validated: Validated,
    current: dict[Key, str],
    run_id: int,
    now: datetime,
    on_diff: DiffListener,
) -> IngestResult:
    records = validated.records
    result = IngestResult(
        crawl_run_id=run_id,
        status=CrawlStatus.ok,
        seen=len(records),
        rejected=len(validated.rejections),
        rejections=validated.rejections,
    )
    store_rejections(conn, run_id, validated.rejections)
    resolver = Resolver(Reference.load(conn))
    digest = reference_digest(conn)  # what an unchanged re-crawl compares (unchanged.py)
    diff = diff_offers(
        records,
        validated.keys,
        current,
        resolver,
        validated.protected if crawl.complete else None,
    )

    reason = implausible(conn, settings, crawl.source, records, diff)
    if reason is not None:
        result.status = CrawlStatus.quarantined if records or current else CrawlStatus.failed
        result.reason = reason
        _finish(conn, crawl, result, now)
        return result

    resolver.tally_unmapped()
    result.unmapped = resolver.records_unmapped
    ensure_providers(conn, diff.providers, resolver)
    if not diff.empty:
        version = (conn.execute(select(func.max(VERSION.c.id))).scalar() or 0) + 1
        writer_ = Writer(conn, FxTable.load(conn), run_id, now, version, crawl)
        writer_.write(crawl.source, diff)
        # before the outbox reads them
        refresh_after_ingest(conn, crawl.source, records, validated.regions)
        on_diff(conn, version, diff, now, writer_.observation_rows)
        result.catalog_version = version
        if diff.new:
            ensure_instance_types(conn, writer_.first_new_offer)
    else:  # no price changed; a source's locations (live capacity) may have
        refresh_after_ingest(conn, crawl.source, records, validated.regions)
    result.added = len(diff.new) + len(diff.reopened)
    result.changed, result.withdrawn = len(diff.changed), len(diff.withdrawn)
    result.updated = len(diff.touched)
    store_unmapped(conn, run_id, crawl.source, resolver.unmapped)
    _finish(
        conn,
        crawl,
        result,
        now,
        reference_digest=digest,
        unmapped_counts=unmapped_list(resolver.unmapped),
    )
    return result


def _finish(
    conn: Connection, crawl: CrawlResult, result: IngestResult, now: datetime, **extra: Any
) -> None:
    conn.execute(
        update(RUN)
        .where(RUN.c.id == result.crawl_run_id)
        .values(
            status=result.status.value,
            reason=clip(result.reason, 200),
            finished_at=now,
            catalog_version=result.catalog_version,
            source_urls=list(crawl.source_urls),
            log=clip(crawl.log, 100000),
            **result.counts,
            **extra,
        )
    )


def ingest_rates(
    engine: Engine,
    run_id: int,
    source: str,
    rates: list[Rate],
    payloads: list[Payload],
    source_urls: list[str],
) -> int:
    """Store an FX feed's rates with their payloads and close its crawl run, atomically."""
    with writer(engine).begin() as conn:
        check_against_stored(conn, rates)  # before anything is written
        store_payloads(conn, run_id, payloads)
        added = store_rates(conn, rates, source, run_id)
        conn.execute(
            update(RUN)
            .where(RUN.c.id == run_id)
            .values(
                status=CrawlStatus.ok.value,
                finished_at=utcnow(),
                seen=len(rates),
                added=added,
                source_urls=list(source_urls),
            )
        )
    return added
