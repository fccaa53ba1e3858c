"""Run one source: fetch (or read saved files) -> pipeline -> ingest, recording the run.

The CLI and the scheduler both call :func:`crawl_source`. Every outcome ends on the
crawl run: ``ok``, ``skipped: no credential``, ``failed: <reason>`` or ``quarantined``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from crawlers import http
from crawlers.base import ApiSource, Context, RawRecord, SourceError
from crawlers.http import (
    CrawlOutput,
    FetchPolicy,
    discard_spooled,
    reparse,
    run_api_source,
    run_from_files,
    source_notes,
)
from crawlers.pipeline import SourceMeta
from crawlers.registry import get_source
from schema.enums import CrawlStatus
from schema.records import OfferRecord
from service.catalog.fx import ImplausibleRates, Rate
from service.catalog.ingest import ingest, ingest_rates
from service.catalog.results import CrawlResult, IngestResult, Payload, Rejection
from service.catalog.runs import finish_crawl_run, start_crawl_run
from service.catalog.unchanged import confirm_unchanged
from service.core.config import Settings
from service.core.gcpause import no_gc_pauses
from service.crawl.records import CrawlRecords


@dataclass
class CrawlReport:
    source: str
    status: CrawlStatus
    reason: str | None = None
    crawl_run_id: int | None = None
    catalog_version: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    records: list[OfferRecord] | CrawlRecords = field(default_factory=list)
    """The valid records: a list for ``--dry-run`` (it prints them); else the crawl's
    :class:`~service.crawl.records.CrawlRecords`, read again when iterated (from payloads
    in memory: a spooled one is gone once the crawl is over)."""
    rejections: list[Rejection] = field(default_factory=list)
    unmapped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    detail: str | None = None
    """What failed, for people, when the source could not be fetched or read (the
    :class:`SourceError`'s message: its reason and what went wrong)."""

    @property
    def label(self) -> str:
        return f"{self.status.value}: {self.reason}" if self.reason else self.status.value


def fetch_policy(settings: Settings) -> FetchPolicy:
    return FetchPolicy(
        user_agent=settings.user_agent,
        timeout=settings.http_timeout_seconds,
        max_retries=settings.http_max_retries,
        backoff_base=settings.http_backoff_seconds,
        max_pages=settings.http_max_pages,
        max_bytes=settings.http_max_bytes,
    )


def source_context(source_cls: type, settings: Settings) -> Context:
    name = source_cls.name  # type: ignore[attr-defined]
    credential_name = getattr(source_cls, "credential", None)
    id_name = getattr(source_cls, "credential_id", None)
    return Context(
        base_url=settings.source_base_urls.get(name, getattr(source_cls, "base_url", "")),
        credential=settings.credential(credential_name) if credential_name else None,
        credential_id=settings.credential(id_name) if id_name else None,
        options={
            n: value
            for n in getattr(source_cls, "credential_options", ())
            if (value := settings.credential(n)) is not None
        },
    )


def missing_credentials(source_cls: type, settings: Settings) -> list[str]:
    """The Settings fields a source needs and lacks (its credential, and the key ID of a
    key pair, and the options an authenticated request needs)."""
    names = [
        getattr(source_cls, "credential", None),
        getattr(source_cls, "credential_id", None),
        *getattr(source_cls, "credential_options", ()),
    ]
    return [n for n in names if n and settings.credential(n) is None]


def fetch_source(
    source_cls: type,
    settings: Settings,
    *,
    from_files: list[Path] | None = None,
    on_page: Callable[[int, int], None] | None = None,
    transport: Any = None,
) -> CrawlOutput:
    """Run a source's fetch+parse (API client in-process, spider in a child process)."""
    ctx = source_context(source_cls, settings)
    if getattr(source_cls, "is_gpuatlas_spider", False):
        from crawlers.scrapy.runner import run_spider  # Scrapy only when a spider runs

        return run_spider(
            source_cls,
            ctx,
            fetch_policy(settings),
            from_files=from_files,
            timeout=settings.crawl_timeout_seconds,
        )
    source: ApiSource = source_cls()
    # The records of an API source are read from its payloads when they are ingested
    # (service.crawl.records): saved files are not even read here, and a network crawl
    # keeps the records it parses for the requests they lead to only while they are few.
    # An FX feed's few rates are kept as parsed.
    lazy = getattr(source_cls, "kind", None) != "fx"
    keep_all = not lazy or getattr(source_cls, "keep_records", False)
    if from_files:
        output = run_from_files(source, ctx, from_files, parse=not lazy)
    else:
        policy = fetch_policy(settings)
        own_cap = getattr(source_cls, "max_bytes", None)
        if own_cap and own_cap > policy.max_bytes:  # e.g. AWS's multi-GB offer files
            policy = replace(policy, max_bytes=own_cap)
        output = run_api_source(
            source,
            ctx,
            policy,
            transport=transport,
            on_page=on_page,
            keep_records=None if keep_all else http.KEEP_RECORDS,
        )
    output.notes.update(source_notes(source))  # what the source left out on purpose
    if lazy and (from_files or output.deferred or len(output.records) < output.parsed):
        restart = not from_files

        def reread() -> Iterator[RawRecord]:
            return reparse(source_cls(), ctx, output, restart=restart)

        output.reread = reread
    return output


def _payloads(output: CrawlOutput) -> list[Payload]:
    return [
        Payload(p.url, p.body, p.fetched_at, p.content_type, p.status_code, path=p.path or p.file)
        for p in output.payloads
    ]


def _log_text(output: CrawlOutput) -> str | None:
    """The crawl run's log: what the source skipped on purpose, then the fetcher's log."""
    parts = []
    if output.notes:
        import orjson

        parts.append(orjson.dumps(output.notes, option=orjson.OPT_SORT_KEYS).decode())
    child_log = getattr(output, "log", None)
    if child_log:
        parts.append(str(child_log))
    return "\n".join(parts) or None


def _cleanup(output: CrawlOutput | None) -> None:
    if output is not None:
        discard_spooled(output)


def parse_records(source_cls: type, output: CrawlOutput) -> CrawlRecords:
    """The crawl's records, read (parsed again, through the pipeline) whenever they are
    iterated: see :mod:`service.crawl.records`. Called once per crawl that is not
    confirmed unchanged."""
    meta = SourceMeta(
        name=source_cls.name,  # type: ignore[attr-defined]
        provider=source_cls.provider,  # type: ignore[attr-defined]
        currency=getattr(source_cls, "currency", None),
        tax_included=getattr(source_cls, "tax_included", None),
    )

    def raws() -> Iterable[RawRecord]:  # the records a spider's child process sent, kept
        return output.reread() if output.reread is not None else output.records

    return CrawlRecords(meta, raws)


def crawl_source(
    engine: Engine | None,
    settings: Settings,
    name: str,
    *,
    from_files: list[Path] | None = None,
    dry_run: bool = False,
    trigger: str = "cli",
    on_page: Callable[[int, int], None] | None = None,
    transport: Any = None,
    crawl_run_id: int | None = None,
    on_ingest: Callable[[int, bool], None] | None = None,
) -> CrawlReport:
    """Crawl one source. With ``dry_run`` nothing touches the database (engine may be None).

    ``on_page(pages, records)`` follows the fetch; ``on_ingest(read, finishing)`` the
    ingest that follows it (see :func:`service.catalog.ingest.ingest`).

    ``crawl_run_id`` continues a run the caller already created (scheduled crawls create
    it in the parent process so a crash of the crawl's own process can still be recorded).
    """
    started = time.monotonic()
    source_cls = get_source(name)
    report = CrawlReport(source=name, status=CrawlStatus.running)
    parser_version = getattr(source_cls, "parser_version", None)
    missing = missing_credentials(source_cls, settings)
    if missing and not from_files:
        report.status, report.reason = CrawlStatus.skipped, "no credential"
        if engine is not None and not dry_run:
            skipped_id = crawl_run_id or start_crawl_run(
                engine, name, trigger=trigger, parser_version=parser_version
            )
            finish_crawl_run(
                engine,
                skipped_id,
                CrawlStatus.skipped,
                "no credential",
                error=f"set {' and '.join(f'GPUATLAS_{m.upper()}' for m in missing)} "
                f"to crawl {name}",
            )
            report.crawl_run_id = skipped_id
        return report
    run_id: int | None = None
    if engine is not None and not dry_run:
        run_id = crawl_run_id or start_crawl_run(
            engine, name, trigger=trigger, parser_version=parser_version
        )
        report.crawl_run_id = run_id
    output: CrawlOutput | None = None
    try:
        output = fetch_source(
            source_cls, settings, from_files=from_files, on_page=on_page, transport=transport
        )
        if getattr(source_cls, "kind", None) == "fx":
            _store_fx(engine, dry_run, name, output, report, run_id)
        else:
            _ingest_output(
                engine, settings, dry_run, source_cls, output, report, run_id, trigger, on_ingest
            )
    except SourceError as exc:
        report.status, report.reason = CrawlStatus.failed, exc.reason
        report.detail = str(exc)
        output = output or getattr(exc, "output", None)  # pages fetched before the failure
        if run_id is not None and engine is not None:
            finish_crawl_run(
                engine,
                run_id,
                CrawlStatus.failed,
                exc.reason,
                error=str(exc),
                log=getattr(exc, "log", None),
                payloads=_payloads(output) if output else (),
                source_urls=output.source_urls if output else (),
            )
    except Exception as exc:
        kind = "database unavailable" if _database_down(exc) else "internal error"
        report.status, report.reason = CrawlStatus.failed, f"{kind}: {type(exc).__name__}"
        if run_id is not None and engine is not None:
            finish_crawl_run(
                engine,
                run_id,
                CrawlStatus.failed,
                report.reason,
                error=traceback.format_exc()[-4000:],
            )
        raise
    finally:
        _cleanup(output)
        report.seconds = time.monotonic() - started
    return report


def _database_down(exc: BaseException) -> bool:
    """The database went away or could not be reached (a cut connection, a server restart,
    a lock not granted in time): not a bug of the crawl, retried at its next run."""
    return isinstance(exc, OperationalError | InterfaceError)


def _ingest_output(
    engine: Engine | None,
    settings: Settings,
    dry_run: bool,
    source_cls: type,
    output: CrawlOutput,
    report: CrawlReport,
    run_id: int | None,
    trigger: str,
    on_ingest: Callable[[int, bool], None] | None = None,
) -> None:
    payloads = _payloads(output)  # each hashed once
    if not dry_run and engine is not None and run_id is not None and output.complete:
        confirmed = confirm_unchanged(
            engine,
            source_cls.name,  # type: ignore[attr-defined]
            run_id,
            payloads,
            output.source_urls,
            getattr(source_cls, "parser_version", None),
            log=_log_text(output),
        )
        if confirmed is not None:  # the last good crawl's payloads, byte for byte
            report.status = confirmed.status
            report.counts = confirmed.counts
            return
    records = parse_records(source_cls, output)
    report.rejections = records.rejections
    if dry_run or engine is None or run_id is None:
        with no_gc_pauses():  # set once read: a payload it cannot read leaves none
            report.records = kept = list(records)  # printed: held
        report.unmapped = records.unmapped
        report.status = CrawlStatus.ok if kept else CrawlStatus.failed
        report.reason = None if kept else "empty result: no valid offers"
        report.counts = {
            "seen": len(kept),
            "rejected": len(records.rejections),
            "unmapped": sum(report.unmapped.values()),
        }
        return
    report.records = records
    records.digests = [payload.sha256 for payload in payloads]
    crawl = CrawlResult(
        source=source_cls.name,  # type: ignore[attr-defined]
        records=records,
        rejections=records.rejections,
        payloads=payloads,
        source_urls=output.source_urls,
        parser_version=source_cls.parser_version,  # type: ignore[attr-defined]
        complete=output.complete,
        trigger=trigger,
        log=_log_text(output),
    )

    def read() -> None:  # the source's own counts are known once its payloads are parsed
        crawl.log = _log_text(output)

    records.after_reading = read
    result: IngestResult = ingest(
        engine, settings, crawl, crawl_run_id=run_id, on_progress=on_ingest
    )
    report.unmapped = records.unmapped
    report.status, report.reason = result.status, result.reason
    report.catalog_version = result.catalog_version
    report.counts = result.counts


def _store_fx(
    engine: Engine | None,
    dry_run: bool,
    name: str,
    output: CrawlOutput,
    report: CrawlReport,
    run_id: int | None,
) -> None:
    rates = [
        Rate(r["rate_date"], r["currency"], Decimal(str(r["per_eur"]))) for r in output.records
    ]
    if not rates:
        raise SourceError("empty result", "no rates in the feed")
    report.counts = {"seen": len(rates)}
    if dry_run or engine is None or run_id is None:
        report.status = CrawlStatus.ok
        return
    try:
        added = ingest_rates(engine, run_id, name, rates, _payloads(output), output.source_urls)
    except ImplausibleRates as exc:
        raise SourceError("implausible rate", str(exc)) from None
    report.status = CrawlStatus.ok
    report.counts["added"] = added
