"""Paperspace (DigitalOcean) machine pricing, https://www.paperspace.com/pricing (2024 layout).

Page quirks (see docs/sources/web-pages.md and fixtures/paperspace-web/):

- Webflow cards: ``h1.instance-names`` (``H100``, ``A100-80G``), the price in
  ``h1.instance-price-2`` between a ``$`` and a ``/ hour`` sibling, specs as
  ``<br>``-separated lines in ``p.instance-specs-2``.
- Hidden copies must be ignored: a ``.instance-price-wrap.hide`` template price in
  every card and a hidden legacy grid repeating older GPUs (``visible()`` drops both).
- A starred price (``2.24*``) is a commitment price: the footnote names the term
  ("3-year commitment") and gives the real on-demand price ("On-demand price is
  $5.95/hour"). Both are emitted.
- ``div.pricing-multigpu-info`` lists ``2x 4x 8x``: multi-GPU machines cost the per-GPU
  price times the count, so each is emitted per GPU (``price_per=gpu``) as ``H100x8``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number
from crawlers.scrapy import HtmlSpider, has_class, text, visible
from schema.enums import Unit

_MULTI = re.compile(r"(\d+)\s*[x×](?![a-z])", re.IGNORECASE)
_TERM = re.compile(r"(\d+)[- ]year\s+commitment", re.IGNORECASE)
_ON_DEMAND = re.compile(r"on-demand\s+price\s+is\s+(\$\s*[\d.,]+\s*/\s*\w+)", re.IGNORECASE)
_TERMS = {"1": "reserved_1y", "3": "reserved_3y"}


class PaperspaceWeb(HtmlSpider):
    name = "paperspace-web"
    provider = "paperspace"
    base_url = "https://www.paperspace.com"
    start_paths = ("/pricing",)
    docs_url = "https://docs.digitalocean.com/products/paperspace/machines/details/pricing/"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        names = self.require(
            visible(response.xpath(f"//h1[{has_class('instance-names')}]")),
            "instance cards (h1.instance-names)",
        )
        footnotes = [
            text(p) for p in visible(response.xpath("//p[starts-with(normalize-space(), '*')]"))
        ]
        seen: set[str] = set()
        for node in names:
            name = text(node)
            if not name or name in seen:
                continue
            seen.add(name)
            card = node.xpath(f"ancestor::*[.//h1[{has_class('instance-price-2')}]][1]")
            wraps = visible(card.xpath(f".//*[{has_class('instance-price-wrap')}]"))
            shown = text(wraps[0]) if wraps else None
            figure = (
                text(wraps[0].xpath(f".//h1[{has_class('instance-price-2')}]")) if wraps else ""
            )
            if not any(ch.isdigit() for ch in figure):
                shown = figure  # "Contact sales" sits where the figure goes
            offers = [("on_demand", shown)]
            if figure.endswith("*"):  # a commitment price; the footnote has the rest
                note = next((f for f in footnotes if re.search(rf"\b{re.escape(name)}\b", f)), "")
                term = _TERM.search(note)
                offers = [(_TERMS.get(term.group(1), "reserved") if term else "reserved", shown)]
                on_demand = _ON_DEMAND.search(note)
                if on_demand:
                    offers.append(("on_demand", on_demand.group(1)))
            lines = [
                " ".join(t.split())
                for t in card.xpath(f".//p[{has_class('instance-specs-2')}]//text()").getall()
                if t.strip()
            ]
            spec = {
                key: next((parse_number(v) for v in lines if key in v.lower()), None)
                for key in ("gpu", "vcpu", "ram")
            }
            multi = visible(card.xpath(f".//*[{has_class('pricing-multigpu-info')}]"))
            counts = (
                [1, *(int(n) for n in _MULTI.findall(text(multi[0])) if n != "1")]
                if (multi)
                else [1]
            )
            for count in counts:
                for kind, price in offers:
                    yield from self.offer(
                        response,
                        sku=name if count == 1 else f"{name}x{count}",
                        gpu_name=name,
                        gpu_count=count,
                        price=price,
                        price_kind=kind,
                        unit=Unit.hour,
                        per_gpu=True,
                        gpu_memory_gb=spec["gpu"],
                        vcpus=spec["vcpu"] if count == 1 else None,
                        memory_gb=spec["ram"] if count == 1 else None,
                    )
