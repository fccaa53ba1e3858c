"""Crawl result -> catalog version. The only writer of prices.

One call of :func:`ingest` is one transaction: it diffs a source's records against that
source's current offers and writes one new catalog version holding every change (new
offers, changed prices, withdrawn offers), or nothing at all. An implausible crawl is
quarantined with its reason and changes nothing; invalid records are rejected one by
one with a reason, and the rest proceed.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import cached_property
from operator import itemgetter
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Engine, func, insert, select, text, update

from schema.catalog import InstanceType, Provider, Region
from schema.crawl import CrawlRun, CrawlRunPayload, RawPayload, RejectedRecord, UnmappedName
from schema.enums import CrawlStatus, OfferStatus, PricePer, UnmappedKind
from schema.gpu_names import GpuNameIndex
from schema.prices import CatalogVersion, Offer, PriceObservation, sort_key_e10
from schema.records import OfferRecord, describe_validation_error
from schema.types import decimal_to_text, utcnow
from service.alerts.outbox import enqueue_for_diff
from service.catalog.bulk import (
    bulk_binder,
    bulk_insert,
    bulk_update,
    indexes_deferred,
    indexes_worth_rebuilding,
    sqlite_literal,
    staged,
)
from service.catalog.fx import FxTable, Rate, check_against_stored, store_rates
from service.catalog.gpu_catalog import gpu_name_index
from service.catalog.locations import refresh_after_ingest
from service.catalog.refcheck import Load, foreign_keys_checked_per_load
from service.catalog.run_owner import close_dead_runs, this_owner
from service.core.config import Settings
from service.core.db import writer
from service.core.gcpause import no_gc_pauses
from service.core.units import gpu_hourly, instance_hourly, q

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
PAYLOAD = RawPayload.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]
PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
SKU = InstanceType.__table__  # type: ignore[attr-defined]

MAX_STORED_REJECTIONS = 1000
MAX_STORED_FIELD = 500
CHUNK = 5000
INGEST_LOCK_KEY = 0x67707561  # "gpua": one catalog, one writer at a time (PostgreSQL)

# Offer columns that describe the SKU; a change of these alone updates the row in place.
ATTRIBUTES = (
    "price_per",
    "gpu_slug",
    "gpu_inferred",
    "gpu_name_raw",
    "gpu_count",
    "gpu_memory_gb",
    "vcpus",
    "memory_gb",
    "country",
    "bare_metal",
    "price_floor",
    "source_url",
)

Key = str
"""An offer's identity within its source: provider, SKU, region, price kind and unit
joined by KEY_SEP (validated text never holds control characters)."""
KEY_SEP = "\x1f"
_join_key = KEY_SEP.join


@dataclass
class Payload:
    """A raw response body as fetched, kept compressed and content-addressed.

    Large bodies stay on disk (``path``): they are hashed and compressed in chunks."""

    url: str
    body: bytes | None
    fetched_at: datetime
    content_type: str | None = None
    status_code: int | None = None
    path: Path | None = None
    _digest: str | None = field(default=None, repr=False)

    def chunks(self) -> Iterator[bytes]:
        if self.path is not None:
            with self.path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    yield chunk
        elif self.body:
            yield self.body

    @property
    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None else len(self.body or b"")

    @property
    def sha256(self) -> str:
        if self._digest is None:
            digest = hashlib.sha256()
            for chunk in self.chunks():
                digest.update(chunk)
            self._digest = digest.hexdigest()
        return self._digest

    def compressed(self) -> bytes:
        compressor = zlib.compressobj(6)
        parts = [compressor.compress(chunk) for chunk in self.chunks()]
        parts.append(compressor.flush())
        return b"".join(parts)


@dataclass
class Rejection:
    position: int
    reason: str
    record: Mapping[str, Any] | None = None


@dataclass
class CrawlResult:
    """What a crawl hands to ingest: records (validated or raw) plus their provenance."""

    source: str
    records: Iterable[OfferRecord | Mapping[str, Any]]
    rejections: list[Rejection] = field(default_factory=list)
    payloads: list[Payload] = field(default_factory=list)
    source_urls: list[str] = field(default_factory=list)
    parser_version: str | None = None
    complete: bool = True
    """False when the crawl may have missed offers: then nothing is withdrawn."""
    trigger: str = "cli"
    log: str | None = None
    record_payloads: dict[int, str] = field(default_factory=dict)
    """id(record) -> sha256 of the payload it was parsed from (multi-payload crawls)."""


@dataclass
class IngestResult:
    crawl_run_id: int
    status: CrawlStatus
    reason: str | None = None
    catalog_version: int | None = None
    seen: int = 0
    added: int = 0
    changed: int = 0
    withdrawn: int = 0
    updated: int = 0
    rejected: int = 0
    unmapped: int = 0
    rejections: list[Rejection] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {
            "seen": self.seen,
            "added": self.added,
            "changed": self.changed,
            "withdrawn": self.withdrawn,
            "updated": self.updated,
            "rejected": self.rejected,
            "unmapped": self.unmapped,
        }


class IngestError(Exception):
    """The ingest could not run at all (e.g. database unreachable)."""


# --------------------------------------------------------------------------- crawl runs


def start_crawl_run(
    engine: Engine, source: str, *, trigger: str = "cli", parser_version: str | None = None
) -> int:
    """Record that a crawl of ``source`` began; returns the crawl run id.

    The run records its owner (this process, see :mod:`service.catalog.run_owner`). Earlier runs of
    the source left 'running' by a dead process are closed as ``failed: interrupted``
    first, so every run ends with a status and a reason."""
    now = utcnow()
    with writer(engine).begin() as conn:
        close_dead_runs(conn, now, source)
        result = conn.execute(
            insert(RUN).values(
                source=source,
                trigger=trigger,
                started_at=utcnow(),
                status=CrawlStatus.running.value,
                parser_version=parser_version,
                owner=this_owner(),
                source_urls=[],
                seen=0,
                added=0,
                changed=0,
                withdrawn=0,
                updated=0,
                rejected=0,
                unmapped=0,
            )
        )
        run_id = result.inserted_primary_key[0] if result.inserted_primary_key else None
    if run_id is None:
        raise IngestError("could not create a crawl run")
    return int(run_id)


def finish_crawl_run(
    engine: Engine,
    run_id: int,
    status: CrawlStatus,
    reason: str | None,
    *,
    error: str | None = None,
    log: str | None = None,
    payloads: Iterable[Payload] = (),
    source_urls: Iterable[str] = (),
) -> None:
    """Close a crawl run that did not reach ingest (skipped, failed before parsing...)."""
    with writer(engine).begin() as conn:
        _store_payloads(conn, run_id, list(payloads))
        conn.execute(
            update(RUN)
            .where(RUN.c.id == run_id)
            .values(
                status=status.value,
                reason=_clip(reason, 200),
                error=_clip(error, 4000),
                log=_clip(log, 100000),
                finished_at=utcnow(),
                source_urls=list(source_urls),
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
        _store_payloads(conn, run_id, payloads)
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


def _clip(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


# --------------------------------------------------------------------------- validation


def _safe_excerpt(record: Any) -> dict[str, Any] | None:
    """A JSON-safe, size-bounded copy of a rejected input, so nothing is lost for review."""
    if isinstance(record, OfferRecord):
        record = record.model_dump(mode="json")
    if not isinstance(record, Mapping):
        return {"value": _clip(repr(record), MAX_STORED_FIELD)}
    excerpt: dict[str, Any] = {}
    for index, (key, value) in enumerate(record.items()):
        if index >= 50:
            excerpt["…"] = f"{len(record) - 50} more fields"
            break
        name = _clip(str(key), 100) or ""
        if value is None or isinstance(value, bool | int):
            excerpt[name] = value
        else:
            excerpt[name] = _clip(str(value).replace("\x00", "\\x00"), MAX_STORED_FIELD)
    return excerpt


@dataclass
class _Validated:
    records: list[OfferRecord]
    keys: list[Key]
    """The identity of each record, in ``records`` order (computed once)."""
    rejections: list[Rejection]
    protected: set[Key]
    """Keys of offers whose record this crawl rejected: they must not be withdrawn."""
    regions: set[str] = field(default_factory=set)
    """The records' region codes (whether any offer needs locations: see
    service.catalog.locations)."""


def _validate(crawl: CrawlResult) -> _Validated:
    records: list[OfferRecord] = []
    keys: list[Key] = []
    rejections = list(crawl.rejections)
    protected: set[Key] = set()
    for rejection in crawl.rejections:  # rejected upstream (pipeline): never withdraw those
        key = _loose_key(rejection.record, crawl.source)
        if key:
            protected.add(key)
    source = crawl.source
    seen: dict[Key, Decimal] = {}
    join = _join_key
    regions: set[str] = set()
    add_region = regions.add
    for position, item in enumerate(crawl.records):
        if type(item) is OfferRecord:
            record = item
        else:
            try:
                record = item if isinstance(item, OfferRecord) else OfferRecord.model_validate(item)
            except ValidationError as exc:
                rejections.append(
                    Rejection(position, describe_validation_error(exc), _safe_excerpt(item))
                )
                key = _loose_key(item, source)
                if key:
                    protected.add(key)
                continue
        fields = record.__dict__
        if fields["source"] != source:
            rejections.append(
                Rejection(
                    position,
                    f"source: record says {record.source!r}, crawl is {source!r}",
                    _safe_excerpt(record),
                )
            )
            continue
        add_region(fields["region"])
        key = join(
            (
                fields["provider"],
                fields["sku"],
                fields["region"],
                fields["price_kind"],
                fields["unit"],
            )
        )
        if key in seen:
            if seen[key] != fields["amount"]:
                rejections.append(
                    Rejection(
                        position, "duplicate offer with a different price", _safe_excerpt(record)
                    )
                )
                protected.add(key)
            continue
        seen[key] = fields["amount"]
        records.append(record)
        keys.append(key)
    # An offer reported twice with two prices is ambiguous: keep neither price.
    if protected:
        kept = [(r, k) for r, k in zip(records, keys, strict=True) if k not in protected]
        records, keys = [r for r, _ in kept], [k for _, k in kept]
    return _Validated(records, keys, rejections, protected, regions)


def _loose_key(item: Any, source: str) -> Key | None:
    """The offer identity of an invalid record, when its identity fields are readable."""
    if not isinstance(item, Mapping):
        return None
    try:
        parts = [str(item[name]) for name in ("provider", "sku", "region", "price_kind", "unit")]
    except KeyError:
        return None
    if str(item.get("source", source)) != source:
        return None
    return _join_key(parts)


# --------------------------------------------------------------------------- storage


def _store_payloads(conn: Connection, run_id: int, payloads: list[Payload]) -> None:
    if not payloads:
        return
    by_hash = {p.sha256: p for p in payloads}
    existing = set(
        conn.execute(select(PAYLOAD.c.sha256).where(PAYLOAD.c.sha256.in_(list(by_hash)))).scalars()
    )
    now = utcnow()
    new = [
        {
            "sha256": sha,
            "size": p.size,
            "compressed": p.compressed(),
            "content_type": _clip(p.content_type, 200),
            "first_seen_at": now,
        }
        for sha, p in by_hash.items()
        if sha not in existing
    ]
    if new:
        conn.execute(insert(PAYLOAD), new)
    conn.execute(
        insert(RUN_PAYLOAD),
        [
            {
                "crawl_run_id": run_id,
                "sha256": p.sha256,
                "url": _clip(p.url, 2048) or "",
                "status_code": p.status_code,
                "fetched_at": p.fetched_at,
            }
            for p in payloads
        ],
    )


def _store_rejections(conn: Connection, run_id: int, rejections: list[Rejection]) -> None:
    rows = [
        {
            "crawl_run_id": run_id,
            "position": r.position,
            "reason": _clip(r.reason, 1000) or "",
            "record": _safe_excerpt(r.record) if r.record is not None else None,
        }
        for r in rejections[:MAX_STORED_REJECTIONS]
    ]
    if rows:
        conn.execute(insert(REJECTED), rows)


def _store_unmapped(
    conn: Connection, run_id: int, source: str, names: Counter[tuple[str, str]]
) -> None:
    now = utcnow()
    for (kind, value), count in names.items():
        value = _clip(value, 200) or ""
        updated = conn.execute(
            update(UNMAPPED)
            .where(UNMAPPED.c.kind == kind, UNMAPPED.c.source == source, UNMAPPED.c.value == value)
            .values(
                occurrences=UNMAPPED.c.occurrences + count,
                last_seen_at=now,
                last_crawl_run_id=run_id,
            )
        )
        if not updated.rowcount:
            conn.execute(
                insert(UNMAPPED).values(
                    kind=kind,
                    source=source,
                    value=value,
                    occurrences=count,
                    first_seen_at=now,
                    last_seen_at=now,
                    last_crawl_run_id=run_id,
                )
            )


def _lock(conn: Connection) -> None:
    """Serialize catalog writers. SQLite: the transaction is already BEGIN IMMEDIATE."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": INGEST_LOCK_KEY})


# --------------------------------------------------------------------------- reference lookups


@dataclass
class _Reference:
    gpus: GpuNameIndex
    providers: set[str]
    regions: dict[tuple[str, str], str]

    @classmethod
    def load(cls, conn: Connection) -> _Reference:
        region_rows = conn.execute(select(REGION.c.provider, REGION.c.code, REGION.c.country))
        return cls(
            gpus=gpu_name_index(conn),
            providers=set(conn.execute(select(PROVIDER.c.slug)).scalars()),
            regions={(provider, code): country for provider, code, country in region_rows},
        )


ATTRIBUTE_SEP = "\x1f"
ACTIVE, WITHDRAWN = OfferStatus.active.value, OfferStatus.withdrawn.value
GPU_NAME, REGION_NAME = UnmappedKind.gpu.value, UnmappedKind.region.value
GLOBAL_REGIONS = frozenset({"global"})
"""Region code of a price that is the same everywhere the provider operates."""


class _Resolver:
    """GPU slug and country of each record from reference data, with per-name caches;
    counts every unmapped name (invariant 6: unknown is recorded, never dropped)."""

    def __init__(self, reference: _Reference) -> None:
        self.reference = reference
        self.unmapped: Counter[tuple[str, str]] = Counter()
        """(kind, name) -> how many records named it (see :meth:`tally_unmapped`)."""
        self.records_unmapped = 0
        self._misses: dict[tuple[tuple[str | None, str | None] | None, Any], int] = {}
        """(unmapped GPU names, unmapped provider/region) -> records: one dict increment
        per unmapped record, expanded into :attr:`unmapped` once, at the end."""
        self._gpu: dict[tuple[str | None, str | None, Decimal | None], tuple[str | None, bool]] = {}
        self.digests: dict[tuple[Any, ...], str] = {}
        """Fingerprint memo: attributes -> their digest. Exact: equal attributes have the
        same text (decimals are hashed in canonical form), and offers of one SKU share
        them, so a crawl hashes each SKU once."""

    def attributes(self, fields: Mapping[str, Any]) -> tuple[Any, ...]:
        """A record's SKU attributes (``fields`` is its ``__dict__``), in ATTRIBUTES order,
        resolved."""
        gpu_key = (fields["gpu_model"], fields["gpu_name_raw"], fields["gpu_memory_gb"])
        gpu = self._gpu.get(gpu_key)
        if gpu is None:
            gpu = self._gpu[gpu_key] = self._resolve_gpu(*gpu_key)
        gpu_slug, gpu_inferred = gpu
        country = fields["country"]
        region_country = self.reference.regions.get((fields["provider"], fields["region"]))
        if region_country is None and (country or fields["region"] in GLOBAL_REGIONS):
            region_country = ""  # known: the record says where, or the price is global
        if gpu_slug is None or region_country is None:
            self._count_unmapped(fields, gpu_slug, region_country)
        return (
            fields["price_per"],
            gpu_slug,
            gpu_inferred,
            fields["gpu_name_raw"],
            fields["gpu_count"],
            fields["gpu_memory_gb"],
            fields["vcpus"],
            fields["memory_gb"],
            country or region_country or None,
            fields["bare_metal"],
            fields["price_floor"],
            fields["source_url"],
        )

    def digest(self, attributes: tuple[Any, ...]) -> str:
        """:func:`fingerprint` of attributes not hashed yet, kept in :attr:`digests`."""
        digest = self.digests[attributes] = fingerprint(attributes)
        return digest

    def _count_unmapped(
        self, fields: Mapping[str, Any], gpu_slug: Any, region_country: str | None
    ) -> None:
        miss = (
            (fields["gpu_model"], fields["gpu_name_raw"]) if gpu_slug is None else None,
            (fields["provider"], fields["region"]) if region_country is None else None,
        )
        self._misses[miss] = self._misses.get(miss, 0) + 1

    def tally_unmapped(self) -> None:
        """Add the unmapped names counted so far to :attr:`unmapped` and
        :attr:`records_unmapped`."""
        for (gpu, region), records in self._misses.items():
            self.records_unmapped += records
            if gpu is not None:
                self.unmapped[(GPU_NAME, gpu[0] or gpu[1] or "")] += records
            if region is not None:
                self.unmapped[(REGION_NAME, "/".join(region))] += records
        self._misses.clear()

    def _resolve_gpu(
        self, gpu_model: str | None, gpu_name_raw: str | None, memory_gb: Decimal | None
    ) -> tuple[str | None, bool]:
        """(slug, inferred): a source's own slug if the catalog has it, else the raw name
        read by the parser (see schema.gpu_names)."""
        gpus = self.reference.gpus
        if gpu_model is not None:
            return (gpu_model, False) if gpu_model in gpus.slugs else (None, False)
        found = gpus.resolve(gpu_name_raw, memory_gb) if gpu_name_raw else None
        return (found.slug, found.inferred) if found is not None else (None, False)


def fingerprint(attributes: tuple[Any, ...]) -> str:
    """A short digest of an offer's SKU attributes, compared instead of 11 columns.

    It is computed from records only (never from stored values), from a text form that
    is the same for equal values: decimals in canonical form (``8.0`` and ``8`` are one
    value and are stored alike), ``str`` of None, bools and strings."""
    return _digest(ATTRIBUTE_SEP.join(map(_attribute_text, attributes)))


def _attribute_text(value: Any) -> str:
    return decimal_to_text(value) if isinstance(value, Decimal) else str(value)


def _digest(joined: str) -> str:
    return hashlib.blake2b(joined.encode(), digest_size=8).hexdigest()


# --------------------------------------------------------------------------- the ingest


def ingest(
    engine: Engine,
    settings: Settings,
    crawl: CrawlResult,
    *,
    crawl_run_id: int | None = None,
    now: datetime | None = None,
) -> IngestResult:
    """Apply one crawl of one source to the catalog, atomically."""
    if crawl_run_id is None:
        crawl_run_id = start_crawl_run(
            engine, crawl.source, trigger=crawl.trigger, parser_version=crawl.parser_version
        )
    now = now or utcnow()
    # The crawl is validated on another thread while this one takes the lock, reads the
    # source's current offers and stores the raw payloads: the read is one long database
    # step and the payloads' compression a long zlib call, both without the GIL (see
    # _load_current), so the two threads use both cores. Validation touches only the
    # crawl; its errors surface from result(), inside the transaction.
    with no_gc_pauses(), ThreadPoolExecutor(1, "gpuatlas-validate") as pool:
        validating = pool.submit(_validate, crawl)
        with writer(engine).begin() as conn:
            _lock(conn)
            current = _load_current(conn, crawl.source)
            _store_payloads(conn, crawl_run_id, crawl.payloads)
            validated = validating.result()
            return _apply(conn, settings, crawl, validated, current, crawl_run_id, now)


@dataclass(slots=True)
class _Current:
    provider: str
    id: int
    amount: Decimal
    currency: str
    status: str
    observation_id: int
    fingerprint: str | None

    @classmethod
    def parse(cls, key: Key, state: str) -> _Current:
        """An offer's current state from its :func:`_load_current` text."""
        amount, currency, digest, status, offer_id, observation_id = state.split(STATE_SEP)
        return cls(
            key.partition(KEY_SEP)[0],
            int(offer_id),
            Decimal(amount),
            currency,
            status,
            int(observation_id),
            digest or None,
        )


STATE_SEP = "\x1f"


@dataclass
class _Diff:
    new: list[tuple[Key, OfferRecord, tuple[Any, ...], str]] = field(default_factory=list)
    """The added offers with their identity keys, in the crawl's order (see
    :attr:`in_key_order`)."""
    providers: set[str] = field(default_factory=set)
    """The providers of the added offers."""
    changed: list[tuple[_Current, OfferRecord, tuple[Any, ...], str]] = field(default_factory=list)
    reopened: list[tuple[_Current, OfferRecord, tuple[Any, ...], str]] = field(default_factory=list)
    touched: list[tuple[_Current, tuple[Any, ...], str]] = field(default_factory=list)
    withdrawn: list[_Current] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.reopened or self.touched or self.withdrawn)

    @cached_property
    def in_key_order(self) -> list[tuple[Key, OfferRecord, tuple[Any, ...], str]]:
        """:attr:`new` in identity key order, the order of their offer ids (keys are
        unique, so the order is total)."""
        return sorted(self.new, key=_first)

    @cached_property
    def added(self) -> list[tuple[OfferRecord, tuple[Any, ...], str]]:
        """The added offers (record, attributes, fingerprint), in key order; built only
        when read (by the outbox, when some subscription is live)."""
        return [(record, attributes, digest) for _, record, attributes, digest in self.in_key_order]


def _apply(
    conn: Connection,
    settings: Settings,
    crawl: CrawlResult,
    validated: _Validated,
    current: dict[Key, str],
    run_id: int,
    now: datetime,
) -> IngestResult:
    records = validated.records
    result = IngestResult(
        crawl_run_id=run_id,
        status=CrawlStatus.ok,
        seen=len(records),
        rejected=len(validated.rejections),
        rejections=validated.rejections,
    )
    _store_rejections(conn, run_id, validated.rejections)
    resolver = _Resolver(_Reference.load(conn))
    diff = _diff(
        records,
        validated.keys,
        current,
        resolver,
        validated.protected if crawl.complete else None,
    )

    reason = _implausible(conn, settings, crawl.source, records, diff)
    if reason is not None:
        result.status = CrawlStatus.quarantined if records or current else CrawlStatus.failed
        result.reason = reason
        _finish(conn, crawl, result, now)
        return result

    resolver.tally_unmapped()
    result.unmapped = resolver.records_unmapped
    _ensure_providers(conn, diff.providers, resolver)
    if not diff.empty:
        version = (conn.execute(select(func.max(VERSION.c.id))).scalar() or 0) + 1
        writer_ = _Writer(conn, FxTable.load(conn), run_id, now, version, crawl)
        writer_.write(crawl.source, diff)
        # before the outbox reads them
        refresh_after_ingest(conn, crawl.source, records, validated.regions)
        enqueue_for_diff(conn, version, diff, now, writer_.observation_rows)
        result.catalog_version = version
        if diff.new:
            _ensure_instance_types(conn, writer_.first_new_offer)
    else:  # no price changed; a source's locations (live capacity) may have
        refresh_after_ingest(conn, crawl.source, records, validated.regions)
    result.added = len(diff.new) + len(diff.reopened)
    result.changed, result.withdrawn = len(diff.changed), len(diff.withdrawn)
    result.updated = len(diff.touched)
    _store_unmapped(conn, run_id, crawl.source, resolver.unmapped)
    _finish(conn, crawl, result, now)
    return result


def _diff(
    records: list[OfferRecord],
    keys: list[Key],
    current: dict[Key, str],
    resolver: _Resolver,
    protected: set[Key] | None,
) -> _Diff:
    """Compare the crawl with the source's current offers; pure, writes nothing.

    The hot path is an unchanged offer: its expected state text (canonical amount,
    currency, attributes fingerprint, active) is compared with the stored one, and
    nothing else is built for it."""
    diff = _Diff()
    added, new_provider = diff.new, diff.providers.add
    attributes_of, digests, digest_of = resolver.attributes, resolver.digests, resolver.digest
    state_of, amount_text = current.get, decimal_to_text
    active_suffix = f"{STATE_SEP}{ACTIVE}{STATE_SEP}"
    for record, key in zip(records, keys, strict=True):
        fields = record.__dict__
        attributes = attributes_of(fields)
        digest = digests.get(attributes) or digest_of(attributes)  # memoized fingerprint
        state = state_of(key)
        if state is None:
            added.append((key, record, attributes, digest))
            new_provider(fields["provider"])
            continue
        if state.startswith(
            f"{amount_text(fields['amount'])}{STATE_SEP}{fields['currency']}{STATE_SEP}"
            f"{digest}{active_suffix}"
        ):
            continue  # unchanged: the common case of a re-crawl
        old = _Current.parse(key, state)
        if old.status != ACTIVE:
            diff.reopened.append((old, record, attributes, digest))
        elif old.amount != fields["amount"] or old.currency != fields["currency"]:
            diff.changed.append((old, record, attributes, digest))
        elif old.fingerprint != digest:
            diff.touched.append((old, attributes, digest))
    if protected is not None:  # a complete crawl: what it omits is withdrawn
        omitted = current.keys() - set(keys) - protected
        withdrawn = [
            _Current.parse(key, current[key])
            for key in omitted
            if active_suffix in current[key]  # only the status field can hold "active"
        ]
        diff.withdrawn = sorted((o for o in withdrawn if o.status == ACTIVE), key=_offer_id)
    return diff


_first: Callable[[tuple[Key, Any, Any, Any]], Key] = itemgetter(0)


def _offer_id(offer: _Current) -> int:
    return offer.id


def _finish(conn: Connection, crawl: CrawlResult, result: IngestResult, now: datetime) -> None:
    conn.execute(
        update(RUN)
        .where(RUN.c.id == result.crawl_run_id)
        .values(
            status=result.status.value,
            reason=_clip(result.reason, 200),
            finished_at=now,
            catalog_version=result.catalog_version,
            source_urls=list(crawl.source_urls),
            log=_clip(crawl.log, 100000),
            **result.counts,
        )
    )


def _load_current(conn: Connection, source: str) -> dict[Key, str]:
    """The source's offers: identity key -> state text (canonical amount, currency,
    fingerprint, status, offer id, observation id).

    The hot path of every re-crawl (hundreds of thousands of offers). The database
    assembles each offer's key and state and aggregates them into one text per window of
    :data:`STATE_WINDOW` ids, which Python splits in C: no row objects, no per-row
    conversion, and the one long step runs without the GIL, so the crawl's validation
    proceeds on the other core meanwhile (see :func:`ingest`). Keys and states never hold
    the separators: validated text holds no control characters."""
    key_parts = ("provider", "sku", "region", "price_kind", "unit")
    if conn.dialect.name == "postgresql":
        marker = "%s"
        key = " || chr(31) || ".join(key_parts)
        state = " || chr(31) || ".join(
            (
                "trim_scale(amount)::text",
                "currency",
                "coalesce(fingerprint, '')",
                "status",
                "id::text",
                "observation_id::text",
            )
        )
        aggregate = f"string_agg({key} || chr(30) || {state}, chr(30))"
    else:  # one printf per offer: faster than chained || in SQLite (NULL -> '')
        marker = "?"
        state_parts = ("amount", "currency", "fingerprint", "status", "id", "observation_id")
        template = KEY_SEP.join(["%s"] * 5) + RECORD_SEP + STATE_SEP.join(["%s"] * 6)
        aggregate = (
            f"group_concat(printf('{template}', {', '.join((*key_parts, *state_parts))}), char(30))"
        )
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    current: dict[Key, str] = {}
    try:
        cursor.execute("SELECT max(id) FROM offer")
        last = cursor.fetchone()[0] or 0
        for low in range(1, last + 1, STATE_WINDOW):
            cursor.execute(
                f"SELECT {aggregate} FROM offer "
                f"WHERE source = {marker} AND id >= {marker} AND id < {marker}",
                (source, low, low + STATE_WINDOW),
            )
            text_ = cursor.fetchone()[0]
            if text_:
                parts = text_.split(RECORD_SEP)
                current.update(zip(parts[::2], parts[1::2], strict=True))
        return current
    finally:
        cursor.close()


RECORD_SEP = "\x1e"
"""Between an offer's key and state, and between offers, in :func:`_load_current`."""
STATE_WINDOW = 1_000_000
"""Offer ids per aggregated text of :func:`_load_current` (a few hundred MB at most:
far below SQLite's and PostgreSQL's 1 GB limit on one value)."""


def _implausible(
    conn: Connection,
    settings: Settings,
    source: str,
    records: list[OfferRecord],
    diff: _Diff,
) -> str | None:
    """Why this crawl must not be applied, or None. Checked before anything is written."""
    if not records:
        return "empty result: no valid offers"
    last_good = conn.execute(
        select(RUN.c.seen)
        .where(RUN.c.source == source, RUN.c.status == CrawlStatus.ok.value)
        .order_by(RUN.c.id.desc())
        .limit(1)
    ).scalar()
    last_good = int(last_good or 0)
    enough_history = last_good >= max(1, settings.min_offers_for_ratio_check)
    if enough_history and Decimal(len(records)) < settings.min_offer_ratio * last_good:
        share = Decimal(len(records) * 100) / last_good
        return (
            f"offer count dropped from {last_good} to {len(records)} "
            f"({share:.0f} % < {settings.min_offer_ratio * 100:.0f} %)"
        )
    factor = settings.max_price_factor
    for old, record, _, _ in diff.changed:
        if old.currency != record.currency:
            continue
        ratio = record.amount / old.amount
        if ratio > factor or ratio < 1 / factor:
            return (
                f"price of {record.sku} in {record.region} ({record.price_kind}) moved "
                f"from {old.amount} to {record.amount} {record.currency}: ×{ratio:.3g} "
                f"exceeds the ×{factor} plausibility band"
            )[:200]
    return None


def _ensure_providers(conn: Connection, slugs: set[str], resolver: _Resolver) -> None:
    """A provider missing from reference data is registered minimally and reported."""
    missing = sorted(slugs - resolver.reference.providers)
    if missing:
        conn.execute(
            insert(PROVIDER),
            [{"slug": s, "name": s, "kind": "unknown", "status": "active"} for s in missing],
        )
        for slug in missing:
            resolver.unmapped[(UnmappedKind.provider.value, slug)] += 1
        resolver.reference.providers.update(missing)


def _ensure_instance_types(conn: Connection, first_new_offer: int) -> None:
    """Register SKUs first seen in this crawl (an SKU already offered is already known).

    Done by the database from the offers this ingest just inserted (ids from
    ``first_new_offer`` on): each new (provider, SKU) not registered yet is inserted
    with the attributes of its first new offer in identity order (the lowest id), in id
    order. Nothing is read back into Python or bound again."""
    if conn.dialect.name == "postgresql":
        # ON CONFLICT would cost PostgreSQL a speculative insertion per row; only ingests
        # write instance types, and they hold the ingest lock, so NOT EXISTS is exact.
        conn.exec_driver_sql("SET LOCAL work_mem = '64MB'")  # the two sorts, in memory
        conn.exec_driver_sql(
            f"INSERT INTO instance_type ({SKU_LIST}) SELECT {SKU_LIST} FROM ("
            f"SELECT DISTINCT ON (provider, sku) id, {SKU_SOURCE} FROM offer AS o "
            "WHERE id >= %(first)s AND NOT EXISTS (SELECT 1 FROM instance_type AS i "
            "WHERE i.provider = o.provider AND i.name = o.sku) "
            "ORDER BY provider, sku, id) AS new ORDER BY id",
            {"first": first_new_offer},
        )
        return
    # NOT INDEXED keeps SQLite's plan on the id range, the new rows only, in id order.
    conn.exec_driver_sql(
        f"INSERT INTO instance_type ({SKU_LIST}) "
        f"SELECT {SKU_SOURCE} FROM offer NOT INDEXED WHERE id >= :first ORDER BY id "
        "ON CONFLICT (provider, name) DO NOTHING",
        {"first": first_new_offer},
    )


SKU_COLUMNS = ("provider", "name", "gpu_slug", "gpu_count", "vcpus", "memory_gb", "bare_metal")
SKU_LIST = ", ".join(SKU_COLUMNS)
SKU_SOURCE = ", ".join(("provider", "sku AS name", *SKU_COLUMNS[2:]))
"""The offer columns an instance type is registered from, in SKU_COLUMNS order."""
OFFER_COLUMNS = (
    "id",
    "provider",
    "sku",
    "region",
    "price_kind",
    "unit",
    *ATTRIBUTES,
    "fingerprint",
    "amount",
    "currency",
    "gpu_hour_usd",
    "gpu_hour_usd_e10",
    "observation_id",
)
"""A new offer's row, as built (its key's parts, attributes, price, observation); the
columns every new offer of an ingest shares are constants of the insert."""
OBS_COLUMNS = (
    "id",
    "offer_id",
    "amount",
    "currency",
    "hourly_amount",
    "amount_usd",
    "hourly_usd",
    "gpu_hour_usd",
    "fx_rate",
    "fx_date",
    "fx_source",
    "raw_sha256",
)
"""An observation's row, as built and as the outbox reads it (``gpu_hour_usd`` is a
Decimal there); valid_from, version_from and crawl_run_id are constants of the insert."""


TOUCHED_COLUMNS = ("id", *ATTRIBUTES, "fingerprint")
REPRICED_COLUMNS = (
    *TOUCHED_COLUMNS,
    "status",
    "amount",
    "currency",
    "observation_id",
    "gpu_hour_usd",
    "gpu_hour_usd_e10",
    "last_changed_at",
    "last_changed_version",
    "withdrawn_at",
    "withdrawn_version",
)


STAGED_MIN_ROWS = 1000
"""From this many new offers on, SQLite writes them through staging tables (see
:meth:`_Writer._insert_new_staged`). PostgreSQL never does: it copies every new offer's
row while the rows are built (see :meth:`_Writer._insert_new_rows`)."""
PER_LOAD_CHECKS_MIN_ROWS = 5000
"""From this many new offers on (a first crawl of a large source), PostgreSQL checks the
new rows' foreign keys once for the load instead of once per row, where the ingest's
role may (see :mod:`service.catalog.refcheck`). Not for repriced offers alone: their
observations refer to offers already stored, and checking those once costs as much as
the per-row checks (5 % of 200,000 offers repriced: 1.29 s against 1.21 s)."""
STAGED_PRICE_COLUMNS = ("pid", *OBS_COLUMNS[2:11], "gpu_hour_usd_e10")
"""A distinct price as staged: the observation's figures (``gpu_hour_usd`` as bound text,
which is also the offer's) and the offer's sort key."""

_Price = tuple[tuple[Any, ...], tuple[Any, ...]]
"""A price's derived figures as bound: the observation's and the offer's (see
:meth:`_Writer._price`)."""


def _price_key(fields: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a price's derived figures depend on: amount, unit, price basis, GPU count and
    currency (``fields`` is a record's ``__dict__``)."""
    return (
        fields["amount"],
        fields["unit"],
        fields["price_per"],
        fields["gpu_count"],
        fields["currency"],
    )


class _Writer:
    """The writes of one ingest, executed in bulk: one version, its rows, and nothing else."""

    def __init__(
        self,
        conn: Connection,
        fx: FxTable,
        run_id: int,
        now: datetime,
        version: int,
        crawl: CrawlResult,
    ) -> None:
        self.conn, self.fx, self.run_id, self.now, self.version = conn, fx, run_id, now, version
        payloads = crawl.payloads
        self.raw_sha256 = payloads[0].sha256 if len(payloads) == 1 else None
        self.record_payloads = crawl.record_payloads
        self.observations: list[tuple[Any, ...]] = []
        """Observation rows bound in Python (all of them, or the repriced ones only when
        the new offers' were staged: see :meth:`observation_rows`)."""
        self._lazy_new_observations: tuple[Any, int, int] | None = None
        self._next_obs = (conn.execute(select(func.max(OBS.c.id))).scalar() or 0) + 1
        self._fx_cache: dict[str, Any] = {}
        self._prices: dict[tuple[Any, ...], _Price] = {}
        self._bases: dict[tuple[Any, ...], tuple[tuple[Any, ...], Decimal | None]] = {}
        self.bind = bulk_binder(conn)
        self.stamp = self.bind(now)
        self._binds_text = self._stages = conn.dialect.name == "sqlite"
        self._bound: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        self.first_new_offer = 0
        """The id of this ingest's first new offer (set by :meth:`write`)."""

    def bound_attributes(self, attributes: tuple[Any, ...], digest: str) -> tuple[Any, ...]:
        """``attributes`` as bound for the bulk writes, memoized per fingerprint (offers
        of one SKU share them). The memo is used only for equal attributes: the same
        fingerprint text and equal values are the same stored values."""
        if not self._binds_text:
            return attributes
        entry = self._bound.get(digest)
        if entry is not None and entry[0] == attributes:
            return entry[1]
        values = tuple(map(self.bind, attributes))
        if entry is None:
            self._bound[digest] = (attributes, values)
        return values

    def _price(self, fields: Mapping[str, Any]) -> _Price:
        """The derived figures of a price, as bound for the bulk writes: the
        observation's (``OBS_COLUMNS[2:11]``, USD per GPU-hour there as a Decimal, which
        the outbox reads) and the offer's (amount, currency, USD per GPU-hour and its
        sort key).

        Memoized on :func:`_price_key`, in two levels: what does not depend on the GPU
        count (the hourly amount of a per-instance price, the USD figures, the FX rate)
        is shared by every GPU count of one amount, unit and currency, so a catalog's
        SKUs of one list price convert it once. Every figure is rounded and normalized
        by :func:`q`, so equal inputs give identical results whatever their decimal
        spelling (and the bound amount is canonical text on SQLite, an equal NUMERIC on
        PostgreSQL)."""
        memo_key = _price_key(fields)
        price = self._prices.get(memo_key)
        if price is not None:
            return price
        amount, unit, per, gpu_count, currency = memo_key
        per_gpu = per == PricePer.gpu
        base_key = (amount, unit, currency, gpu_count if per_gpu else None)
        base = self._bases.get(base_key)
        if base is None:
            base = self._bases[base_key] = self._base(amount, unit, per, gpu_count, currency)
        observed, hourly_usd = base
        if hourly_usd is None:
            gpu_usd = None
        else:
            gpu_usd = gpu_hourly(hourly_usd, gpu_count)
            observed = (*observed[:5], gpu_usd, *observed[6:])
        price = self._prices[memo_key] = (
            observed,
            (observed[0], currency, self.bind(gpu_usd), sort_key_e10(gpu_usd)),
        )
        return price

    def _base(
        self, amount: Decimal, unit: Any, per: Any, gpu_count: Decimal, currency: str
    ) -> tuple[tuple[Any, ...], Decimal | None]:
        """The figures of a price that do not depend on its GPU count (unless the price
        is per GPU): the observation's as bound, USD per GPU-hour left None, and the USD
        hourly amount it is computed from (None without an FX rate)."""
        hourly = instance_hourly(amount, unit, per, gpu_count)
        if currency not in self._fx_cache:
            self._fx_cache[currency] = self.fx.to_usd(currency, self.now.date())
        conversion = self._fx_cache[currency]
        if conversion is None:
            usd = hourly_usd = rate = rate_date = rate_source = None
        else:
            rate, rate_date, rate_source = (
                conversion.usd_per_unit,
                conversion.rate_date,
                conversion.source,
            )
            usd = q(amount * rate)
            hourly_usd = q(hourly * rate)
        bind = self.bind
        observed = (
            bind(amount),
            currency,
            bind(hourly),
            bind(usd),
            bind(hourly_usd),
            None,
            bind(rate),
            bind(rate_date),
            rate_source,
        )
        return observed, hourly_usd

    def _payload_of(self, record: OfferRecord) -> str | None:
        return self.record_payloads.get(id(record), self.raw_sha256)

    def write(self, source: str, diff: _Diff) -> None:
        conn, now, version = self.conn, self.now, self.version
        conn.execute(
            insert(VERSION).values(
                id=version,
                created_at=now,
                source=source,
                crawl_run_id=self.run_id,
                added=len(diff.new) + len(diff.reopened),
                changed=len(diff.changed),
                withdrawn=len(diff.withdrawn),
                updated=len(diff.touched),
            )
        )
        next_offer = (conn.execute(select(func.max(OFFER.c.id))).scalar() or 0) + 1
        self.first_new_offer = next_offer
        observing = len(diff.new) + len(diff.changed) + len(diff.reopened)
        deferred = [  # ids are never reused: the next id bounds a table's row count
            table.name
            for table, adding, holding in (
                (OFFER, len(diff.new), next_offer - 1),
                (OBS, observing, self._next_obs - 1),
            )
            if indexes_worth_rebuilding(adding, holding)
        ]
        loads = (
            [Load(OFFER, next_offer), Load(OBS, self._next_obs)]
            if len(diff.new) >= PER_LOAD_CHECKS_MIN_ROWS
            else []
        )
        with indexes_deferred(conn, deferred), foreign_keys_checked_per_load(conn, loads):
            self._write_rows(source, diff, next_offer)

    def _write_rows(self, source: str, diff: _Diff, next_offer: int) -> None:
        conn, now, version = self.conn, self.now, self.version
        offer_constants = {
            "source": source,
            "status": ACTIVE,
            "first_seen_at": self.stamp,
            "first_seen_version": version,
            "last_changed_at": self.stamp,
            "last_changed_version": version,
        }
        obs_constants = {
            "valid_from": self.stamp,
            "version_from": version,
            "crawl_run_id": self.run_id,
        }
        # New offers get their ids in identity key order, so the ids follow the unique
        # index (appends to it where it is kept up to date row by row).
        if self._stages and len(diff.new) >= STAGED_MIN_ROWS:
            self._insert_new_staged(diff, next_offer, offer_constants, obs_constants)
        elif diff.new:
            self._insert_new_rows(diff.in_key_order, next_offer, offer_constants)

        repriced = []
        obs_id, observe = self._next_obs, self.observations.append
        for old, record, attributes, digest in diff.changed + diff.reopened:
            observed, offered = self._price(record.__dict__)
            observe((obs_id, old.id, *observed, self._payload_of(record)))
            repriced.append((old, record, attributes, digest, obs_id, offered))
            obs_id += 1
        self._next_obs = obs_id
        closing = [old.observation_id for old, *_ in diff.changed]
        closing += [old.observation_id for old in diff.withdrawn]
        for start in range(0, len(closing), CHUNK):
            conn.execute(
                update(OBS)
                .where(OBS.c.id.in_(closing[start : start + CHUNK]))
                .values(valid_to=now, version_to=version)
            )
        bulk_insert(conn, OBS, OBS_COLUMNS, self.observations, obs_constants)
        self._update_offers(repriced, diff)

    def _insert_new_rows(
        self,
        new: list[tuple[Key, OfferRecord, tuple[Any, ...], str]],
        next_offer: int,
        constants: dict[str, Any],
    ) -> None:
        """Insert the new offers, one bound row each; their observation rows are kept in
        :attr:`observations`, inserted with the repriced ones.

        The rows are handed to :func:`bulk_insert` as they are built. On PostgreSQL the
        server stores each one as it arrives while this loop builds the next ones, on the
        other core: a 200,000-offer first ingest took 5.1 s this way, against 5.9 s with
        the list built first and 5.8 s through staging tables (docs/benchmarks.md)."""
        rows = self._new_offer_rows(new, next_offer, self._next_obs)
        self._next_obs += len(new)
        bulk_insert(self.conn, OFFER, OFFER_COLUMNS, rows, constants)

    def _new_offer_rows(
        self,
        new: list[tuple[Key, OfferRecord, tuple[Any, ...], str]],
        next_offer: int,
        obs_id: int,
    ) -> Iterator[tuple[Any, ...]]:
        """The offer rows of :meth:`_insert_new_rows`, one by one; each one's observation
        row goes to :attr:`observations` as it is built."""
        # The hot loop of a first ingest: one offer row and one observation row per new
        # offer, each built by unpacking memoized parts (key, attributes, price).
        observe = self.observations.append
        prices, price_of = self._prices, self._price
        memo, bound_of, as_is = self._bound, self.bound_attributes, not self._binds_text
        payload_of = self._payload_of if self.record_payloads else None
        raw, split = self.raw_sha256, str.split
        for offer_id, (key, record, attributes, digest) in enumerate(new, next_offer):
            fields = record.__dict__
            price = prices.get(  # _price_key(fields), inlined: hot loop
                (
                    fields["amount"],
                    fields["unit"],
                    fields["price_per"],
                    fields["gpu_count"],
                    fields["currency"],
                )
            )
            observed, offered = price or price_of(fields)
            if as_is:
                values = attributes
            else:
                entry = memo.get(digest)
                values = (
                    entry[1]
                    if entry is not None and entry[0] == attributes
                    else bound_of(attributes, digest)
                )
            observe((obs_id, offer_id, *observed, payload_of(record) if payload_of else raw))
            yield (offer_id, *split(key, KEY_SEP), *values, digest, *offered, obs_id)
            obs_id += 1

    def _insert_new_staged(
        self,
        diff: _Diff,
        next_offer: int,
        offer_constants: dict[str, Any],
        obs_constants: dict[str, Any],
    ) -> None:
        """Many new offers, on SQLite: bind each offer's own values only (its key parts
        and the numbers of its attributes and price) into a temporary table, the distinct
        attributes and prices into two more, and let two ``INSERT ... SELECT`` joins
        write the offer and observation rows. Binding is most of what a row costs the
        client; the rows stored are exactly those :meth:`_insert_new_rows` writes (the
        same bound values, through the same column affinities).

        The records are read in the crawl's order, which is the order they lie in memory
        (a crawl parses them one after the other): reading 200,000 records in key order
        instead missed the CPU's cache on nearly every field (1.1 s for this loop, against
        0.86 s now with the sort). Only the compact staged rows are sorted into key
        order, the order of the ids."""
        aids: dict[tuple[Any, ...], int] = {}
        pids: dict[tuple[Any, ...], int] = {}
        attribute_rows: list[tuple[Any, ...]] = []
        price_rows: list[tuple[Any, ...]] = []
        compact: list[tuple[Any, ...]] = []
        stage_attributes, stage_price, stage_offer = (
            aids.get,
            pids.get,
            compact.append,
        )
        payload_of = self._payload_of if self.record_payloads else None
        for key, record, attributes, digest in diff.new:  # the crawl's order
            fields = record.__dict__
            aid = stage_attributes(attributes)
            if aid is None:  # equal attributes have equal bound values and fingerprint
                aid = aids[attributes] = len(aids)
                attribute_rows.append((aid, *self.bound_attributes(attributes, digest), digest))
            price_key = (  # _price_key(fields), inlined: hot loop
                fields["amount"],
                fields["unit"],
                fields["price_per"],
                fields["gpu_count"],
                fields["currency"],
            )
            pid = stage_price(price_key)
            if pid is None:
                pid = pids[price_key] = len(pids)
                observed, offered = self._price(fields)
                # the observation's USD per GPU-hour as bound (the offer's, as text)
                price_rows.append((pid, *observed[:5], offered[2], *observed[6:], offered[3]))
            if payload_of:
                stage_offer((key, aid, pid, payload_of(record)))
            else:
                stage_offer((key, aid, pid))
        compact.sort(key=_first)  # numbered 1, 2, ... in key order (the keys are unique)
        split = str.split  # after the sort: the parts then lie in memory in binding order
        if payload_of:
            offer_rows = [(*split(k, KEY_SEP), a, p, r) for k, a, p, r in compact]
        else:
            offer_rows = [(*split(k, KEY_SEP), a, p) for k, a, p in compact]
        del compact
        first_obs = self._next_obs
        self._next_obs += len(offer_rows)
        self._lazy_new_observations = (diff.in_key_order, next_offer, first_obs)
        offers: tuple[str, ...] = ("n", *OFFER_COLUMNS[1:6], "aid", "pid")
        if payload_of:
            offers += ("raw_sha256",)
        conn = self.conn
        shared = (self.raw_sha256, *offer_constants.values(), *obs_constants.values())
        literals = [sqlite_literal(value) for value in shared]
        raw = "n.raw_sha256" if payload_of else literals[0]
        offer_literals = literals[1 : 1 + len(offer_constants)]
        obs_literals = literals[1 + len(offer_constants) :]
        offer_id, obs_id = f"n.n + {next_offer - 1}", f"n.n + {first_obs - 1}"
        with (
            staged(
                conn,
                "stage_attributes",
                ("aid", *ATTRIBUTES, "fingerprint"),
                attribute_rows,
            ) as a,
            staged(conn, "stage_price", STAGED_PRICE_COLUMNS, price_rows) as p,
            staged(
                conn,
                "stage_offer",
                offers,
                offer_rows,
                numbered=True,
            ) as n,
        ):
            del offer_rows
            # CROSS JOIN: SQLite walks the offers in id order and looks up the rest (it
            # does not reorder CROSS JOINs).
            offers_by_id = f"FROM {n} AS n CROSS JOIN {p} AS p WHERE p.pid = n.pid ORDER BY n.n"
            with_attributes = (
                f"FROM {n} AS n CROSS JOIN {a} AS a CROSS JOIN {p} AS p "
                "WHERE a.aid = n.aid AND p.pid = n.pid ORDER BY n.n"
            )
            offer_values = (
                offer_id,
                *(f"n.{c}" for c in OFFER_COLUMNS[1:6]),
                *(f"a.{c}" for c in (*ATTRIBUTES, "fingerprint")),
                "p.amount",
                "p.currency",
                "p.gpu_hour_usd",
                "p.gpu_hour_usd_e10",
                obs_id,
                *offer_literals,
            )
            conn.exec_driver_sql(
                f"INSERT INTO {OFFER.name} ({', '.join((*OFFER_COLUMNS, *offer_constants))}) "
                f"SELECT {', '.join(offer_values)} {with_attributes}"
            )
            obs_values = (
                obs_id,
                offer_id,
                *(f"p.{c}" for c in OBS_COLUMNS[2:11]),
                raw,
                *obs_literals,
            )
            conn.exec_driver_sql(
                f"INSERT INTO {OBS.name} ({', '.join((*OBS_COLUMNS, *obs_constants))}) "
                f"SELECT {', '.join(obs_values)} {offers_by_id}"
            )

    def observation_rows(self) -> list[tuple[Any, ...]]:
        """Every observation row this ingest inserted, as :data:`OBS_COLUMNS` (USD per
        GPU-hour as a Decimal): the added offers' first, then the repriced ones. Built
        on demand where the rows were written by the database (the outbox reads them
        only when some subscription is live)."""
        if self._lazy_new_observations is None:
            return self.observations
        new, next_offer, first_obs = self._lazy_new_observations
        payload_of, raw = self._payload_of, self.raw_sha256
        rows = [
            (
                first_obs + i,
                next_offer + i,
                *self._prices[_price_key(record.__dict__)][0],
                payload_of(record) if self.record_payloads else raw,
            )
            for i, (_, record, _, _) in enumerate(new)
        ]
        return rows + self.observations

    def _update_offers(self, repriced: list[tuple[Any, ...]], diff: _Diff) -> None:
        conn, now, version, stamp = self.conn, self.now, self.version, self.stamp
        bulk_update(
            conn,
            OFFER,
            REPRICED_COLUMNS,
            [
                (
                    old.id,
                    *attributes,
                    digest,
                    ACTIVE,
                    offered[0],
                    offered[1],
                    obs_id,
                    offered[2],
                    offered[3],
                    stamp,
                    version,
                    None,
                    None,
                )
                for old, _, attributes, digest, obs_id, offered in repriced
            ],
        )
        bulk_update(
            conn,
            OFFER,
            TOUCHED_COLUMNS,
            [(old.id, *attributes, digest) for old, attributes, digest in diff.touched],
        )
        withdrawn = [old.id for old in diff.withdrawn]
        for start in range(0, len(withdrawn), CHUNK):
            conn.execute(
                update(OFFER)
                .where(OFFER.c.id.in_(withdrawn[start : start + CHUNK]))
                .values(
                    status=OfferStatus.withdrawn.value, withdrawn_at=now, withdrawn_version=version
                )
            )
