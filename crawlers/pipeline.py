"""The ordered validation and normalization steps, used by spiders AND API clients.

Each step is a small pure function over a raw record (a dict of OfferRecord fields).
Structural failures reject the record with a reason; quality problems (an unknown GPU
name, an unknown region) keep it and are counted, so a human can add the alias.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import ValidationError

from crawlers.normalize.reference import ReferenceIndex, reference_index
from schema.records import OFFER_RECORDS, OfferRecord, describe_validation_error

Step = Callable[[dict[str, Any], "SourceMeta", "PipelineStats", ReferenceIndex], dict[str, Any]]


@dataclass(frozen=True)
class SourceMeta:
    """Metadata a source declares once; stamped on each of its records."""

    name: str
    provider: str
    currency: str | None = None
    default_url: str | None = None
    tax_included: bool | None = None


@dataclass
class PipelineStats:
    seen: int = 0
    valid: int = 0
    rejected: int = 0
    unmapped: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)


@dataclass
class Rejected:
    position: int
    reason: str
    record: dict[str, Any]


def stamp(record: dict[str, Any], meta: SourceMeta, *_: Any) -> dict[str, Any]:
    record.setdefault("provider", meta.provider)
    record["source"] = meta.name
    if meta.currency and not record.get("currency"):
        record["currency"] = meta.currency
    if meta.default_url and not record.get("source_url"):
        record["source_url"] = meta.default_url
    if meta.tax_included is not None:
        record.setdefault("tax_included", meta.tax_included)
    return record


def map_gpu(
    record: dict[str, Any], meta: SourceMeta, stats: PipelineStats, ref: ReferenceIndex
) -> dict[str, Any]:
    """Name the model a raw GPU name states. One picked by a family default is left to
    ingest, which resolves it again against the catalog and marks the offer inferred."""
    raw = record.get("gpu_name_raw")
    if not record.get("gpu_model") and raw:
        found = ref.resolve_gpu(str(raw), _memory(record.get("gpu_memory_gb")))
        if found.slug is None:
            stats.unmapped[f"gpu:{raw}"] += 1
        elif not found.inferred:
            record["gpu_model"] = found.slug
    return record


def _memory(value: Any) -> Decimal | None:
    """A record's GPU memory as the parser's hint (None unless a finite number: validation
    rejects the rest with its reason)."""
    try:
        memory = None if value is None or isinstance(value, bool) else Decimal(str(value))
    except InvalidOperation:
        return None
    return memory if memory is not None and memory.is_finite() else None


def map_region(
    record: dict[str, Any], meta: SourceMeta, stats: PipelineStats, ref: ReferenceIndex
) -> dict[str, Any]:
    region = record.get("region")
    if region is None:
        return record
    country = ref.country(str(record.get("provider")), str(region))
    if country is None:
        if not record.get("country") and region != "global":
            stats.unmapped[f"region:{record.get('provider')}/{region}"] += 1
    elif not record.get("country"):
        record["country"] = country
    return record


STEPS: tuple[Step, ...] = (stamp, map_gpu, map_region)

VALIDATION_BATCH = 5_000
"""Records :meth:`Pipeline.run` validates in one call."""


class Pipeline:
    def __init__(self, meta: SourceMeta, reference: ReferenceIndex | None = None) -> None:
        self.meta = meta
        self.reference = reference or reference_index()
        self.stats = PipelineStats()
        self._position = 0
        self.payload_of: dict[int, int] = {}
        """id(OfferRecord) -> index of the raw payload it came from, when known (filled by
        :meth:`run`, whose caller holds every record; :meth:`batches` hands each one's
        payload index beside it instead)."""

    def process(self, raw: dict[str, Any]) -> OfferRecord | Rejected:
        """One raw record through the steps and validation (a spider's item)."""
        position, record, payload = self._prepared(raw)
        result = self._validated(position, record)
        if isinstance(payload, int) and not isinstance(result, Rejected):
            self.payload_of[id(result)] = payload
        return result

    def run(self, raws: Iterable[dict[str, Any]]) -> tuple[list[OfferRecord], list[Rejected]]:
        """Every raw record, in order: the valid ones and the rejected ones (each valid
        one's payload index in :attr:`payload_of`). See :meth:`batches`."""
        records: list[OfferRecord] = []
        rejected: list[Rejected] = []
        payload_of = self.payload_of
        for offers, payloads, refused in self.batches(raws):
            for offer, payload in zip(offers, payloads, strict=True):
                if isinstance(payload, int):
                    payload_of[id(offer)] = payload
            records += offers
            rejected += refused
        return records, rejected

    def batches(
        self, raws: Iterable[dict[str, Any]]
    ) -> Iterator[tuple[list[OfferRecord], list[Any], list[Rejected]]]:
        """The raw records, :data:`VALIDATION_BATCH` at a time, in order: each batch's
        valid records, each one's payload index (its raw record's ``_payload``, None when
        it has none) and the batch's rejected records. A batch is validated by one
        pydantic-core call (a batch holding an invalid record is validated again one by
        one, for each one's reason): the same records and rejections as :meth:`process`
        one by one. Only a batch is held: a crawl read this way is never held whole."""
        batch: list[tuple[int, dict[str, Any], Any]] = []
        for raw in raws:
            batch.append(self._prepared(raw))
            if len(batch) >= VALIDATION_BATCH:
                yield self._validate_batch(batch)
                batch = []
        if batch:
            yield self._validate_batch(batch)

    def _prepared(self, raw: dict[str, Any]) -> tuple[int, dict[str, Any], Any]:
        """The record's position, the record through the steps, and its payload index."""
        position = self._position
        self._position += 1
        self.stats.seen += 1
        record = dict(raw)
        payload = record.pop("_payload", None)
        for step in STEPS:
            record = step(record, self.meta, self.stats, self.reference)
        return position, record, payload

    def _validated(self, position: int, record: dict[str, Any]) -> OfferRecord | Rejected:
        try:
            offer = OfferRecord.model_validate(record)
        except ValidationError as exc:
            reason = describe_validation_error(exc)
            self.stats.rejected += 1
            self.stats.reasons[reason.split(":", 1)[0]] += 1
            return Rejected(position, reason, record)
        self.stats.valid += 1
        return offer

    def _validate_batch(
        self, batch: list[tuple[int, dict[str, Any], Any]]
    ) -> tuple[list[OfferRecord], list[Any], list[Rejected]]:
        try:
            offers = OFFER_RECORDS.validate_python([record for _, record, _ in batch])
        except ValidationError:
            records: list[OfferRecord] = []
            payloads: list[Any] = []
            rejected: list[Rejected] = []
            for position, record, payload in batch:
                result = self._validated(position, record)
                if isinstance(result, Rejected):
                    rejected.append(result)
                else:
                    records.append(result)
                    payloads.append(payload)
            return records, payloads, rejected
        self.stats.valid += len(offers)
        return offers, [payload for _, _, payload in batch], []
