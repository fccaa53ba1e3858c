"""RunPod GPU types (GraphQL): Secure Cloud and Community Cloud prices per GPU-hour.

One ``POST /graphql`` (API key as ``Authorization: Bearer``) asks for every GPU type's
prices and, in the same document, for every data centre's compliance list:
``gpuTypes { id displayName memoryInGb secureCloud communityCloud securePrice
communityPrice secureSpotPrice communitySpotPrice … }`` and
``dataCenters { id name location listed compliance }``.
Docs: https://docs.runpod.io/sdks/graphql/manage-pods , https://graphql-spec.runpod.io/

Offers: per GPU type and cloud, sku ``"<gpu type id>/secure"`` or ``"…/community"``, one
GPU (``price_per`` gpu), ``on_demand`` from ``securePrice``/``communityPrice`` and
``spot`` from ``secureSpotPrice``/``communitySpotPrice``; a null or zero price means the
cloud does not sell that GPU and yields nothing. RunPod prices a GPU type the same in every
data centre of a cloud, so the region is ``global`` (country unknown). ``lowestPrice`` is
not asked for: it repeats the cheaper of the two clouds, and its stock status is
availability, not price.

Compliance: the data-centre list (certifications such as ``ISO_IEC_27001``,
``SOC_2_TYPE_2``, ``HIPAA``) yields no offers; :meth:`RunPod.compliance` reads it from the
stored raw payload for a certification loader. A GraphQL error (HTTP 200 with ``errors``)
fails the crawl as ``graphql error``.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from crawlers.base import (
    ApiSource,
    Context,
    LayoutChanged,
    RawRecord,
    Request,
    Response,
    SourceError,
)
from crawlers.normalize.decimal_json import plain, response_json

PRICING_URL = "https://www.runpod.io/pricing"
GLOBAL_REGION = "global"
QUERY = """query GpuCatalog {
  gpuTypes {
    id
    displayName
    manufacturer
    memoryInGb
    maxGpuCount
    secureCloud
    communityCloud
    securePrice
    communityPrice
    secureSpotPrice
    communitySpotPrice
  }
  dataCenters {
    id
    name
    location
    listed
    compliance
  }
}"""
CLOUDS = (
    ("secure", "secureCloud", "securePrice", "secureSpotPrice"),
    ("community", "communityCloud", "communityPrice", "communitySpotPrice"),
)
# RunPod compliance values -> certification schemes; GDPR and RENEWABLE are claims about
# the site, not certifications, and stay only in the raw list.
SCHEMES = {
    "ISO_IEC_27001": "iso27001",
    "ISO_14001": "iso14001",
    "SOC_1_TYPE_2": "soc1_type2",
    "SOC_2_TYPE_2": "soc2_type2",
    "SOC_3_TYPE_2": "soc3",
    "PCI_DSS": "pci_dss",
    "HIPAA": "hipaa",
    "HITRUST": "hitrust",
    "ITAR": "itar",
    "FISMA_HIGH": "fisma_high",
}


def graphql_data(response: Response) -> dict[str, Any]:
    """The ``data`` object of a GraphQL answer; ``errors`` fail as 'graphql error'."""
    payload = response_json(response)
    if not isinstance(payload, dict):
        raise LayoutChanged("a GraphQL answer is a JSON object")
    errors = payload.get("errors")
    if errors:
        messages = "; ".join(
            str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors
        )
        raise SourceError("graphql error", messages[:300])
    data = payload.get("data")
    if not isinstance(data, dict):
        raise LayoutChanged("no 'data' object in the GraphQL answer")
    return data


class RunPod(ApiSource):
    name = "runpod"
    provider = "runpod"
    kind = "api"
    schedule = "1h"
    parser_version = "1"
    base_url = "https://api.runpod.io"
    currency = "USD"
    credential = "runpod_api_key"
    docs_url = "https://graphql-spec.runpod.io/"
    terms_url = "https://www.runpod.io/legal/terms-of-service"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(
            f"{ctx.base_url}/graphql",
            method="POST",
            json={"operationName": "GpuCatalog", "query": QUERY, "variables": {}},
        )

    def headers(self, ctx: Context) -> dict[str, str]:
        return {"Authorization": f"Bearer {ctx.credential}"} if ctx.credential else {}

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        data = graphql_data(response)
        if not isinstance(data["gpuTypes"], list) or not isinstance(data["dataCenters"], list):
            raise LayoutChanged("gpuTypes and dataCenters must be lists")
        for gpu in data["gpuTypes"]:
            for cloud, offered, on_demand, spot in CLOUDS:
                if not gpu[offered]:
                    continue
                for price_kind, field in (("on_demand", on_demand), ("spot", spot)):
                    price = gpu[field]
                    if price is None or Decimal(price) <= 0:
                        continue
                    yield {
                        "sku": f"{gpu['id']}/{cloud}",
                        "gpu_name_raw": gpu["id"],
                        "gpu_count": 1,
                        "gpu_memory_gb": gpu["memoryInGb"],
                        "region": GLOBAL_REGION,
                        "price_kind": price_kind,
                        "unit": "hour",
                        "price_per": "gpu",
                        "amount": plain(Decimal(price)),
                        "source_url": PRICING_URL,
                    }

    def compliance(self, response: Response) -> list[dict[str, Any]]:
        """Per data centre: its id, name, location, listed flag, RunPod's raw compliance
        values and the certification schemes they name. Input: a stored raw payload of
        this source (``Response(url, 200, body)``)."""
        centres = graphql_data(response)["dataCenters"]
        evidence = []
        for centre in centres:
            values = [str(v) for v in centre["compliance"] or []]
            evidence.append(
                {
                    "data_center": centre["id"],
                    "name": centre["name"],
                    "location": centre["location"],
                    "listed": centre.get("listed"),
                    "compliance": values,
                    "schemes": sorted({SCHEMES[v] for v in values if v in SCHEMES}),
                }
            )
        return evidence
