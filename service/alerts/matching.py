"""Which subscriptions an offer change concerns: compiled once, indexed, matched in O(1)-ish.

Each live subscription is compiled into a :class:`Compiled` (typed filter values, its
condition kind and threshold) and filed under every (gpu slug, provider, price kind)
key it can match, with ``None`` as the wildcard of an unfiltered dimension (a GPU family
expands to its slugs). A change then looks up at most 8 keys and checks the few
candidates found there, instead of testing every subscription.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, select

from schema.alerts import Condition, EventType, Subscription, SubscriptionFilters
from schema.catalog import GpuModel
from schema.enums import PriceKind
from service.catalog.locations import at_region, in_countries, outside_countries

SUBSCRIPTION = Subscription.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
HUNDRED = Decimal(100)
# Plain strings (an enum member lookup per match is measurable at 10^5 matches).
PRICE_DROP = EventType.price_drop.value
PRICE_RISE = EventType.price_rise.value
BELOW = EventType.below.value
ABOVE = EventType.above.value
NEW_OFFER = EventType.new_offer.value
WITHDRAWN = EventType.withdrawn.value

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
    locations: tuple[tuple[str, str | None], ...] = ()
    """(region, country) where an offer quoted for several places can run (see
    ``service.catalog.locations``); empty for an offer in one region"""

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
        # the offer's place: its own region / country, or one of its locations
        if self.region is not None and not at_region(c.region, c.locations, self.region):
            return False
        if self.country is not None and not in_countries(c.country, c.locations, (self.country,)):
            return False
        if self.not_country is not None and not outside_countries(
            c.country, c.locations, (self.not_country,)
        ):
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

    def fires(self, c: OfferChange, pct: Decimal | None = None) -> str | None:
        """The event type this change raises for this subscription, if any (``pct``:
        ``c.change_pct``, computed once per change by the caller)."""
        kind, limit = self.condition, self.threshold
        if kind == "price_drop_pct":
            return PRICE_DROP if pct is not None and -pct >= limit else None  # type: ignore[operator]
        if kind == "price_rise_pct":
            return PRICE_RISE if pct is not None and pct >= limit else None  # type: ignore[operator]
        if kind == "below_usd_per_gpu_hour":
            new, old = c.gpu_hour_usd, c.old_gpu_hour_usd
            if new is None or new >= limit:  # type: ignore[operator]
                return None
            crossed = c.kind != "changed" or old is None or old >= limit  # type: ignore[operator]
            return BELOW if crossed else None
        if kind == "above_usd_per_gpu_hour":
            new, old = c.gpu_hour_usd, c.old_gpu_hour_usd
            if new is None or new <= limit:  # type: ignore[operator]
                return None
            crossed = c.kind != "changed" or old is None or old <= limit  # type: ignore[operator]
            return ABOVE if crossed else None
        if kind == "new_offer":
            return NEW_OFFER
        if kind == "withdrawn":
            return WITHDRAWN
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


EVENT_OF = {
    "price_drop_pct": PRICE_DROP,
    "price_rise_pct": PRICE_RISE,
    "below_usd_per_gpu_hour": BELOW,
    "above_usd_per_gpu_hour": ABOVE,
    "new_offer": NEW_OFFER,
    "withdrawn": WITHDRAWN,
}


Range = tuple[Decimal | None, bool, Decimal | None, bool]
"""Thresholds from ``low`` to ``high`` (each included or not; ``None``: unbounded)."""
EVERY: Range = (None, False, None, False)


@dataclass(slots=True)
class Bucket:
    """Subscriptions of one condition under one key, in ascending threshold order."""

    limits: list[Decimal]
    subs: list[Compiled]


class SubscriptionIndex:
    """Live subscriptions with an offer condition, filed by condition and (gpu, provider,
    price kind), each bucket sorted by threshold.

    A change consults only the conditions it can fire (a price that fell cannot fire a
    rise) and, within a bucket, only the threshold range that fires (bisection): the
    result is exactly that of testing :meth:`Compiled.fires` and :meth:`Compiled.accepts`
    on every subscription, at a fraction of the cost."""

    def __init__(self, compiled: Iterable[Compiled]) -> None:
        self.size = 0
        filed: dict[str, dict[IndexKey, list[Compiled]]] = {c: defaultdict(list) for c in EVENT_OF}
        for sub in compiled:
            table = filed.get(sub.condition)
            if table is None:
                continue  # not an offer condition (certifications)
            self.size += 1
            for gpu in sub.gpus if sub.gpus is not None else (None,):
                table[(gpu, sub.provider, sub.price_kind)].append(sub)
        self._tables: dict[str, dict[IndexKey, Bucket]] = {}
        for condition, table in filed.items():
            buckets = {}
            for key, subs in table.items():
                subs.sort(key=lambda s: (s.threshold or 0, s.id))
                buckets[key] = Bucket([s.threshold or Decimal(0) for s in subs], subs)
            self._tables[condition] = buckets

    @property
    def wants_withdrawals(self) -> bool:
        return bool(self._tables["withdrawn"])

    @staticmethod
    def _ranges(c: OfferChange, pct: Decimal | None) -> list[tuple[str, Range]]:
        """The conditions a change can fire, each with the threshold range that fires
        (the ends exactly as :meth:`Compiled.fires` compares)."""
        if c.kind == "withdrawn":
            return [("withdrawn", EVERY)]
        new, old = c.gpu_hour_usd, c.old_gpu_hour_usd
        out: list[tuple[str, Range]] = []
        if c.kind == "changed":
            if pct is not None and pct < 0:
                out.append(("price_drop_pct", (None, False, -pct, True)))  # t <= -pct
            if pct is not None and pct > 0:
                out.append(("price_rise_pct", (None, False, pct, True)))  # t <= pct
            if new is not None and old is not None:
                if new < old:
                    out.append(("below_usd_per_gpu_hour", (new, False, old, True)))  # new<t<=old
                if new > old:
                    out.append(("above_usd_per_gpu_hour", (old, True, new, False)))  # old<=t<new
                return out
        else:
            out.append(("new_offer", EVERY))
        if new is not None:  # a first price (or no comparable old one)
            out.append(("below_usd_per_gpu_hour", (new, False, None, False)))  # new < t
            out.append(("above_usd_per_gpu_hour", (None, False, new, False)))  # t < new
        return out

    @staticmethod
    def _slice(bucket: Bucket, bounds: Range) -> list[Compiled]:
        low, low_included, high, high_included = bounds
        limits = bucket.limits
        begin = 0
        if low is not None:
            begin = (bisect_left if low_included else bisect_right)(limits, low)
        end = len(limits)
        if high is not None:
            end = (bisect_right if high_included else bisect_left)(limits, high)
        return bucket.subs[begin:end]

    def match(self, changes: Iterable[OfferChange]) -> Iterator[tuple[Compiled, OfferChange, str]]:
        """(subscription, change, event type) for every event the changes raise."""
        tables = self._tables
        for change in changes:
            gpus = (change.gpu_slug, None) if change.gpu_slug is not None else (None,)
            keys = [
                (gpu, provider, price_kind)
                for gpu in gpus
                for provider in (change.provider, None)
                for price_kind in (change.price_kind, None)
            ]
            for condition, bounds in self._ranges(change, change.change_pct):
                table = tables[condition]
                if not table:
                    continue
                event = EVENT_OF[condition]
                for key in keys:
                    bucket = table.get(key)
                    if bucket is None:
                        continue
                    for sub in self._slice(bucket, bounds):
                        if sub.accepts(change):
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
        fast = compile_stored(sub_id, channel, filters, condition, families)
        if fast is not None:
            compiled.append(fast)
            continue
        try:  # anything unusual goes through the models, as when it was created
            parsed = (
                SubscriptionFilters.model_validate(filters or {}),
                Condition.model_validate(condition or {}),
            )
        except ValidationError:
            continue  # never let one stored oddity stop an ingest
        compiled.append(compile_subscription(sub_id, channel, *parsed, families))
    return compiled


_SLUG = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_COUNTRY = re.compile(r"[A-Z]{2}")
_PRICE_KINDS = frozenset(kind.value for kind in PriceKind)
_TEXT_FILTERS = {
    "gpu": lambda v: _SLUG.fullmatch(v) is not None and v == v.lower(),
    "provider": lambda v: _SLUG.fullmatch(v) is not None,
    "source": lambda v: _SLUG.fullmatch(v) is not None,
    "region": lambda v: 1 <= len(v) <= 100,
    "country": lambda v: _COUNTRY.fullmatch(v) is not None,
    "not_country": lambda v: _COUNTRY.fullmatch(v) is not None,
    "price_kind": lambda v: v in _PRICE_KINDS,
}
_COUNT_FILTERS = ("min_gpus", "max_gpus", "min_gpu_memory_gb")
_NUMBER_CONDITIONS = {
    # name: (exclusive lower bound, inclusive upper bound)
    "price_drop_pct": (Decimal(0), Decimal(1000)),
    "price_rise_pct": (Decimal(0), Decimal(1000)),
    "below_usd_per_gpu_hour": (Decimal(0), Decimal(1_000_000)),
    "above_usd_per_gpu_hour": (Decimal(0), Decimal(1_000_000)),
}


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    try:
        number = Decimal(value)
    except ArithmeticError:
        return None
    return number if number.is_finite() else None


def compile_stored(
    sub_id: int,
    channel: str,
    filters: Any,
    condition: Any,
    families: dict[str, frozenset[str]],
) -> Compiled | None:
    """Compile a stored subscription in the canonical form the API stores (what
    ``model_dump(mode="json", exclude_none=True)`` wrote) without the pydantic models;
    ``None`` for anything else, which then goes through the models."""
    if not isinstance(filters, dict) or not isinstance(condition, dict) or len(condition) != 1:
        return None
    [(kind, value)] = condition.items()
    threshold: Decimal | None = None
    if kind in _NUMBER_CONDITIONS:
        threshold = _number(value)
        low, high = _NUMBER_CONDITIONS[kind]
        if threshold is None or not low < threshold <= high:
            return None
    elif kind not in ("new_offer", "withdrawn") or value is not True:
        return None
    values: dict[str, Any] = {}
    for name, value in filters.items():
        check = _TEXT_FILTERS.get(name)
        if check is not None:
            if not isinstance(value, str) or not check(value):
                return None
            values[name] = value
        elif name in _COUNT_FILTERS:
            number = _number(value)
            if number is None or not 0 <= number <= 1024:
                return None
            values[name] = number
        elif name == "max_price_per_gpu_hour":
            number = _number(value)
            if number is None or not 0 < number <= 1_000_000:
                return None
            values[name] = number
        elif name == "bare_metal" and isinstance(value, bool):
            values[name] = value
        else:
            return None
    fewest, most = values.get("min_gpus"), values.get("max_gpus")
    if fewest is not None and most is not None and fewest > most:
        return None
    gpu = values.get("gpu")
    return Compiled(
        id=sub_id,
        channel=channel,
        condition=kind,
        threshold=threshold,
        gpus=None if gpu is None else frozenset({gpu}) | families.get(gpu, frozenset()),
        provider=values.get("provider"),
        source=values.get("source"),
        region=values.get("region"),
        country=values.get("country"),
        not_country=values.get("not_country"),
        price_kind=values.get("price_kind"),
        min_gpus=values.get("min_gpus"),
        max_gpus=values.get("max_gpus"),
        min_gpu_memory_gb=values.get("min_gpu_memory_gb"),
        bare_metal=values.get("bare_metal"),
        max_price=values.get("max_price_per_gpu_hour"),
    )


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
            "locations": [{"region": r, "country": c} for r, c in change.locations],
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
