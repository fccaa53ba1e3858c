"""What a workload costs over time, per provider and price kind: the instance, and the
hidden costs beside it (internet egress, transfer between regions, storage).

The instance: the cheapest matching offer per GPU-hour of each (provider, price kind).
Hourly kinds bill the hours used; monthly and reserved kinds bill every hour of each whole
term (730 h a month), paid when the term starts. Hidden costs bill every month at the
offer's region's rates (:mod:`service.query.costs`), tiered per month. A hidden cost whose
price is not known is left out of the total and named in ``unknown_costs``: a total is
never made to look complete by counting an unknown price as zero.

``break_even_month`` of a reserved or monthly kind: the first month whose cumulative
on-demand cost (instance and known hidden costs, at the on-demand offer's region) reaches
the reserved option's (its terms and its region's hidden costs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from sqlalchemy import Connection

from service.catalog.fx import FxTable
from service.core.units import HOURS_PER_MONTH, money
from service.query.costs import GB_PER_TB, CostBook, Priced, monthly_usd
from service.query.eligibility import cheapest_by_kind
from service.query.filters import ComplianceSets, OfferFilters

HOURLY_KINDS = {"on_demand", "spot", "low_priority", "interruptible", "serverless"}
"""Billed for the hours used (``hours_per_month``); serverless flex workers for the seconds."""
ALWAYS_ON_KINDS = {"serverless_active"}
"""Billed every hour of every month, used or not (an always-on serverless worker)."""
TERM_HOURS: dict[str, Decimal] = {
    "weekly": Decimal(168),
    "monthly": HOURS_PER_MONTH,
    "reserved_1m": HOURS_PER_MONTH,
    "reserved_6m": 6 * HOURS_PER_MONTH,
    "reserved_1y": 12 * HOURS_PER_MONTH,
    "reserved_3y": 36 * HOURS_PER_MONTH,
}
"""A commitment's term in hours: every hour of each whole term is billed."""
StorageClass = Literal["block", "object"]


@dataclass(frozen=True)
class Workload:
    gpu_count: Decimal = Decimal(8)
    hours_per_month: Decimal = HOURS_PER_MONTH
    months: int = 12
    egress_tb_per_month: Decimal = Decimal(0)
    inter_region_tb_per_month: Decimal = Decimal(0)
    storage_tb: Decimal = Decimal(0)
    storage_class: StorageClass = "block"

    def hidden(self) -> dict[str, tuple[str, Decimal]]:
        """Per reported cost: (its cost kind, GB a month)."""
        return {
            "egress": ("internet_egress", self.egress_tb_per_month * GB_PER_TB),
            "inter_region": ("inter_region", self.inter_region_tb_per_month * GB_PER_TB),
            "storage": (f"{self.storage_class}_storage", self.storage_tb * GB_PER_TB),
        }


def term_cost(per_gpu_hour: Decimal, gpus: Decimal, term_hours: Decimal, months: int) -> Decimal:
    """A commitment bills every hour of each whole term (a week: 168 hours; a month: 730),
    paid when the term starts: ``months`` of use take as many whole terms as cover them."""
    terms = math.ceil(months * HOURS_PER_MONTH / term_hours)
    return per_gpu_hour * gpus * term_hours * terms


def break_even(
    on_demand: Decimal,
    reserved: Decimal,
    work: Workload,
    term_hours: Decimal,
    hidden_on_demand: Decimal = Decimal(0),
    hidden_reserved: Decimal = Decimal(0),
) -> int | None:
    """The first month whose cumulative on-demand cost reaches the reserved option's;
    ``hidden_*``: each option's known hidden costs per month."""
    gpus, hours = work.gpu_count, work.hours_per_month
    for month in range(1, work.months + 1):
        od = (on_demand * gpus * hours + hidden_on_demand) * month
        if od >= term_cost(reserved, gpus, term_hours, month) + hidden_reserved * month:
            return month
    return None


def _hidden(
    book: CostBook, fx: FxTable, on: date, row: dict[str, Any], work: Workload
) -> tuple[dict[str, Priced], Decimal]:
    """Each hidden cost of one offer a month, and the known ones' sum."""
    region = row.get("location_region") or row["region"]
    priced = {
        name: monthly_usd(book, fx, on, row["provider"], region, kind, gb)
        for name, (kind, gb) in work.hidden().items()
    }
    return priced, sum((p.usd for p in priced.values() if p.usd is not None), Decimal(0))


def tco(
    conn: Connection,
    filters: OfferFilters,
    work: Workload,
    *,
    on: date,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """One entry per provider with a matching offer: its options, cheapest total first,
    and the hidden-cost rates they used."""
    rows = cheapest_by_kind(conn, filters, version=version, compliance=compliance)
    book, fx = CostBook.load(conn), FxTable.load(conn)
    by_provider: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_provider.setdefault(row["provider"], {})[row["price_kind"]] = row
    data = []
    for provider, kinds in sorted(by_provider.items()):
        od = kinds.get("on_demand")
        od_hidden = _hidden(book, fx, on, od, work)[1] if od is not None else Decimal(0)
        options, used = [], {}
        for kind, row in sorted(kinds.items()):
            price = row["gpu_hour_usd"]
            priced, monthly = _hidden(book, fx, on, row, work)
            even = None
            if kind in HOURLY_KINDS:
                instance = price * work.gpu_count * work.hours_per_month * work.months
            elif kind in ALWAYS_ON_KINDS:
                instance = price * work.gpu_count * HOURS_PER_MONTH * work.months
            elif kind in TERM_HOURS:
                term = TERM_HOURS[kind]
                instance = term_cost(price, work.gpu_count, term, work.months)
                if od is not None:
                    even = break_even(od["gpu_hour_usd"], price, work, term, od_hidden, monthly)
            else:
                continue
            for p in priced.values():
                if p.rate is not None and p.usd_per_unit is not None:
                    used[(p.rate.kind, p.rate.region)] = p
            costs = {
                name: (money(p.usd * work.months) if p.usd is not None else None)
                for name, p in priced.items()
            }
            options.append(
                {
                    "price_kind": kind,
                    "offer_id": row["id"],
                    "region": row["region"],
                    "price_per_gpu_hour_usd": price,
                    "instance_usd": money(instance),
                    "egress_usd": costs["egress"],
                    "inter_region_usd": costs["inter_region"],
                    "storage_usd": costs["storage"],
                    "total_usd": money(instance + monthly * work.months),
                    "unknown_costs": [p.unknown for p in priced.values() if p.unknown],
                    "break_even_month": even,
                }
            )
        options.sort(key=lambda o: (o["total_usd"], o["price_kind"]))
        rates = [
            {
                **p.rate.document(),  # type: ignore[union-attr]
                "usd_per_unit": p.usd_per_unit,
                "fx_date": p.fx_date,
            }
            for _, p in sorted(used.items())
        ]
        data.append({"provider": provider, "options": options, "hidden_cost_rates": rates})
    return data
