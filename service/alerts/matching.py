"""Which subscriptions an offer change concerns: compiled once, indexed, matched in O(1)-ish.

Each live subscription is compiled into a :class:`Compiled` (typed filter values, its
condition kind and threshold) and filed under every (gpu slug, provider, price kind)
key it can match, with ``None`` as the wildcard of an unfiltered dimension (a GPU family
expands to its slugs). A change then looks up at most 8 keys and checks the few
candidates found there, instead of testing every subscription.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, select

from schema.alerts import Condition, EventType, Subscription, SubscriptionFilters
from schema.catalog import GpuModel

SUBSCRIPTION = Subscription.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
HUNDRED = Decimal(100)

# Change kinds (what ingest did to an offer) -> condition kinds that can fire on them.
CONDITIONS_BY_CHANGE = {
    "changed": (
        "price_drop_pct",
        "price_rise_pct",
        "below_usd_per_gpu_hour",
        "above_usd_per_gpu_hour",
    ),
    "added": ("below_usd_per_gpu_hour", "above_usd_per_gpu_hour", "new_offer"),
    "reopened": ("below_usd_per_gpu_hour", "above_usd_per_gpu_hour", "new_offer"),
    "withdrawn": ("withdrawn",),
}


@dataclass(slots=True)
class OfferChange:
    """One offer as an ingest changed it, with what filters and conditions look at."""

    kind: str
    """added, changed, reopened or withdrawn"""
    offer_id: int
    source: str
    provider: str
    sku: str
    region: str
    price_kind: str
    unit: str
    gpu_slug: str | None
    country: str | None
    gpu_count: Decimal
    gpu_memory_gb: Decimal | None
    bare_metal: bool | None
    currency: str
    amount: Decimal
    """the new price (for a withdrawn offer: its last price)"""
    gpu_hour_usd: Decimal | None
    old_amount: Decimal | None = None
    old_currency: str | None = None
    old_gpu_hour_usd: Decimal | None = None

    @classmethod
    def of_row(cls, kind: str, row: Any) -> OfferChange:
        """From a row of the offer columns in field order (offer_id .. gpu_hour_usd)."""
        return cls(kind, *row)

    @property
    def change_pct(self) -> Decimal | None:
        """Relative change of the quoted price in %, when comparable."""
        if self.old_amount is None or self.old_currency != self.currency or not self.old_amount:
            return None
        return (self.amount - self.old_amount) * HUNDRED / self.old_amount


@dataclass(slots=True)
class Compiled:
    id: int
    channel: str
    condition: str
    threshold: Decimal | None
    gpus: frozenset[str] | None
    provider: str | None
    source: str | None
    region: str | None
    country: str | None
    not_country: str | None
    price_kind: str | None
    min_gpus: Decimal | None
    max_gpus: Decimal | None
    min_gpu_memory_gb: Decimal | None
    bare_metal: bool | None
    max_price: Decimal | None
    scheme: str | None = None
    """cert conditions: the certification scheme watched (None: any)"""

    @property
    def offer_filtered(self) -> bool:
        """Whether any filter other than ``provider`` looks at offers."""
        return any(
            value is not None
            for value in (
                self.gpus,
                self.source,
                self.region,
                self.country,
                self.not_country,
                self.price_kind,
                self.min_gpus,
                self.max_gpus,
                self.min_gpu_memory_gb,
                self.bare_metal,
                self.max_price,
            )
        )

    def selects(self, c: OfferChange) -> bool:
        """Every filter, the indexed ones (gpu, provider, price kind) included."""
        if self.gpus is not None and c.gpu_slug not in self.gpus:
            return False
        if self.provider is not None and c.provider != self.provider:
            return False
        if self.price_kind is not None and c.price_kind != self.price_kind:
            return False
        return self.accepts(c)

    def accepts(self, c: OfferChange) -> bool:
        """The filters (gpu, provider and price kind were settled by the index)."""
        if self.source is not None and c.source != self.source:
            return False
        if self.region is not None and c.region != self.region:
            return False
        if self.country is not None and c.country != self.country:
            return False
        if self.not_country is not None and c.country == self.not_country:
            return False
        if self.min_gpus is not None and c.gpu_count < self.min_gpus:
            return False
        if self.max_gpus is not None and c.gpu_count > self.max_gpus:
            return False
        if self.min_gpu_memory_gb is not None and (
            c.gpu_memory_gb is None or c.gpu_memory_gb < self.min_gpu_memory_gb
        ):
            return False
        if self.bare_metal is not None and c.bare_metal is not self.bare_metal:
            return False
        limit = self.max_price
        return limit is None or (c.gpu_hour_usd is not None and c.gpu_hour_usd <= limit)

    def fires(self, c: OfferChange) -> EventType | None:
        """The event this change raises for this subscription, if any."""
        kind, limit = self.condition, self.threshold
        if kind == "price_drop_pct":
            pct = c.change_pct
            return EventType.price_drop if pct is not None and -pct >= limit else None  # type: ignore[operator]
        if kind == "price_rise_pct":
            pct = c.change_pct
            return EventType.price_rise if pct is not None and pct >= limit else None  # type: ignore[operator]
        if kind == "below_usd_per_gpu_hour":
            new, old = c.gpu_hour_usd, c.old_gpu_hour_usd
            if new is None or new >= limit:  # type: ignore[operator]
                return None
            crossed = c.kind != "changed" or old is None or old >= limit  # type: ignore[operator]
            return EventType.below if crossed else None
        if kind == "above_usd_per_gpu_hour":
            new, old = c.gpu_hour_usd, c.old_gpu_hour_usd
            if new is None or new <= limit:  # type: ignore[operator]
                return None
            crossed = c.kind != "changed" or old is None or old <= limit  # type: ignore[operator]
            return EventType.above if crossed else None
        if kind == "new_offer":
            return EventType.new_offer
        if kind == "withdrawn":
            return EventType.withdrawn
        return None


def compile_subscription(
    sub_id: int,
    channel: str,
    filters: SubscriptionFilters,
    condition: Condition,
    families: dict[str, frozenset[str]],
) -> Compiled:
    gpus: frozenset[str] | None = None
    if filters.gpu:
        gpus = frozenset({filters.gpu}) | families.get(filters.gpu, frozenset())
    return Compiled(
        id=sub_id,
        channel=channel,
        condition=condition.kind,
        threshold=condition.threshold,
        gpus=gpus,
        provider=filters.provider,
        source=filters.source,
        region=filters.region,
        country=filters.country,
        not_country=filters.not_country,
        price_kind=filters.price_kind.value if filters.price_kind else None,
        min_gpus=filters.min_gpus,
        max_gpus=filters.max_gpus,
        min_gpu_memory_gb=filters.min_gpu_memory_gb,
        bare_metal=filters.bare_metal,
        max_price=filters.max_price_per_gpu_hour,
        scheme=condition.scheme,
    )


def gpu_families(conn: Connection) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for slug, family in conn.execute(select(GPU.c.slug, GPU.c.family)):
        if family:
            out[family.lower()].add(slug)
    return {family: frozenset(slugs) for family, slugs in out.items()}


IndexKey = tuple[str | None, str | None, str | None]


class SubscriptionIndex:
    """Live subscriptions, filed by change kind and (gpu, provider, price kind)."""

    def __init__(self, compiled: Iterable[Compiled]) -> None:
        self.size = 0
        self._by_change: dict[str, dict[IndexKey, list[Compiled]]] = {
            kind: defaultdict(list) for kind in CONDITIONS_BY_CHANGE
        }
        for sub in compiled:
            self.size += 1
            for change_kind, conditions in CONDITIONS_BY_CHANGE.items():
                if sub.condition not in conditions:
                    continue
                table = self._by_change[change_kind]
                for gpu in sub.gpus if sub.gpus is not None else (None,):
                    table[(gpu, sub.provider, sub.price_kind)].append(sub)
        self._by_change = {k: dict(v) for k, v in self._by_change.items()}

    @property
    def wants_withdrawals(self) -> bool:
        return bool(self._by_change["withdrawn"])

    def candidates(self, change: OfferChange) -> Iterator[Compiled]:
        table = self._by_change[change.kind]
        if not table:
            return
        get = table.get
        for gpu in (change.gpu_slug, None) if change.gpu_slug is not None else (None,):
            for provider in (change.provider, None):
                for price_kind in (change.price_kind, None):
                    found = get((gpu, provider, price_kind))
                    if found:
                        yield from found

    def match(
        self, changes: Iterable[OfferChange]
    ) -> Iterator[tuple[Compiled, OfferChange, EventType]]:
        for change in changes:
            for sub in self.candidates(change):
                if sub.accepts(change):
                    event = sub.fires(change)
                    if event is not None:
                        yield sub, change, event


def load_compiled(conn: Connection, conditions: Iterable[str] | None = None) -> list[Compiled]:
    """Compile the live subscriptions (stored bodies were validated when created), those
    with one of ``conditions`` only when given."""
    rows = conn.execute(
        select(
            SUBSCRIPTION.c.id,
            SUBSCRIPTION.c.channel,
            SUBSCRIPTION.c.filters,
            SUBSCRIPTION.c.condition,
        ).where(SUBSCRIPTION.c.deleted_at.is_(None))
    ).all()
    if conditions is not None:
        wanted = set(conditions)
        rows = [row for row in rows if isinstance(row[3], dict) and wanted & row[3].keys()]
    if not rows:
        return []
    families = gpu_families(conn)
    compiled = []
    for sub_id, channel, filters, condition in rows:
        try:
            parsed = (
                SubscriptionFilters.model_validate(filters or {}),
                Condition.model_validate(condition or {}),
            )
        except ValidationError:
            continue  # never let one stored oddity stop an ingest
        compiled.append(compile_subscription(sub_id, channel, *parsed, families))
    return compiled


def load_index(conn: Connection) -> SubscriptionIndex:
    """Every live subscription with an offer condition, indexed."""
    return SubscriptionIndex(load_compiled(conn))


def describe(change: OfferChange) -> dict[str, Any]:
    """The JSON-safe offer part of an event payload."""

    def text(value: Decimal | None) -> str | None:
        return None if value is None else format(value.normalize(), "f")

    pct = change.change_pct
    return {
        "offer": {
            "id": change.offer_id,
            "provider": change.provider,
            "source": change.source,
            "sku": change.sku,
            "region": change.region,
            "country": change.country,
            "gpu": change.gpu_slug,
            "gpu_count": text(change.gpu_count),
            "price_kind": change.price_kind,
            "unit": change.unit,
        },
        "change": change.kind,
        "price": {
            "amount": text(change.amount),
            "currency": change.currency,
            "price_per_gpu_hour_usd": text(change.gpu_hour_usd),
        },
        "old_price": None
        if change.old_amount is None
        else {
            "amount": text(change.old_amount),
            "currency": change.old_currency,
            "price_per_gpu_hour_usd": text(change.old_gpu_hour_usd),
        },
        "change_pct": None if pct is None else text(pct.quantize(Decimal("0.01"))),
    }
