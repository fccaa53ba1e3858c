"""Lambda Cloud API: on-demand instance types and their hourly prices.

``GET /api/v1/instance-types`` (API key as ``Authorization: Bearer``) returns
``{"data": {<type name>: {"instance_type": {name, description, gpu_description,
price_cents_per_hour, specs: {vcpus, memory_gib, storage_gib, gpus}},
"regions_with_capacity_available": [{name, description}]}}}``.
Docs: https://docs-api.lambda.ai/api/cloud#listInstanceTypes

Region rule: Lambda charges one price per instance type whatever the region, and
``regions_with_capacity_available`` is *live capacity*, not a price attribute: it moves
minute by minute and is empty for sold-out types. Offers keyed on it would be withdrawn
and re-added as capacity moves, which would be false history. So each instance type is
one offer in region ``global`` (Lambda's regions span several countries), listed whether
or not it has capacity right now. The capacity list is passed on as the record's
``locations`` (where the type can be launched now): the catalog keeps it as the offer's
locations (``offer_location``, basis ``source``), which may change every crawl without
touching the offer or its prices; an empty list says nothing, and the offer is placed
from reference regions instead (docs/locations.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import plain, response_json

PRICING_URL = "https://lambda.ai/pricing"
GLOBAL_REGION = "global"
_GPU_MEMORY = re.compile(r"\((\d+(?:\.\d+)?)\s*GB", re.IGNORECASE)


class LambdaCloud(ApiSource):
    name = "lambda"
    provider = "lambda"
    base_url = "https://cloud.lambda.ai"
    credential = "lambda_api_key"
    docs_url = "https://docs-api.lambda.ai/api/cloud#listInstanceTypes"
    terms_url = "https://lambda.ai/legal/terms-of-service"
    seed_fixtures = ("instance-types.json",)

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}/api/v1/instance-types")

    def headers(self, ctx: Context) -> dict[str, str]:
        return {"Authorization": f"Bearer {ctx.credential}"} if ctx.credential else {}

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        payload = response_json(response)
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
            raise LayoutChanged("expected {'data': {<instance type>: ...}}")
        for entry in payload["data"].values():
            item = entry["instance_type"]
            if item["specs"]["gpus"]:  # CPU-only types are not GPU offers
                yield self._record(item, entry.get("regions_with_capacity_available") or [])

    @staticmethod
    def _record(item: dict[str, Any], capacity: list[dict[str, Any]]) -> RawRecord:
        specs = item["specs"]
        gpus = specs["gpus"]
        gpu_name = item["gpu_description"]
        memory = _GPU_MEMORY.search(gpu_name or "")
        return {
            "sku": item["name"],
            "gpu_name_raw": gpu_name,
            "gpu_count": gpus,
            "gpu_memory_gb": memory.group(1) if memory else None,
            "vcpus": specs["vcpus"],
            "memory_gb": specs["memory_gib"],
            "region": GLOBAL_REGION,
            "price_kind": "on_demand",
            "unit": "hour",
            "price_per": "instance",
            "amount": plain(Decimal(item["price_cents_per_hour"]) / 100),
            "source_url": PRICING_URL,
            "locations": [region["name"] for region in capacity if region.get("name")] or None,
        }
