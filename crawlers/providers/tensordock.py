"""TensorDock marketplace: the cheapest GPU price per GPU model and country.

``GET /api/v0/client/deploy/hostnodes`` (public, no key) answers ``{"success": true,
"hostnodes": {<host id>: {"location": {city, region, country}, "specs": {"gpu": {<gpu id>:
{amount, price, vram}}, "cpu": {amount, price}, "ram": {amount, price}, "storage": {amount,
price}}, "status": {"online": ...}}}}``; one answer, no paging.
Docs: https://documenter.getpostman.com/view/20973002/2s8YzMYRDc

TensorDock prices by component: ``specs.gpu.<id>.price`` is USD per GPU-hour, and vCPUs,
RAM and storage are billed on top by the unit. Offers are that **GPU component price**
(``price_per`` gpu, one GPU): hosts come and go, so, as with Vast.ai, one offer per (GPU id,
country) whose price is the cheapest among online hosts with a free GPU of that kind; sku =
the GPU id (``geforcertx4090-pcie-24gb``), region = the ISO country code read from the
host's ``location.country`` (a country name), ``unknown`` when it names none. The GPU id
spells model, form factor and memory; :data:`MODELS` turns the model part into a name.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import plain, response_json
from schema.codes import country_code

PRICING_URL = "https://marketplace.tensordock.com/deploy"
UNKNOWN_REGION = "unknown"
MODELS = {
    "h100": "H100",
    "a100": "A100",
    "l40s": "L40S",
    "l40": "L40",
    "a40": "A40",
    "v100": "Tesla V100",
    "rtxa6000": "RTX A6000",
    "rtxa5000": "RTX A5000",
    "rtxa4000": "RTX A4000",
    "geforcertx4090": "GeForce RTX 4090",
    "geforcertx3090": "GeForce RTX 3090",
}


def gpu_name(gpu_id: str) -> tuple[str, str | None]:
    """ "a100-pcie-80gb" -> ("A100 PCIe 80GB", "80"); unknown ids pass on as written."""
    model, _, rest = gpu_id.partition("-")
    form, _, memory = rest.partition("-")
    if model not in MODELS or not memory.lower().endswith("gb"):
        return gpu_id, None
    form = "PCIe" if form.lower() == "pcie" else form.upper()
    return f"{MODELS[model]} {form} {memory[:-2]}GB", memory[:-2]


class TensorDock(ApiSource):
    name = "tensordock"
    provider = "tensordock"
    base_url = "https://marketplace.tensordock.com"
    docs_url = "https://documenter.getpostman.com/view/20973002/2s8YzMYRDc"
    terms_url = "https://www.tensordock.com/terms"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}/api/v0/client/deploy/hostnodes")

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        payload = response_json(response)
        if not isinstance(payload, dict) or not isinstance(payload.get("hostnodes"), dict):
            raise LayoutChanged("expected {'hostnodes': {<host id>: ...}}")
        cheapest: dict[tuple[str, str], Decimal] = {}
        for host in payload["hostnodes"].values():
            if not host["status"]["online"]:
                continue
            country = country_code(host["location"]["country"] or "") or UNKNOWN_REGION
            for gpu_id, gpu in host["specs"]["gpu"].items():
                price = Decimal(str(gpu["price"]))
                key = (gpu_id, country)
                if (
                    gpu["amount"] > 0
                    and price > 0
                    and (key not in cheapest or price < cheapest[key])
                ):
                    cheapest[key] = price
        for (gpu_id, country), price in sorted(cheapest.items()):
            name, memory = gpu_name(gpu_id)
            yield {
                "sku": gpu_id,
                "gpu_name_raw": name,
                "gpu_count": 1,
                "gpu_memory_gb": memory,
                "region": country,
                "country": None if country == UNKNOWN_REGION else country,
                "price_kind": "on_demand",
                "unit": "hour",
                "price_per": "gpu",
                "amount": plain(price),
                "source_url": PRICING_URL,
            }
