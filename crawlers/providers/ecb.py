"""European Central Bank euro foreign exchange reference rates (daily XML feed).

https://www.ecb.europa.eu/stats/policy_and_exchange_rates/euro_reference_exchange_rates/
The 90-day file carries every business day, so one fetch also fills gaps after downtime.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import date
from decimal import Decimal, InvalidOperation

from crawlers.base import (
    ApiSource,
    Context,
    LayoutChanged,
    RawRecord,
    Request,
    Response,
    SourceError,
)
from schema.fx import MAX_FX_DAY_MOVE

NS = "{http://www.ecb.int/vocabulary/2002-08-01/eurofxref}"


class EcbRates(ApiSource):
    name = "ecb"
    provider = "ecb"
    kind = "fx"
    schedule = "1d"
    base_url = "https://www.ecb.europa.eu"
    currency = None
    docs_url = "https://www.ecb.europa.eu/stats/eurofxref/"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}/stats/eurofxref/eurofxref-hist-90d.xml")

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        root = ET.fromstring(response.body)  # noqa: S314 (expat >= 2.4 refuses entity bombs)
        days = root.findall(f"{NS}Cube/{NS}Cube")
        if not days:
            raise LayoutChanged("no <Cube time=...> elements")
        neighbour: dict[str, tuple[date, Decimal]] = {}
        """Per currency: the day and rate last seen in the feed (the next day: newest first).
        A feed's new days are also checked against the stored rates when stored
        (``service.catalog.fx.check_against_stored``: a one-day feed has no neighbour here)."""
        for day in days:
            try:
                when = date.fromisoformat(day.attrib["time"])
            except (KeyError, ValueError):
                raise LayoutChanged(f"bad Cube time {day.attrib.get('time')!r}") from None
            for cube in day.findall(f"{NS}Cube"):
                try:
                    rate = Decimal(cube.attrib["rate"])
                    currency = cube.attrib["currency"].upper()
                except (KeyError, InvalidOperation):
                    raise LayoutChanged(f"bad rate element {cube.attrib!r}") from None
                if len(currency) != 3 or not rate.is_finite() or rate <= 0:
                    raise LayoutChanged(f"bad rate element {cube.attrib!r}")
                seen = neighbour.get(currency)
                if (
                    seen is not None
                    and not 1 / MAX_FX_DAY_MOVE <= rate / seen[1] <= MAX_FX_DAY_MOVE
                ):
                    raise SourceError(
                        "implausible rate",
                        f"{currency} {rate} on {when} next to {seen[1]} on {seen[0]}",
                    )
                neighbour[currency] = (when, rate)
                yield {"rate_date": when, "currency": currency, "per_eur": rate}
