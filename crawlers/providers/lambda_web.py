"""Lambda's public pricing page, https://lambda.ai/pricing (2026 layout).

Page quirks (see docs/sources/web-pages.md and fixtures/lambda-web/):

- A tab strip (``button[role=tab]`` labelled ``8x``/``4x``/``2x``/``1x``) sits over one
  table per tab; the GPU count comes from the tab label.
- Rows are ``tr[data-plan]`` with ``td[data-label]`` cells; the price column's label
  (``PRICE/GPU/HR*``) says the price is per GPU-hour.
- ``data-plan`` does not tell A100 40 GB from 80 GB: the VRAM cell does, so it is part of
  the SKU and of the GPU name.
- Only the active tab is server-rendered. The others ship as ``contentHtml`` strings in
  the ``var newIslands = [...]`` bootstrap script; they are parsed the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from parsel import Selector
from scrapy.http import TextResponse

from crawlers.normalize.embedded import assigned_json, find_dicts
from crawlers.normalize.prices import parse_number, parse_unit
from crawlers.scrapy import HtmlSpider, text

_COUNT = re.compile(r"(\d+)\s*x\b", re.IGNORECASE)


class LambdaWeb(HtmlSpider):
    name = "lambda-web"
    provider = "lambda"
    base_url = "https://lambda.ai"
    start_paths = ("/pricing",)
    docs_url = "https://lambda.ai/pricing"
    terms_url = "https://lambda.ai/legal/terms-of-service"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        tabs = {b.attrib.get("id"): text(b) for b in response.xpath('//button[@role="tab"]')}
        tables = self.require(
            response.xpath("//table[.//tr[@data-plan]]"), "pricing table (tr[data-plan] rows)"
        )
        for table in tables:
            panel = table.xpath('ancestor::*[@role="tabpanel"][1]/@aria-labelledby').get()
            yield from self._table(response, table, tabs.get(panel))
        islands = assigned_json(response.text, "newIslands")
        for island in find_dicts(islands, moduleName="TabsIsland") if islands else []:
            for tab in island.get("props", {}).get("tabs", []):
                html = tab.get("contentHtml")
                if isinstance(html, str):
                    yield from self._table(response, Selector(text=html), tab.get("label"))

    def _table(self, response: TextResponse, table: Selector, tab: str | None) -> Iterator[Any]:
        for row in table.xpath(".//tr[@data-plan]"):
            plan = row.attrib["data-plan"].strip()
            cells = {
                c.attrib["data-label"].strip().upper(): c
                for c in row.xpath("./td[@data-label] | ./th[@data-label]")
            }
            count_match = _COUNT.search(tab or "") or _COUNT.search(plan)
            count = count_match.group(1) if count_match else None
            vram = text(cells.get("VRAM/GPU"))
            if not self.once(response, count or "?", plan, vram):  # a tab in HTML and JSON
                continue
            price_label = next((label for label in cells if label.startswith("PRICE")), None)
            unit, per_gpu = parse_unit(price_label)
            gpu_name = f"{plan} {vram}".strip()
            yield from self.offer(
                response,
                sku=f"{count}x {gpu_name}" if count else gpu_name,
                price=text(cells[price_label]) if price_label else None,
                gpu_name=gpu_name,
                gpu_count=count,
                unit=unit,
                per_gpu=per_gpu,
                gpu_memory_gb=parse_number(vram),
                vcpus=parse_number(text(cells.get("VCPUS"))),
                memory_gb=parse_number(text(cells.get("RAM"))),
            )
