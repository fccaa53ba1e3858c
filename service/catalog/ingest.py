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

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, select, update

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.prices import CatalogVersion
from schema.records import OfferRecord
from schema.types import utcnow
from service.catalog import diff_listener
from service.catalog.columns import KEY_SEP, Key, join_key
from service.catalog.diff import (
    Current,
    Diff,
    diff_offers,
    implausible,
    load_current,
    price_out_of_band,
    withdrawn,
)
from service.catalog.diff_listener import DiffListener
from service.catalog.fx import FxTable, Rate, check_against_stored, store_rates
from service.catalog.lines import LineIndex, LineRecords, clear_lines, lines_apply, store_lines
from service.catalog.locations import location_targets, refresh
from service.catalog.resolver import Reference, Resolver
from service.catalog.results import (
    AHEAD_MIN_BYTES,
    CrawlResult,
    IngestError,
    IngestResult,
    Payload,
    clip,
    compress_ahead,
)
from service.catalog.runs import INGEST_LOCK_KEY as INGEST_LOCK_KEY
from service.catalog.runs import (
    lock_writer,
    start_crawl_run,
    store_payloads,
    store_rejections,
    store_unmapped,
    stored_payloads,
)
from service.catalog.state import CurrentState, StateHandle
from service.catalog.stream import BATCH_SIZE, Batches, DiffBuffer, expected_records
from service.catalog.unchanged import as_repeated, reference_digest
from service.catalog.validation import StreamValidator
from service.catalog.writer import Writer, ensure_instance_types, ensure_providers
from service.core.config import Settings
from service.core.db import write_cache, writer
from service.core.gcpause import no_gc_pauses

Progress = Callable[[int, bool], None]
"""``on_progress(read, finishing)``: see :func:`ingest`."""
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]


def ingest(
    engine: Engine,
    settings: Settings,
    crawl: CrawlResult,
    *,
    crawl_run_id: int | None = None,
    now: datetime | None = None,
    batch_size: int = BATCH_SIZE,
    on_progress: Progress | None = None,
) -> IngestResult:
    """Apply one crawl of one source to the catalog, atomically.

    ``on_progress(read, finishing)`` is called after each batch is written, with how many
    records (or lines) have been read so far, and once more with ``finishing`` true when
    every batch is written and what is left is the end of the load (rebuilding deferred
    indexes, the crawl run's record).

    The records are read, validated, diffed and written ``batch_size`` at a time (see
    :mod:`~service.catalog.stream`), inside one transaction. The writes go into a
    savepoint: when the whole crawl turns out implausible, or an offer already written
    turns out ambiguous (a later record of it with another price, or invalid), the
    savepoint is rolled back; the crawl run, its payloads and rejections stay. An
    ambiguous offer makes a second pass over the records with every such offer known
    from the start: ``crawl.records`` must be iterable twice (a one-shot iterator is
    kept in memory for it)."""
    on_diff = diff_listener.required()
    if crawl_run_id is None:
        crawl_run_id = start_crawl_run(
            engine, crawl.source, trigger=crawl.trigger, parser_version=crawl.parser_version
        )
    records = crawl.records
    if iter(records) is records:  # a one-shot iterator: kept for a second pass
        records = list(records)
    # The first batches are validated on another thread while this one takes the lock and
    # reads the source's current offers (mostly the database's steps, without the GIL: see
    # service.catalog.diff.load_current). A large payload is compressed on a third (a long
    # zlib call, without the GIL too), and its body written in at the end.
    index = LineIndex() if isinstance(records, LineRecords) else None
    _compress_new(engine, crawl.payloads)  # on a thread of its own, meanwhile
    handle = StateHandle()  # the validator judges keys against the state once it is read
    with no_gc_pauses():
        batches = Batches(crawl.source, records, crawl.rejections, (), batch_size, index, handle)
        try:
            with writer(engine).begin() as conn, write_cache(conn):
                lock_writer(conn)
                # taken under the lock: runs of a source finish in the order they wrote,
                # which is the order an unchanged crawl reads them in (unchanged.py)
                now = now or utcnow()
                digest = reference_digest(conn)  # what an unchanged re-crawl compares
                current = _load_current(conn, crawl, digest, index)
                handle.open(current)
                # a body still being compressed is written in at the end (see store_payloads)
                write_bodies = store_payloads(conn, crawl_run_id, crawl.payloads, bodies_later=True)
                context = _Context(
                    conn,
                    settings,
                    crawl,
                    current,
                    Reference.load(conn),
                    crawl_run_id,
                    now,
                    on_diff,
                    diff_listener.wanted(conn),
                    index is not None and index.refused,
                    on_progress,
                )
                applied = _apply(context, batches)
                if applied is None:  # an offer written turned out ambiguous: again
                    protected = batches.validator.protected
                    current.unmark()
                    batches = Batches(
                        crawl.source,
                        records,
                        crawl.rejections,
                        protected,
                        batch_size,
                        index,
                        handle,
                    )
                    applied = _apply(context, batches)
                    if applied is None:
                        raise IngestError("the crawl's records differ between two readings")
                if on_progress is not None:
                    on_progress(batches.validator.position, True)
                result = _close(context, batches.validator, applied, digest)
                write_bodies()
                return result
        finally:
            batches.close()


def _compress_new(engine: Engine, payloads: list[Payload]) -> None:
    """Start compressing the large payloads the catalog does not hold yet
    (:func:`~service.catalog.results.compress_ahead`): :func:`store_payloads` then takes
    the result instead of compressing on the ingest's own thread."""
    large = [p for p in payloads if p.size >= AHEAD_MIN_BYTES]
    if not large:
        return
    with engine.connect() as conn:
        stored = stored_payloads(conn, {p.sha256 for p in large})
    compress_ahead(p for p in large if p.sha256 not in stored)


def _load_current(
    conn: Connection, crawl: CrawlResult, digest: str, index: LineIndex | None
) -> CurrentState:
    """The source's current state (see load_current); for records read from lines, the
    stored line digests are opened to the reader when they hold (service.catalog.lines):
    otherwise at once, empty, so the lines are read while the state is."""
    source = crawl.source
    if index is None:
        return load_current(conn, source)
    if not lines_apply(conn, source, crawl.parser_version, digest):
        index.refuse()
        return load_current(conn, source)
    current = load_current(conn, source, lines=True)
    index.open(current)
    return current


@dataclass
class _Context:
    conn: Connection
    settings: Settings
    crawl: CrawlResult
    current: CurrentState
    reference: Reference
    run_id: int
    now: datetime
    on_diff: DiffListener
    wants_diff: bool
    relines: bool = False
    """Whether the source's stored line digests are forgotten first (they were recorded
    under another parser version or other reference data)."""
    on_progress: Progress | None = None


@dataclass
class _Applied:
    """One pass over the crawl's batches, written in ``savepoint``."""

    savepoint: Any
    resolver: Resolver
    writer: Writer | None = None
    out_of_band: list[tuple[Key, str]] = field(default_factory=list)
    stated: dict[Key, Any] = field(default_factory=dict)
    buffer: DiffBuffer | None = None
    added: int = 0
    changed: int = 0
    updated: int = 0
    withdrawn: list[Current] = field(default_factory=list)


def _apply(context: _Context, batches: Batches) -> _Applied | None:
    """Diff and write every batch in a savepoint; None (rolled back) when an offer
    written turned out ambiguous, so the crawl must be applied again."""
    conn, crawl, current = context.conn, context.crawl, context.current
    reference = context.reference
    applied = _Applied(
        conn.begin_nested(),
        Resolver(
            Reference(
                reference.gpus, set(reference.providers), reference.regions, reference.cluster
            )
        ),
        buffer=DiffBuffer() if context.wants_diff else None,
    )
    resolver, validator, factor = (
        applied.resolver,
        batches.validator,
        context.settings.max_price_factor,
    )
    targets = location_targets(conn) if ":" not in crawl.source else set()
    if context.relines:
        clear_lines(conn, crawl.source)
    for records, keys, lines, payloads, rows in batches:
        if validator.late:
            continue  # applied again; the rest is read for the offers to leave out
        resolver.trim()
        assert rows is not None  # the validator had the state
        diff = diff_offers(records, keys, rows, current, resolver, lines, targets)
        for old, record, _, _ in diff.changed:
            reason = price_out_of_band(old, record, factor)
            if reason is not None:
                applied.out_of_band.append((_key(record), reason))
        ensure_providers(conn, diff.providers, resolver)
        # each record's payload, by the record (its batch holds them all while it is written)
        by_record = dict(zip(map(id, records), payloads, strict=True)) if payloads else None
        _write(context, applied, diff, by_record)
        store_lines(conn, diff.lines)  # the added offers' are the writer's
        applied.added += len(diff.new) + len(diff.reopened)
        applied.changed += len(diff.changed)
        applied.updated += len(diff.touched)
        if targets:
            stated = applied.stated
            for record, key in zip(records, keys, strict=True):
                if record.region in targets:
                    stated[key] = record.locations
        if context.on_progress is not None:
            context.on_progress(validator.position, False)
    if validator.late:
        _roll_back(applied)
        return None
    if crawl.complete:  # what a complete crawl omits is withdrawn
        applied.withdrawn = withdrawn(current, validator.protected)
    return applied


def _write(
    context: _Context, applied: _Applied, diff: Diff, payloads: dict[int, str | None] | None = None
) -> None:
    """Write one batch's ``diff``; ``payloads``: the sha256 of each record's payload, by
    ``id(record)`` (sound while the batch is held), when the crawl has several."""
    if diff.empty:
        return
    conn = context.conn
    if applied.writer is None:
        version = (conn.execute(select(func.max(VERSION.c.id))).scalar() or 0) + 1
        crawl, current = context.crawl, context.current
        applied.writer = Writer(
            conn,
            FxTable.load(conn),
            context.run_id,
            context.now,
            version,
            crawl,
            lambda: max(0, (expected_records(crawl.records) or 0) - len(current)),
        )
        applied.writer.open_version(context.crawl.source)
    applied.writer.write(context.crawl.source, diff, payloads)
    if applied.buffer is not None:
        applied.buffer.add(diff, applied.writer.observation_rows())


def _roll_back(applied: _Applied) -> None:
    if applied.writer is not None:
        applied.writer.abandon_load()
    applied.savepoint.rollback()


def _close(
    context: _Context, validator: StreamValidator, applied: _Applied, digest: str
) -> IngestResult:
    """Decide (quarantine or not), finish the writes and record the crawl run."""
    conn, crawl, settings = context.conn, context.crawl, context.settings
    protected = validator.protected
    rejections = validator.all_rejections()
    offers = validator.offers
    result = IngestResult(
        crawl_run_id=context.run_id,
        status=CrawlStatus.ok,
        seen=offers,
        rejected=len(rejections),
        rejections=rejections,
        skipped=validator.skipped,
    )
    out_of_band = next((r for key, r in applied.out_of_band if key not in protected), None)
    reason = implausible(conn, settings, crawl.source, offers, out_of_band)
    if reason is not None:
        _roll_back(applied)
        store_rejections(conn, context.run_id, rejections)
        result.status = CrawlStatus.quarantined if offers or context.current else CrawlStatus.failed
        result.reason = reason
        _finish(conn, crawl, result, context.now)
        return result
    resolver = applied.resolver
    _write(context, applied, Diff(withdrawn=applied.withdrawn))
    if applied.writer is not None:
        applied.writer.finish_load()
    applied.savepoint.commit()
    store_rejections(conn, context.run_id, rejections)
    resolver.tally_unmapped()
    result.unmapped = resolver.records_unmapped
    if ":" in crawl.source:  # a peer catalog: its providers' offers of every source
        refresh(conn, validator.providers())
    elif validator.regions & location_targets(conn):
        stated = {
            _key_parts(key): locations
            for key, locations in applied.stated.items()
            if key not in protected
        }
        refresh(conn, {key[0] for key in stated}, source=crawl.source, stated=stated)
    writer_ = applied.writer
    if writer_ is not None:  # before the outbox reads them, the locations are refreshed
        buffer = applied.buffer
        if buffer is not None:
            context.on_diff(conn, writer_.version, buffer.diff, context.now, buffer.observations)
        else:  # nobody wants the changes (no live subscription): withdrawals at most
            context.on_diff(
                conn, writer_.version, Diff(withdrawn=applied.withdrawn), context.now, list
            )
        result.catalog_version = writer_.version
        writer_.close_version(
            added=applied.added,
            changed=applied.changed,
            withdrawn=len(applied.withdrawn),
            updated=applied.updated,
        )
        if writer_.first_new_offer:
            ensure_instance_types(conn, writer_.first_new_offer)
    result.added, result.changed = applied.added, applied.changed
    result.withdrawn, result.updated = len(applied.withdrawn), applied.updated
    store_unmapped(conn, context.run_id, crawl.source, resolver.unmapped)
    digest, names = as_repeated(conn, digest, resolver.unmapped)
    _finish(conn, crawl, result, context.now, reference_digest=digest, unmapped_counts=names)
    return result


def _key(record: OfferRecord) -> Key:
    fields = record.__dict__
    return join_key(
        (fields["provider"], fields["sku"], fields["region"], fields["price_kind"], fields["unit"])
    )


def _key_parts(key: Key) -> tuple[str, str, str, str, str]:
    provider, sku, region, price_kind, unit = key.split(KEY_SEP)
    return provider, sku, region, price_kind, unit


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
            log=clip(_log(crawl, result), 100000),
            **result.counts,
            **extra,
        )
    )


def _log(crawl: CrawlResult, result: IngestResult) -> str | None:
    if not result.skipped:
        return crawl.log
    note = (
        f"{result.skipped} lines as stored with their offers' current state "
        "(same parser version and reference data): not parsed, validated or diffed"
    )
    return "\n".join(filter(None, [note, crawl.log]))


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
