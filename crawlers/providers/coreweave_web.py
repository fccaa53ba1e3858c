"""CoreWeave pricing, https://www.coreweave.com/pricing (2026 layout).

Page quirks (see docs/sources/web-pages.md and fixtures/coreweave-web/):

- Webflow CMS grid ``div.table-v2.gpu-pricing``: a header row of ``table-v2-cell``s
  (``GPU Model | GPU Count | VRAM (GB) | vCPUs | System RAM (GB) | Local Storage (TB) |
  On-Demand Price (Per Hour) | Spot Price (Per Hour) | Inference …``), then rows
  ``div.table-row-v2.kubernetes-gpu-pricing`` whose model cell is
  ``h3.table-model-name[data-product]`` (the SKU).
- Prices are per instance-hour. ``N/A`` spot cells and empty cells with a
  ``Contact sales`` link carry no price. The single-GPU inference column is a serverless
  price, not an instance offer: skipped.
- The GPU count of NVL72 racks carries a footnote marker (``4<sup>1</sup>``): ``text()``
  drops ``<sup>``. RAM has thousands commas (``4,096``).
- Every row repeats its values in a mobile block (``span.item-value``,
  ``div.table-meta-value``): only the desktop cells are read, and rows are deduped.
- The region comes from the eyebrow above each table (``REGION: NORTH AMERICA`` ->
  ``north-america``); a table without one is North America, the page's only region in
  2026, so offer identities stay stable. CPU tables (``kubernetes-cpu-pricing``) are
  skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number, parse_unit
from crawlers.scrapy import HtmlSpider, cell, column, has_class, price_columns, slug, text

_TABLES = f"//div[{has_class('table-v2')} and {has_class('gpu-pricing')}]"
_HEADER = f"./div[{has_class('table-v2-header')}]/div[{has_class('table-v2-cell')}]"
_ROWS = f".//div[{has_class('table-row-v2')} and {has_class('kubernetes-gpu-pricing')}]"
_CELLS = f"./div[{has_class('table-v2-cell')}]"


class CoreWeaveWeb(HtmlSpider):
    name = "coreweave-web"
    provider = "coreweave"
    base_url = "https://www.coreweave.com"
    start_paths = ("/pricing",)
    region = "north-america"
    docs_url = "https://docs.coreweave.com/docs/pricing"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        for table in self.require(response.xpath(_TABLES), "GPU table (div.table-v2.gpu-pricing)"):
            eyebrow = text(table.xpath(f"preceding::*[{has_class('eyebrow')}][1]"))
            region = slug(eyebrow.split(":", 1)[-1]) if eyebrow else self.region
            headers = [text(node) for node in table.xpath(_HEADER)]
            count_col, vram_col = column(headers, "gpu count"), column(headers, "vram")
            cpu_col, ram_col = column(headers, "vcpu"), column(headers, "system ram")
            prices = price_columns(headers, on_demand="on-demand", spot="spot")
            for row in table.xpath(_ROWS):
                model = row.xpath(f".//h3[{has_class('table-model-name')}]")
                name = text(model)
                sku = model.attrib.get("data-product") or name
                cells = [text(node) for node in row.xpath(_CELLS)]
                for index, kind in prices:
                    if index is None or not self.once(response, region, sku, kind):
                        continue
                    unit, per_gpu = parse_unit(headers[index])
                    yield from self.offer(
                        response,
                        sku=sku,
                        gpu_name=name,
                        gpu_count=parse_number(cell(cells, count_col)),
                        price=cell(cells, index),
                        price_kind=kind,
                        unit=unit,
                        per_gpu=False if per_gpu is None else per_gpu,
                        region=region,
                        gpu_memory_gb=parse_number(cell(cells, vram_col)),
                        vcpus=parse_number(cell(cells, cpu_col)),
                        memory_gb=parse_number(cell(cells, ram_col)),
                    )
