"""Hyperstack GPU prices, https://www.hyperstack.cloud/gpu-pricing (2025 layout).

Page quirks (see docs/sources/web-pages.md and fixtures/hyperstack-web/):

- HubSpot div "cards" ``div.page-price_card``, one per price kind; the kind is the
  card title's ``h3 > span`` (``On-Demand GPU``, ``Reservation``, ``Spot VM``). Head
  cells are ``page-price_card_head_item<N>``, rows ``page-price_card_row_item`` with
  cells ``page-price_card_row_item_col<N> > span``; columns are found by head text.
- Prices are per GPU-hour (the page says so; the specs are "per GPU"). Values carry
  ``&nbsp;`` noise (``&nbsp;$2.45&nbsp;&nbsp;``), which ``text()`` collapses.
- Reservation cards print ``Starting from`` prices with no term, so no price kind fits:
  they are skipped (logged), not guessed.
- Rows without a form factor (``NVIDIA H100``) and ``NVLink`` rows are the PCIe cards
  (with NVLink bridges): the GPU name says ``PCIe`` so they are not read as SXM. The SKU
  keeps the page's label.
- No location on the page: one price everywhere, region ``global``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number
from crawlers.scrapy import HtmlSpider, cell, column, has_class, text
from schema.enums import Unit

_CARDS = f"//div[{has_class('page-price_card')}]"
_HEAD = (
    f".//div[{has_class('page-price_card_head')}]"
    "/div[starts-with(@class, 'page-price_card_head_item')]"
)
_ROWS = f".//div[{has_class('page-price_card_row_item')}]"
_CELLS = "./div[starts-with(@class, 'page-price_card_row_item_col')]"
_KINDS = (("on-demand", "on_demand"), ("spot", "spot"), ("reserv", None))
_FORM_FACTOR = re.compile(r"\b(SXM\d?|PCIe|NVL)\b", re.IGNORECASE)


def _gpu_name(label: str) -> str:
    if re.search(r"\bNVLink\b", label, re.IGNORECASE):
        return re.sub(r"\s*\bNVLink\b", " PCIe", label, flags=re.IGNORECASE).strip()
    if re.fullmatch(r"(NVIDIA\s+)?[AH]100", label) and not _FORM_FACTOR.search(label):
        return f"{label} PCIe"
    return label


class HyperstackWeb(HtmlSpider):
    name = "hyperstack-web"
    provider = "hyperstack"
    base_url = "https://www.hyperstack.cloud"
    start_paths = ("/gpu-pricing",)
    docs_url = "https://docs.hyperstack.cloud/docs/billing-and-payment/pricing"
    terms_url = "https://www.hyperstack.cloud/terms-and-conditions"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        cards = self.require(response.xpath(_CARDS), "price cards (div.page-price_card)")
        # the spot card has no VRAM column: a model's VRAM is read from the cards that state
        # it (an "A100 SXM" is the 80 GB part only by its VRAM cell)
        vram_of = dict(_stated_vram(cards))
        for card in cards:
            title = text(card.xpath(".//h3[1]/span[1]")).lower()
            kind = next((k for word, k in _KINDS if word in title), None)
            if kind is None:
                self.logger.info("skipped card %r (no price kind with a term)", title)
                continue
            headers = [text(node) for node in card.xpath(_HEAD)]
            model, price = column(headers, "gpu model"), column(headers, "pric")
            vram, ram = column(headers, "vram"), column(headers, "ram", "per gpu")
            cpus = column(headers, "cpu")
            if model is None or price is None:
                self.require([], f"GPU Model/Pricing head cells in the {title!r} card")
            for row in card.xpath(_ROWS):
                cells = [text(node) for node in row.xpath(_CELLS)]
                label = cell(cells, model) or ""
                yield from self.offer(
                    response,
                    sku=label,
                    gpu_name=_gpu_name(label),
                    gpu_count=1,
                    price=cell(cells, price),
                    price_kind=kind,
                    unit=Unit.hour,
                    per_gpu=True,
                    gpu_memory_gb=parse_number(cell(cells, vram)) or vram_of.get(label),
                    vcpus=parse_number(cell(cells, cpus)),
                    memory_gb=parse_number(cell(cells, ram)),
                )


def _stated_vram(cards: Any) -> Iterator[tuple[str, Any]]:
    """(GPU model label, VRAM) from every card with a VRAM column."""
    for card in cards:
        headers = [text(node) for node in card.xpath(_HEAD)]
        model, vram = column(headers, "gpu model"), column(headers, "vram")
        if model is None or vram is None:
            continue
        for row in card.xpath(_ROWS):
            cells = [text(node) for node in row.xpath(_CELLS)]
            if max(model, vram) < len(cells) and (amount := parse_number(cells[vram])):
                yield cells[model], amount
