"""Oracle Cloud Infrastructure GPU shapes from the public price list API (no auth).

``GET /pls/apex/cetools/api/v1/products/?currencyCode=USD`` returns the whole list price
book in one answer: ``{"lastUpdated", "items": [{partNumber, displayName, metricName,
serviceCategory, currencyCodeLocalizations: [{currencyCode, prices: [{model, value}]}]}]}``.
Docs: https://docs.oracle.com/en-us/iaas/Content/GSG/Tasks/signingup_topic-Estimating_Costs.htm

OCI bills GPU shapes per GPU-hour (``metricName`` "GPU Per Hour", model
``PAY_AS_YOU_GO``); the host CPU, memory and local NVMe are included. The price book does
not name shapes, so :data:`SHAPES` maps part numbers to the shapes that bill them (one part
may bill several shapes: VM.GPU.A10.1/.2 and BM.GPU.A10.4). Each shape is one offer,
``price_per`` gpu, with its GPU count. Display names are inconsistent ("OCI - Compute - GPU
- H100", "Compute  - GPU - A10"), so identity is the part number, never the name.

Not offers: NVIDIA AI Enterprise rows (per-GPU-hour software licences), Compute
Cloud@Customer rows (on-premises appliances), and rows with other metrics (per node, per
day). A "GPU Per Hour" part in the public GPU categories that the table does not know yet
is still emitted, as one GPU-hour of that part (sku ``gpu-part-<partNumber>``, count 1),
so it shows up in the catalog and in the unmapped report until the table learns its shape.

Region: OCI list prices are the same in every commercial region, and the price book does
not say which regions carry which GPU shape. Each offer is therefore in region ``global``
with no country; listing it under every OCI region would claim GPU availability that the
source does not state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import plain, response_json

PRICING_URL = "https://www.oracle.com/cloud/compute/gpu/pricing/"
GLOBAL_REGION = "global"
GPU_METRIC = "GPU Per Hour"
PAYG = "PAY_AS_YOU_GO"
PUBLIC_GPU_CATEGORIES = frozenset({"Compute - GPU", "Compute - GPU - Other"})
LICENCE_MARKER = "NVIDIA AI Enterprise"
ON_PREMISES_MARKER = "Cloud@Customer"


@dataclass(frozen=True)
class Shape:
    name: str
    gpus: int
    gpu: str
    """GPU name as OCI's shape documentation gives it (mapped by the GPU aliases)."""
    gpu_memory_gb: int
    vcpus: int
    """2 vCPUs per x86 OCPU; 1 per Arm core (GB200's Grace)."""
    memory_gb: int


# partNumber -> shapes billed by it. Shapes: https://docs.oracle.com/en-us/iaas/Content/Compute/References/computeshapes.htm#bm-gpu
SHAPES: dict[str, tuple[Shape, ...]] = {
    "B98415": (Shape("BM.GPU.H100.8", 8, "H100 SXM 80GB", 80, 224, 2048),),
    "B110519": (Shape("BM.GPU.H200.8", 8, "H200 141GB", 141, 224, 3072),),
    "B110978": (Shape("BM.GPU.B200.8", 8, "B200 180GB", 180, 256, 4096),),
    "B110979": (Shape("BM.GPU.GB200.4", 4, "GB200", 186, 144, 960),),
    "B109485": (Shape("BM.GPU.MI300X.8", 8, "MI300X 192GB", 192, 224, 2048),),
    "B109479": (Shape("BM.GPU.L40S.4", 4, "L40S 48GB", 48, 224, 1024),),
    "B95907": (Shape("BM.GPU.A100-v2.8", 8, "A100 SXM4 80GB", 80, 256, 2048),),
    "B92740": (Shape("BM.GPU4.8", 8, "A100 SXM4 40GB", 40, 128, 2048),),
    # "GPU - E4": the E4 (AMD Milan) GPU shape BM.GPU.GM4.8, which OCI also names
    # BM.GPU.A100-v2.8 (release note "BM.GPU.GM4: E4-based GPU compute"; Compute known
    # issues: "BM.GPU.A100-v2.8 appears as both BM.GPU.A100-v2.8 and BM.GPU.GM4.8").
    "B93544": (Shape("BM.GPU.GM4.8", 8, "A100 SXM4 80GB", 80, 256, 2048),),
    # "GPU - H100T": BM.GPU.H100T.8, an H100 shape that OCI's HPC tooling configures
    # exactly as BM.GPU.H100.8 (same eight GPUs and RDMA NICs); its own part and price.
    "B109480": (Shape("BM.GPU.H100T.8", 8, "H100 SXM 80GB", 80, 224, 2048),),
    "B95909": (
        Shape("VM.GPU.A10.1", 1, "A10 24GB", 24, 30, 240),
        Shape("VM.GPU.A10.2", 2, "A10 24GB", 24, 60, 480),
        Shape("BM.GPU.A10.4", 4, "A10 24GB", 24, 128, 1024),
    ),
    "B89734": (
        Shape("VM.GPU3.1", 1, "Tesla V100-SXM2-16GB", 16, 12, 90),
        Shape("VM.GPU3.2", 2, "Tesla V100-SXM2-16GB", 16, 24, 180),
        Shape("VM.GPU3.4", 4, "Tesla V100-SXM2-16GB", 16, 48, 360),
        Shape("BM.GPU3.8", 8, "Tesla V100-SXM2-16GB", 16, 104, 768),
    ),
    "B88518": (Shape("VM.GPU2.1", 1, "Tesla P100 16GB", 16, 24, 72),),
    "B88517": (Shape("BM.GPU2.2", 2, "Tesla P100 16GB", 16, 56, 192),),
}


class OracleCloud(ApiSource):
    name = "oracle"
    provider = "oracle"
    kind = "api"
    schedule = "6h"
    parser_version = "1"
    base_url = "https://apexapps.oracle.com"
    currency = "USD"
    docs_url = (
        "https://docs.oracle.com/en-us/iaas/Content/GSG/Tasks/signingup_topic-Estimating_Costs.htm"
    )
    terms_url = "https://www.oracle.com/cloud/price-list/"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(
            f"{ctx.base_url}/pls/apex/cetools/api/v1/products/",
            params={"currencyCode": self.currency or "USD"},
        )

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        book = response_json(response)
        if not isinstance(book, dict) or not isinstance(book.get("items"), list):
            raise LayoutChanged("expected {'lastUpdated', 'items': [...]}")
        for item in book["items"]:
            if item["metricName"] != GPU_METRIC or not _public_rental(item):
                continue
            part = item["partNumber"]
            amount = _payg_price(item, self.currency or "USD")
            shapes = SHAPES.get(part)
            if shapes is None:
                yield _unknown_part(item, amount)
                continue
            for shape in shapes:
                yield _record(shape, amount)


def _public_rental(item: dict[str, Any]) -> bool:
    name = item["displayName"]
    if LICENCE_MARKER in name or ON_PREMISES_MARKER in name:
        return False
    return item["partNumber"] in SHAPES or item["serviceCategory"] in PUBLIC_GPU_CATEGORIES


def _payg_price(item: dict[str, Any], currency: str) -> Decimal | None:
    """The one pay-as-you-go price in ``currency``; None (the record is rejected) otherwise."""
    for localization in item["currencyCodeLocalizations"]:
        if localization["currencyCode"] == currency:
            values = [p["value"] for p in localization["prices"] if p["model"] == PAYG]
            if len(values) == 1 and values[0] is not None:
                return plain(Decimal(values[0]))
    return None


def _record(shape: Shape, amount: Decimal | None) -> RawRecord:
    return {
        "sku": shape.name,
        "gpu_name_raw": shape.gpu,
        "gpu_count": shape.gpus,
        "gpu_memory_gb": shape.gpu_memory_gb,
        "vcpus": shape.vcpus,
        "memory_gb": shape.memory_gb,
        "region": GLOBAL_REGION,
        "price_kind": "on_demand",
        "unit": "hour",
        "price_per": "gpu",
        "amount": amount,
        "source_url": PRICING_URL,
        "bare_metal": shape.name.startswith("BM."),
    }


def _unknown_part(item: dict[str, Any], amount: Decimal | None) -> RawRecord:
    chip = item["displayName"].rsplit(" - ", 1)[-1].strip()
    return {
        "sku": f"gpu-part-{item['partNumber']}",
        "gpu_name_raw": chip,
        "gpu_count": 1,
        "region": GLOBAL_REGION,
        "price_kind": "on_demand",
        "unit": "hour",
        "price_per": "gpu",
        "amount": amount,
        "source_url": PRICING_URL,
    }
