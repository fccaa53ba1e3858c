"""Nebius AI Cloud prices, https://nebius.com/prices (2026 layout).

Page quirks (see docs/sources/web-pages.md and fixtures/nebius-web/):

- Gravity UI "page-constructor" highlight tables: ``div.pc-highlight-table-block__row``
  rows of ``__cell`` divs, one header row in ``__head``. Columns are found by header
  text: ``Item``, ``vCPUs``, ``RAM, GB`` and price columns such as
  ``Preemptible, GPU-hour`` (spot) and ``On-demand, GPU-hour``. Prices are per GPU-hour.
- Later 2026 pages add a future-dated column (``GPU-hour (Effective October 1, 2026)``)
  and move preemptible prices to their own table (``Spot price, GPU-hour*``): the
  current column is used, the future-dated one skipped.
- Non-prices: ``––`` and a ``Contact us`` link (GB200/GB300 NVL72): no offer.
- ``from $1.55`` (L40S, whose vCPU/RAM cells are ranges like ``16-192``): a floor.
- Tables without a GPU-hour column (CPU-only instances) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from parsel import Selector
from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number, parse_unit
from crawlers.scrapy import HtmlSpider, cell, column, has_class, text

_BLOCK = "pc-highlight-table-block"


_TABLES = f"//div[{has_class(_BLOCK + '__table')}]"
_HEAD_CELLS = (
    f".//div[{has_class(_BLOCK + '__head')}]//div[{has_class(_BLOCK + '__row')}]"
    f"/div[{has_class(_BLOCK + '__cell')}]"
)
_BODY_ROWS = f".//div[{has_class(_BLOCK + '__body')}]/div[{has_class(_BLOCK + '__row')}]"
_CELLS = f"./div[{has_class(_BLOCK + '__cell')}]"
_CPU_SUFFIX = re.compile(r"\s+with\s+\S+\s+CPU$", re.IGNORECASE)


def _price_kind(header: str) -> str | None:
    """The price kind of a price column, or None for columns to skip."""
    lowered = header.lower()
    if "effective" in lowered:  # a future-dated price, not today's
        return None
    if "preemptible" in lowered or "spot" in lowered:
        return "spot"
    if "on-demand" in lowered or "on demand" in lowered:
        return "on_demand"
    return None


class NebiusWeb(HtmlSpider):
    name = "nebius-web"
    provider = "nebius"
    base_url = "https://nebius.com"
    start_paths = ("/prices",)
    docs_url = "https://docs.nebius.com/compute/resources/pricing"
    terms_url = "https://nebius.com/legal/terms-of-use"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        tables = self.require(response.xpath(_TABLES), "pc-highlight-table-block tables")
        gpu_tables = 0
        for table in tables:
            headers = [text(node) for node in table.xpath(_HEAD_CELLS)]
            prices = [(i, h) for i, h in enumerate(headers) if "gpu-hour" in h.lower()]
            if not prices:
                continue  # CPU-only or storage tables
            gpu_tables += 1
            yield from self._rows(response, table, headers, prices)
        if not gpu_tables:
            self.require([], "price table with a GPU-hour column")

    def _rows(
        self,
        response: TextResponse,
        table: Selector,
        headers: list[str],
        prices: list[tuple[int, str]],
    ) -> Iterator[Any]:
        item = column(headers, "item")
        item = 0 if item is None else item
        vcpus, ram = column(headers, "vcpu"), column(headers, "ram")
        for row in table.xpath(_BODY_ROWS):
            cells: list[str | None] = [text(node) for node in row.xpath(_CELLS)]
            if len(cells) < len(headers):  # a cut row: its last cell may be cut too
                self.logger.warning(
                    "row with %d cells under %d headers: %r", len(cells), len(headers), cells[:1]
                )
                cells = [*cells[:-1], *[None] * (len(headers) - len(cells) + 1)]

            name = cell(cells, item) or ""
            for index, header in prices:
                kind = _price_kind(header)
                if kind is None:
                    continue
                unit, per_gpu = parse_unit(header)
                yield from self.offer(
                    response,
                    sku=name,
                    gpu_name=_CPU_SUFFIX.sub("", name),
                    gpu_count=1,
                    price=cell(cells, index),
                    price_kind=kind,
                    unit=unit,
                    per_gpu=per_gpu,
                    vcpus=parse_number(cell(cells, vcpus)),
                    memory_gb=parse_number(cell(cells, ram)),
                )
