"""CUDO Compute API: bare-metal machine types and their hourly prices per data centre.

``GET /v1/machines-types?pageNumber=<n>&pageSize=<size>`` (sic, "machines") answers
``{"pageNumber", "pageSize", "totalCount", "machineTypes": [{id, dataCenterId, architecture,
cpuModel, cpuCores, cpuSpeedMhz, memoryGib, disks, diskSizeGib, gpus, gpuModelId,
machinesFree, networkType, prices: [{dataCenterId, machineTypeId, commitmentTerm, priceHr:
{value}, ipv4PriceHr: {value}}]}]}``, prices as decimal strings. The docs require a Bearer key.
Docs: https://www.cudocompute.com/docs/api/machines/list-machine-types

Pages are numbered from 1 (the docs do not say; assumed) and followed while ``pageNumber ×
pageSize`` is below ``totalCount`` and the page was not empty. One offer per machine type
(one data centre each) and ``COMMITMENT_TERM_NONE`` price: the on-demand price of the whole
machine. Other commitment terms are not read (their names are not documented). A machine type
without GPUs is not an offer. ``gpuModelId`` (``nvidia-h100``) names neither memory nor form
factor, so :data:`GPUS` does; an unknown id passes on as written (reported unmapped).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import response_json

PRICING_URL = "https://www.cudocompute.com/pricing"
PAGE_SIZE = 10
ON_DEMAND = "COMMITMENT_TERM_NONE"

# gpuModelId -> the GPU as Cudo's bare-metal servers carry it (HGX boards: SXM)
GPUS: dict[str, tuple[str, int]] = {
    "nvidia-h200": ("NVIDIA H200 SXM 141GB", 141),
    "nvidia-h100": ("NVIDIA H100 SXM 80GB", 80),
    "nvidia-a100": ("NVIDIA A100 SXM 80GB", 80),
    "nvidia-l40s": ("NVIDIA L40S 48GB", 48),
    "nvidia-a40": ("NVIDIA A40 48GB", 48),
    "nvidia-rtx-a6000": ("NVIDIA RTX A6000 48GB", 48),
}


def machine_types_url(base_url: str, page: int = 1) -> str:
    query = {"pageNumber": str(page), "pageSize": str(PAGE_SIZE)}
    return f"{base_url}/v1/machines-types?{urlencode(query)}"


class Cudo(ApiSource):
    name = "cudo"
    provider = "cudo"
    base_url = "https://rest.compute.cudo.org"
    credential = "cudo_api_key"
    docs_url = "https://www.cudocompute.com/docs/api/machines/list-machine-types"
    terms_url = "https://www.cudocompute.com/legal/terms-of-service"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(machine_types_url(ctx.base_url))

    def headers(self, ctx: Context) -> dict[str, str]:
        return {"Authorization": f"Bearer {ctx.credential}"} if ctx.credential else {}

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        payload = response_json(response)
        if not isinstance(payload, dict) or not isinstance(payload.get("machineTypes"), list):
            raise LayoutChanged("expected {'machineTypes': [...], 'totalCount': ...}")
        for machine in payload["machineTypes"]:
            if machine["gpus"] > 0:
                for price in machine["prices"]:
                    if price["commitmentTerm"] == ON_DEMAND:
                        yield self._record(machine, price)
        page, size = int(payload["pageNumber"]), int(payload["pageSize"])
        if payload["machineTypes"] and page * size < int(payload["totalCount"]):
            yield Request(machine_types_url(ctx.base_url, page + 1))

    @staticmethod
    def _record(machine: dict[str, Any], price: dict[str, Any]) -> RawRecord:
        gpu_name, memory = GPUS.get(machine["gpuModelId"], (machine["gpuModelId"], None))
        return {
            "sku": machine["id"],
            "gpu_name_raw": gpu_name,
            "gpu_count": machine["gpus"],
            "gpu_memory_gb": memory,
            "vcpus": machine["cpuCores"],
            "memory_gb": machine["memoryGib"],
            "region": price.get("dataCenterId") or machine["dataCenterId"],
            "price_kind": "on_demand",
            "unit": "hour",
            "price_per": "instance",
            "amount": price["priceHr"]["value"],  # a decimal string, as published
            "bare_metal": True,
            "source_url": PRICING_URL,
        }
