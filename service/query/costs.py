"""Transfer and storage prices per provider and region, read from ``provider_cost``.

A rate is one cost kind of one provider, for one region or for all of them, as tiers;
:meth:`CostBook.rate` picks the region's own rate before the provider-wide one, and
returns None when neither is known (an unknown cost is never taken as zero).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select

from schema.costs import ALL_REGIONS, ProviderCost
from service.catalog.fx import FxTable
from service.core.units import q

COST = ProviderCost.__table__  # type: ignore[attr-defined]
GB_PER_TB = Decimal(1024)
"""1 TB = 1,024 GB, as the providers' transfer and storage prices count it."""


@dataclass(frozen=True)
class CostRate:
    provider: str
    region: str
    """The region it holds in; ``ALL_REGIONS`` (empty) for every region."""
    kind: str
    currency: str
    tiers: tuple[tuple[Decimal, Decimal], ...]
    """(from GB, price per GB or per GB-month), rising."""
    source_url: str
    checked: date
    notes: str | None

    def cost(self, quantity_gb: Decimal) -> Decimal:
        """What ``quantity_gb`` (sent in a month, or stored for a month) costs, in
        ``currency``: each tier bills the GB between its start and the next tier's."""
        total = Decimal(0)
        for index, (start, price) in enumerate(self.tiers):
            if quantity_gb <= start:
                break
            end = self.tiers[index + 1][0] if index + 1 < len(self.tiers) else None
            upper = quantity_gb if end is None else min(quantity_gb, end)
            total += (upper - start) * price
        return total

    def document(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "kind": self.kind,
            "region": self.region or None,
            "currency": self.currency,
            "tiers": [{"from_gb": start, "price": price} for start, price in self.tiers],
            "source_url": self.source_url,
            "checked": self.checked,
            "notes": self.notes,
        }


class CostBook:
    """Every known rate, in memory (a few hundred rows at most)."""

    def __init__(self, rates: list[CostRate]) -> None:
        self._rates = {(r.provider, r.region, r.kind): r for r in rates}

    @classmethod
    def load(cls, conn: Connection, provider: str | None = None) -> CostBook:
        stmt = select(COST)
        if provider is not None:
            stmt = stmt.where(COST.c.provider == provider)
        grouped: dict[tuple[str, str, str], list[Any]] = {}
        for row in conn.execute(stmt).mappings():
            grouped.setdefault((row["provider"], row["region"], row["kind"]), []).append(row)
        return cls(
            [
                CostRate(
                    provider=key[0],
                    region=key[1],
                    kind=key[2],
                    currency=rows[0]["currency"],
                    # sorted here: SQLite keeps exact decimals as text, which sorts 51200
                    # before 10240
                    tiers=tuple(sorted((r["from_gb"], r["price"]) for r in rows)),
                    source_url=rows[0]["source_url"],
                    checked=rows[0]["checked"],
                    notes=rows[0]["notes"],
                )
                for key, rows in grouped.items()
            ]
        )

    def rate(self, provider: str, region: str | None, kind: str) -> CostRate | None:
        if region:
            own = self._rates.get((provider, region, kind))
            if own is not None:
                return own
        return self._rates.get((provider, ALL_REGIONS, kind))

    def of(self, provider: str) -> list[CostRate]:
        return [r for (p, _, _), r in sorted(self._rates.items()) if p == provider]


@dataclass(frozen=True)
class Priced:
    """A monthly cost in USD, or why it is unknown."""

    usd: Decimal | None
    rate: CostRate | None
    usd_per_unit: Decimal | None = None
    fx_date: date | None = None
    unknown: str | None = None


def monthly_usd(
    book: CostBook,
    fx: FxTable,
    on: date,
    provider: str,
    region: str | None,
    kind: str,
    quantity_gb: Decimal,
) -> Priced:
    """What ``quantity_gb`` of ``kind`` costs a month at ``provider`` in ``region``, in USD
    at the reference rate of ``on``. Nothing asked costs nothing, known or not."""
    rate = book.rate(provider, region, kind)
    if quantity_gb == 0:
        return Priced(Decimal(0), rate)
    if rate is None:
        return Priced(None, None, unknown=f"{kind}: no published price known for {provider}")
    conversion = fx.to_usd(rate.currency, on)
    if conversion is None:
        return Priced(None, rate, unknown=f"{kind}: no exchange rate known for {rate.currency}")
    usd = q(rate.cost(quantity_gb) * conversion.usd_per_unit)
    return Priced(usd, rate, conversion.usd_per_unit, conversion.rate_date)
