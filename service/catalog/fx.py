"""FX rates: store the ECB's per-euro reference rates; convert any amount to USD."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from sqlalchemy import Connection, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from schema.fx import MAX_FX_DAY_MOVE, FxRate
from service.core.units import q

FX_TABLE = FxRate.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Rate:
    rate_date: date
    currency: str
    per_eur: Decimal


@dataclass(frozen=True)
class Conversion:
    usd_per_unit: Decimal
    rate_date: date | None


def store_rates(
    conn: Connection, rates: Iterable[Rate], source: str, crawl_run_id: int | None
) -> int:
    """Insert rates not yet stored (a published rate never changes); return how many."""
    rows = [
        {
            "rate_date": r.rate_date,
            "currency": r.currency,
            "per_eur": r.per_eur,
            "source": source,
            "crawl_run_id": crawl_run_id,
        }
        for r in rates
    ]
    if not rows:
        return 0
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    count = select(func.count()).select_from(FX_TABLE)
    before = conn.execute(count).scalar() or 0
    for start in range(0, len(rows), 500):
        stmt = insert(FX_TABLE).on_conflict_do_nothing(index_elements=["rate_date", "currency"])
        conn.execute(stmt, rows[start : start + 500])
    return int(conn.execute(count).scalar() or 0) - int(before)


class ImplausibleRates(ValueError):
    """A feed's new rate is too far from the stored rate of the nearest other day."""


def check_against_stored(conn: Connection, rates: Iterable[Rate]) -> None:
    """Refuse (:class:`ImplausibleRates`) a feed whose new rates jump more than
    ``MAX_FX_DAY_MOVE`` from the stored rate of the same currency on the nearest earlier or
    later day: a one-day feed has no neighbour of its own to be checked against."""
    table = FxTable.load(conn)
    for rate in rates:
        series = table.series(rate.currency)
        if not series:
            continue
        at = bisect.bisect_left(series, (rate.rate_date,))
        if at < len(series) and series[at][0] == rate.rate_date:
            continue  # already stored: a published rate never changes, the store keeps it
        for neighbour in series[max(at - 1, 0) : at + 1]:
            ratio = rate.per_eur / neighbour[1]
            if not 1 / MAX_FX_DAY_MOVE <= ratio <= MAX_FX_DAY_MOVE:
                raise ImplausibleRates(
                    f"{rate.currency} {rate.per_eur} on {rate.rate_date} against the stored "
                    f"{neighbour[1]} of {neighbour[0]}"
                )


class FxTable:
    """All known rates in memory (a few thousand rows), answering 'USD per unit on day D'."""

    def __init__(self, rates: Iterable[tuple[date, str, Decimal, str]]) -> None:
        self._by_currency: dict[str, list[tuple[date, Decimal, str]]] = {}
        for rate_date, currency, per_eur, source in rates:
            self._by_currency.setdefault(currency, []).append((rate_date, per_eur, source))
        for series in self._by_currency.values():
            series.sort()

    @classmethod
    def load(cls, conn: Connection) -> FxTable:
        result = conn.execute(
            select(FX_TABLE.c.rate_date, FX_TABLE.c.currency, FX_TABLE.c.per_eur, FX_TABLE.c.source)
        )
        return cls((r[0], r[1], r[2], r[3]) for r in result)

    def series(self, currency: str) -> list[tuple[date, Decimal, str]]:
        """``currency``'s stored (date, per EUR, source), oldest first."""
        return self._by_currency.get(currency, [])

    def _per_eur(self, currency: str, on: date) -> tuple[date, Decimal, str] | None:
        if currency == "EUR":
            return (on, Decimal(1), "identity")
        series = self._by_currency.get(currency)
        if not series:
            return None
        index = bisect.bisect_right(series, (on, Decimal("Infinity"), "\uffff"))
        return series[index - 1] if index else None

    def to_usd(self, currency: str, on: date) -> Conversion | None:
        """USD per one unit of ``currency`` using the latest rates published on or before ``on``."""
        if currency == "USD":
            return Conversion(Decimal(1), None)
        usd = self._per_eur("USD", on)
        other = self._per_eur(currency, on)
        if usd is None or other is None:
            return None
        rate_date = min(usd[0], other[0]) if currency != "EUR" else usd[0]
        return Conversion(q(usd[1] / other[1]), rate_date)
