"""Vultr API: Cloud GPU plans (``type=vcg``) and their hourly prices, no key needed.

``GET /v2/plans?type=vcg&per_page=<n>`` returns ``{"plans": [{id, vcpu_count, ram (MB),
disk, disk_count, bandwidth, monthly_cost, hourly_cost, type, locations, gpu_vram_gb,
gpu_type}], "meta": {"total", "links": {"next", "prev"}}}``; ``meta.links.next`` is the
cursor of the next page ("" on the last). Docs: https://www.vultr.com/api/#tag/plans

Vultr sells slices of one GPU as well as whole GPUs: a plan names the VRAM it gets
(``gpu_vram_gb``), not a GPU count, so the count is that VRAM over the card's memory
(``vcg-a100-1c-6g-4vram`` is 4/80 = 0.05 of an A100). ``gpu_type`` (``NVIDIA_A100``) says
neither memory nor form factor, so :data:`GPUS` does; an unknown type passes on as
written (reported unmapped). One offer per plan and location in ``locations``, one price
for all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import plain, response_json

PRICING_URL = "https://www.vultr.com/pricing/#cloud-gpu"
PER_PAGE = "20"
GPU_COUNT_PLACES = Decimal("0.0001")

# gpu_type -> (GPU name, memory of one card in GB)
GPUS: dict[str, tuple[str, int]] = {
    "NVIDIA_A16": ("NVIDIA A16 16GB", 16),
    "NVIDIA_A40": ("NVIDIA A40 48GB", 48),
    "NVIDIA_A100": ("NVIDIA A100 80GB PCIe", 80),
    "NVIDIA_L40S": ("NVIDIA L40S 48GB", 48),
    "NVIDIA_H100": ("NVIDIA H100 80GB PCIe", 80),
    "AMD_MI300X": ("AMD Instinct MI300X 192GB", 192),
}


def plans_url(base_url: str, cursor: str = "") -> str:
    query = {"type": "vcg", "per_page": PER_PAGE}
    if cursor:
        query["cursor"] = cursor
    return f"{base_url}/v2/plans?{urlencode(query)}"


class Vultr(ApiSource):
    name = "vultr"
    provider = "vultr"
    base_url = "https://api.vultr.com"
    docs_url = "https://www.vultr.com/api/#tag/plans/operation/list-plans"
    terms_url = "https://www.vultr.com/legal/tos/"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(plans_url(ctx.base_url))

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        payload = response_json(response)
        if not isinstance(payload, dict) or not isinstance(payload.get("plans"), list):
            raise LayoutChanged("expected {'plans': [...], 'meta': {...}}")
        for plan in payload["plans"]:
            if plan["type"] == "vcg" and plan["gpu_type"]:
                for location in plan["locations"]:
                    yield self._record(plan, location)
        cursor = payload["meta"]["links"]["next"]
        if cursor:
            yield Request(plans_url(ctx.base_url, cursor))

    @staticmethod
    def _record(plan: dict[str, Any], location: str) -> RawRecord:
        gpu_name, card_gb = GPUS.get(plan["gpu_type"], (plan["gpu_type"], 0))
        vram = Decimal(str(plan["gpu_vram_gb"]))
        count = (vram / card_gb).quantize(GPU_COUNT_PLACES) if card_gb else Decimal(1)
        return {
            "sku": plan["id"],
            "gpu_name_raw": gpu_name,
            "gpu_count": plain(count),
            "gpu_memory_gb": card_gb or None,
            "vcpus": plan["vcpu_count"],
            "memory_gb": plain(Decimal(plan["ram"]) / 1024),
            "region": location,
            "price_kind": "on_demand",
            "unit": "hour",
            "price_per": "instance",
            "amount": plain(Decimal(str(plan["hourly_cost"]))),
            "source_url": PRICING_URL,
        }
