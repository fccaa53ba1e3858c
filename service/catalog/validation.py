"""A crawl's records validated: each valid record with its identity key, each invalid one
rejected with a reason, and the offers that must not be withdrawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from schema.records import OfferRecord, describe_validation_error
from service.catalog.columns import Key, join_key
from service.catalog.results import CrawlResult, Rejection, safe_excerpt


@dataclass
class Validated:
    records: list[OfferRecord]
    keys: list[Key]
    """The identity of each record, in ``records`` order (computed once)."""
    rejections: list[Rejection]
    protected: set[Key]
    """Keys of offers whose record this crawl rejected: they must not be withdrawn."""
    regions: set[str] = field(default_factory=set)
    """The records' region codes (whether any offer needs locations: see
    service.catalog.locations)."""


def validate(crawl: CrawlResult) -> Validated:
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
    join = join_key
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
                    Rejection(position, describe_validation_error(exc), safe_excerpt(item))
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
                    safe_excerpt(record),
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
                        position, "duplicate offer with a different price", safe_excerpt(record)
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
    return Validated(records, keys, rejections, protected, regions)


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
    return join_key(parts)
