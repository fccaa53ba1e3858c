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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Engine, bindparam, func, insert, select, text, update

from schema.catalog import GpuAlias, GpuModel, InstanceType, Provider, Region
from schema.crawl import CrawlRun, CrawlRunPayload, RawPayload, RejectedRecord, UnmappedName
from schema.enums import CrawlStatus, OfferStatus, UnmappedKind
from schema.names import gpu_alias_key
from schema.prices import CatalogVersion, Offer, PriceObservation
from schema.records import OfferRecord, describe_validation_error
from schema.types import utcnow
from service.config import Settings
from service.db import writer
from service.fx import FxTable
from service.units import gpu_hourly, instance_hourly, q

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
ALIAS = GpuAlias.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
SKU = InstanceType.__table__  # type: ignore[attr-defined]

MAX_STORED_REJECTIONS = 1000
MAX_STORED_FIELD = 500
CHUNK = 5000
INGEST_LOCK_KEY = 0x67707561  # "gpua": one catalog, one writer at a time (PostgreSQL)

# Offer columns that describe the SKU; a change of these alone updates the row in place.
ATTRIBUTES = (
    "price_per",
    "gpu_slug",
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

Key = tuple[str, str, str, str, str]


@dataclass
class Payload:
    """A raw response body as fetched, kept compressed and content-addressed."""

    url: str
    body: bytes
    fetched_at: datetime
    content_type: str | None = None
    status_code: int | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


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
    """Record that a crawl of ``source`` began; returns the crawl run id."""
    with writer(engine).begin() as conn:
        result = conn.execute(
            insert(RUN).values(
                source=source,
                trigger=trigger,
                started_at=utcnow(),
                status=CrawlStatus.running.value,
                parser_version=parser_version,
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
    rejections: list[Rejection]
    protected: set[Key]
    """Keys of offers whose record this crawl rejected: they must not be withdrawn."""


def _validate(crawl: CrawlResult) -> _Validated:
    records: list[OfferRecord] = []
    rejections = list(crawl.rejections)
    protected: set[Key] = set()
    seen: dict[Key, Decimal] = {}
    for position, item in enumerate(crawl.records):
        try:
            record = item if isinstance(item, OfferRecord) else OfferRecord.model_validate(item)
        except ValidationError as exc:
            rejections.append(
                Rejection(position, describe_validation_error(exc), _safe_excerpt(item))
            )
            key = _loose_key(item, crawl.source)
            if key:
                protected.add(key)
            continue
        if record.source != crawl.source:
            rejections.append(
                Rejection(
                    position,
                    f"source: record says {record.source!r}, crawl is {crawl.source!r}",
                    _safe_excerpt(record),
                )
            )
            continue
        key = record.key
        if key in seen:
            if seen[key] != record.amount:
                rejections.append(
                    Rejection(
                        position, "duplicate offer with a different price", _safe_excerpt(record)
                    )
                )
                protected.add(key)
            continue
        seen[key] = record.amount
        records.append(record)
    # An offer reported twice with two prices is ambiguous: keep neither price.
    if protected:
        records = [r for r in records if r.key not in protected]
    return _Validated(records, rejections, protected)


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
    return (parts[0], parts[1], parts[2], parts[3], parts[4])


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
            "size": len(p.body),
            "compressed": zlib.compress(p.body, 6),
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
            "record": dict(r.record) if r.record is not None else None,
        }
        for r in rejections[:MAX_STORED_REJECTIONS]
    ]
    if rows:
        conn.execute(insert(REJECTED), rows)


def _store_unmapped(
    conn: Connection, run_id: int, source: str, names: dict[tuple[str, str], int]
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
    aliases: dict[str, str]
    gpu_slugs: set[str]
    providers: set[str]
    regions: dict[tuple[str, str], str]

    @classmethod
    def load(cls, conn: Connection) -> _Reference:
        return cls(
            aliases={a: slug for a, slug in conn.execute(select(ALIAS.c.alias, ALIAS.c.gpu_slug))},  # noqa: C416
            gpu_slugs=set(conn.execute(select(GPU.c.slug)).scalars()),
            providers=set(conn.execute(select(PROVIDER.c.slug)).scalars()),
            regions={
                (p, c): cc
                for p, c, cc in conn.execute(
                    select(REGION.c.provider, REGION.c.code, REGION.c.country)
                )
            },
        )


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
    validated = _validate(crawl)
    now = now or utcnow()
    with writer(engine).begin() as conn:
        _lock(conn)
        return _apply(conn, settings, crawl, validated, crawl_run_id, now)


def _apply(
    conn: Connection,
    settings: Settings,
    crawl: CrawlResult,
    validated: _Validated,
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
    _store_payloads(conn, run_id, crawl.payloads)
    _store_rejections(conn, run_id, validated.rejections)
    reference = _Reference.load(conn)
    current = _load_current(conn, crawl.source)

    reason = _implausible(conn, settings, crawl.source, records, current)
    if reason is not None:
        result.status = CrawlStatus.quarantined if records or current else CrawlStatus.failed
        result.reason = reason
        _finish(conn, crawl, result, now)
        return result

    unmapped: dict[tuple[str, str], int] = {}
    rows = []
    for record in records:
        before = sum(unmapped.values())
        rows.append(_resolve(record, reference, unmapped))
        result.unmapped += sum(unmapped.values()) > before
    _ensure_providers(conn, {row["provider"] for row in rows}, reference, unmapped)

    fx = FxTable.load(conn)
    plan = _Plan(conn, fx, run_id, now, crawl.payloads)
    incoming: set[Key] = set()
    for row, record in zip(rows, records, strict=True):
        key = record.key
        incoming.add(key)
        old = current.get(key)
        if old is None:
            plan.add(row, record)
        elif old["status"] != OfferStatus.active.value:
            plan.reopen(old, row, record)
        elif old["amount"] != record.amount or old["currency"] != record.currency:
            plan.change(old, row, record)
        elif any(old[name] != row[name] for name in ATTRIBUTES):
            plan.touch(old, row)
    if crawl.complete:
        for key, old in current.items():
            if (
                old["status"] == OfferStatus.active.value
                and key not in incoming
                and key not in validated.protected
            ):
                plan.withdraw(old)

    if plan.has_changes:
        version = (conn.execute(select(func.max(VERSION.c.id))).scalar() or 0) + 1
        plan.write(version, crawl.source)
        result.catalog_version = version
    result.added, result.changed = plan.added, plan.changed
    result.withdrawn, result.updated = plan.withdrawn, plan.updated
    _ensure_instance_types(conn, rows)
    _store_unmapped(conn, run_id, crawl.source, unmapped)
    _finish(conn, crawl, result, now)
    return result


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


def _load_current(conn: Connection, source: str) -> dict[Key, dict[str, Any]]:
    columns = [
        OFFER.c.id,
        OFFER.c.provider,
        OFFER.c.sku,
        OFFER.c.region,
        OFFER.c.price_kind,
        OFFER.c.unit,
        OFFER.c.status,
        OFFER.c.amount,
        OFFER.c.currency,
        OFFER.c.observation_id,
        *[OFFER.c[name] for name in ATTRIBUTES],
    ]
    current: dict[Key, dict[str, Any]] = {}
    for row in conn.execute(select(*columns).where(OFFER.c.source == source)).mappings():
        key = (row["provider"], row["sku"], row["region"], row["price_kind"], row["unit"])
        current[key] = dict(row)
    return current


def _implausible(
    conn: Connection,
    settings: Settings,
    source: str,
    records: list[OfferRecord],
    current: dict[Key, dict[str, Any]],
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
    for record in records:
        old = current.get(record.key)
        if old is None or old["currency"] != record.currency or old["amount"] == record.amount:
            continue
        ratio = record.amount / old["amount"]
        if ratio > factor or ratio < 1 / factor:
            return (
                f"price of {record.sku} in {record.region} ({record.price_kind.value}) moved "
                f"from {old['amount']} to {record.amount} {record.currency}: ×{ratio:.3g} "
                f"exceeds the ×{factor} plausibility band"
            )[:200]
    return None


def _resolve(
    record: OfferRecord, reference: _Reference, unmapped: dict[tuple[str, str], int]
) -> dict[str, Any]:
    """The offer row for a record, with GPU and country resolved from reference data."""
    gpu_slug = record.gpu_model
    if gpu_slug is not None and gpu_slug not in reference.gpu_slugs:
        _count(unmapped, UnmappedKind.gpu, gpu_slug)
        gpu_slug = None
    elif gpu_slug is None and record.gpu_name_raw:
        gpu_slug = reference.aliases.get(gpu_alias_key(record.gpu_name_raw))
        if gpu_slug is None:
            _count(unmapped, UnmappedKind.gpu, record.gpu_name_raw)
    country = record.country
    region_country = reference.regions.get((record.provider, record.region))
    if region_country is None:
        _count(unmapped, UnmappedKind.region, f"{record.provider}/{record.region}")
    country = country or region_country
    return {
        "source": record.source,
        "provider": record.provider,
        "sku": record.sku,
        "region": record.region,
        "price_kind": record.price_kind.value,
        "unit": record.unit.value,
        "price_per": record.price_per.value,
        "gpu_slug": gpu_slug,
        "gpu_name_raw": record.gpu_name_raw,
        "gpu_count": record.gpu_count,
        "gpu_memory_gb": record.gpu_memory_gb,
        "vcpus": record.vcpus,
        "memory_gb": record.memory_gb,
        "country": country,
        "bare_metal": record.bare_metal,
        "price_floor": record.price_floor,
        "source_url": record.source_url,
    }


def _count(unmapped: dict[tuple[str, str], int], kind: UnmappedKind, value: str) -> None:
    unmapped[(kind.value, value)] = unmapped.get((kind.value, value), 0) + 1


def _ensure_providers(
    conn: Connection,
    slugs: set[str],
    reference: _Reference,
    unmapped: dict[tuple[str, str], int],
) -> None:
    """A provider missing from reference data is registered minimally and reported."""
    missing = sorted(slugs - reference.providers)
    if missing:
        conn.execute(
            insert(PROVIDER),
            [{"slug": s, "name": s, "kind": "unknown", "status": "active"} for s in missing],
        )
        for slug in missing:
            _count(unmapped, UnmappedKind.provider, slug)
        reference.providers.update(missing)


def _ensure_instance_types(conn: Connection, rows: list[dict[str, Any]]) -> None:
    providers = {row["provider"] for row in rows}
    if not providers:
        return
    known = set(
        conn.execute(
            select(SKU.c.provider, SKU.c.name).where(SKU.c.provider.in_(providers))
        ).all()
    )
    new: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["provider"], row["sku"])
        if key not in known and key not in new:
            new[key] = {
                "provider": row["provider"],
                "name": row["sku"],
                "gpu_slug": row["gpu_slug"],
                "gpu_count": row["gpu_count"],
                "vcpus": row["vcpus"],
                "memory_gb": row["memory_gb"],
                "bare_metal": row["bare_metal"],
            }
    rows_new = list(new.values())
    for start in range(0, len(rows_new), CHUNK):
        conn.execute(insert(SKU), rows_new[start : start + CHUNK])


class _Plan:
    """The writes of one ingest, collected first and then executed in bulk."""

    def __init__(
        self, conn: Connection, fx: FxTable, run_id: int, now: datetime, payloads: list[Payload]
    ) -> None:
        self.conn, self.fx, self.run_id, self.now = conn, fx, run_id, now
        self.raw_sha256 = payloads[0].sha256 if len(payloads) == 1 else None
        self.new_offers: list[dict[str, Any]] = []
        self.new_observations: list[dict[str, Any]] = []
        self.closed_observations: list[int] = []
        self.offer_updates: list[dict[str, Any]] = []
        self.added = self.changed = self.withdrawn = self.updated = 0
        self._next_offer = (conn.execute(select(func.max(OFFER.c.id))).scalar() or 0) + 1
        self._next_obs = (conn.execute(select(func.max(OBS.c.id))).scalar() or 0) + 1

    @property
    def has_changes(self) -> bool:
        return bool(self.new_offers or self.new_observations or self.offer_updates)

    def _observation(self, offer_id: int, row: dict[str, Any], record: OfferRecord) -> int:
        obs_id = self._next_obs
        self._next_obs += 1
        hourly = instance_hourly(record.amount, record.unit, record.price_per, record.gpu_count)
        conversion = self.fx.to_usd(record.currency, self.now.date())
        usd = hourly_usd = gpu_usd = None
        if conversion is not None:
            usd = q(record.amount * conversion.usd_per_unit)
            hourly_usd = q(hourly * conversion.usd_per_unit)
            gpu_usd = gpu_hourly(hourly_usd, record.gpu_count)
        self.new_observations.append(
            {
                "id": obs_id,
                "offer_id": offer_id,
                "amount": record.amount,
                "currency": record.currency,
                "hourly_amount": hourly,
                "amount_usd": usd,
                "hourly_usd": hourly_usd,
                "gpu_hour_usd": gpu_usd,
                "fx_rate": conversion.usd_per_unit if conversion else None,
                "fx_date": conversion.rate_date if conversion else None,
                "fx_source": conversion.source if conversion else None,
                "valid_from": self.now,
                "valid_to": None,
                "version_from": 0,
                "version_to": None,
                "crawl_run_id": self.run_id,
                "raw_sha256": self.raw_sha256,
            }
        )
        return obs_id

    def add(self, row: dict[str, Any], record: OfferRecord) -> None:
        offer_id = self._next_offer
        self._next_offer += 1
        obs_id = self._observation(offer_id, row, record)
        self.new_offers.append(
            {
                **row,
                "id": offer_id,
                "status": OfferStatus.active.value,
                "amount": record.amount,
                "currency": record.currency,
                "observation_id": obs_id,
                "first_seen_at": self.now,
                "last_changed_at": self.now,
                "withdrawn_at": None,
                "withdrawn_version": None,
            }
        )
        self.added += 1

    def change(self, old: dict[str, Any], row: dict[str, Any], record: OfferRecord) -> None:
        self.closed_observations.append(old["observation_id"])
        obs_id = self._observation(old["id"], row, record)
        self.offer_updates.append(
            {
                **row,
                "_id": old["id"],
                "status": OfferStatus.active.value,
                "amount": record.amount,
                "currency": record.currency,
                "observation_id": obs_id,
                "last_changed_at": self.now,
                "withdrawn_at": None,
                "withdrawn_version": None,
                "_changed": True,
            }
        )
        self.changed += 1

    def reopen(self, old: dict[str, Any], row: dict[str, Any], record: OfferRecord) -> None:
        obs_id = self._observation(old["id"], row, record)
        self.offer_updates.append(
            {
                **row,
                "_id": old["id"],
                "status": OfferStatus.active.value,
                "amount": record.amount,
                "currency": record.currency,
                "observation_id": obs_id,
                "last_changed_at": self.now,
                "withdrawn_at": None,
                "withdrawn_version": None,
                "_changed": True,
            }
        )
        self.added += 1

    def touch(self, old: dict[str, Any], row: dict[str, Any]) -> None:
        self.offer_updates.append({**row, "_id": old["id"], "_changed": False})
        self.updated += 1

    def withdraw(self, old: dict[str, Any]) -> None:
        self.closed_observations.append(old["observation_id"])
        self.offer_updates.append(
            {
                "_id": old["id"],
                "status": OfferStatus.withdrawn.value,
                "withdrawn_at": self.now,
                "withdrawn_version": 0,
                "_changed": True,
                "_withdraw": True,
            }
        )
        self.withdrawn += 1

    def write(self, version: int, source: str) -> None:
        conn = self.conn
        conn.execute(
            insert(VERSION).values(
                id=version,
                created_at=self.now,
                source=source,
                crawl_run_id=self.run_id,
                added=self.added,
                changed=self.changed,
                withdrawn=self.withdrawn,
                updated=self.updated,
            )
        )
        for offer in self.new_offers:
            offer["first_seen_version"] = offer["last_changed_version"] = version
        for obs in self.new_observations:
            obs["version_from"] = version
        # Offers first (observations reference them), then history, then current state.
        for start in range(0, len(self.new_offers), CHUNK):
            conn.execute(insert(OFFER), self.new_offers[start : start + CHUNK])
        if self.closed_observations:
            stmt = (
                update(OBS)
                .where(OBS.c.id == bindparam("_obs"))
                .values(valid_to=self.now, version_to=version)
            )
            conn.execute(stmt, [{"_obs": i} for i in self.closed_observations])
        for start in range(0, len(self.new_observations), CHUNK):
            conn.execute(insert(OBS), self.new_observations[start : start + CHUNK])
        self._write_updates(version)

    def _write_updates(self, version: int) -> None:
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for item in self.offer_updates:
            params = {k: v for k, v in item.items() if not k.startswith("_")}
            if item.get("_withdraw"):
                params["withdrawn_version"] = version
            elif item["_changed"]:
                params["last_changed_version"] = version
            names = tuple(sorted(params))
            bound = {f"p_{k}": v for k, v in params.items()}
            bound["p__id"] = item["_id"]
            groups.setdefault(names, []).append(bound)
        for names, batch in groups.items():
            values = {n: bindparam(f"p_{n}") for n in names}
            stmt = update(OFFER).where(OFFER.c.id == bindparam("p__id")).values(**values)
            self.conn.execute(stmt, batch)
