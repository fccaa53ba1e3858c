"""Huawei Cloud ECS: on-demand GPU flavor prices from the BSS price API, in CNY.

https://support.huaweicloud.com/api-oce/bcloud_01001.html (ListOnDemandResourceRatings,
"查询按需产品价格"), https://support.huaweicloud.com/api-oce/csdp_faq_062502.html (an ECS
on-demand inquiry, the ``product_infos`` used here),
https://support.huaweicloud.com/devg-apisign/api-sign-algorithm-002.html (AK/SK signing,
SDK-HMAC-SHA256).

One signed ``POST /v2/bills/ratings/on-demand-resources`` per region of :data:`REGIONS`,
asking the price of one hour (``usage_factor`` ``Duration``, ``usage_value`` 1,
``usage_measure_id`` 4: hour) of one Linux instance (``resource_spec`` ``<flavor>.linux``) of
each GPU flavor sold there (at most 100 ``product_infos`` a request, as documented). Each
product's ``id`` is ``<region>/<flavor>``: the answer's ``product_rating_results`` carry it
back, so an answer says what it prices. The price is the ``official_website_amount`` (the
list price, 官网价), not ``amount`` (after the account's discounts). ``measure_id`` 1 is yuan;
``currency`` CNY or empty means CNY.

Errors come back as HTTP 4xx/5xx with ``error_code``/``error_msg`` (401/403 "unauthorized",
429 and 5xx retried); a 200 answer with an ``error_code`` other than ``CBC.0000`` fails as
"api error". The API answers an error for the whole request when a product is not sold in
the region ("无法找到产品"), so :data:`REGION_FLAVORS` must list only flavors sold there.

GPU model and count per flavor (:data:`FLAVORS`) are Huawei's flavor tables, "GPU-accelerated
ECSs" (topic en-us_topic_0097289624,
https://support.huaweicloud.com/intl/en-us/productdesc-ecs/en-us_topic_0097289624.html),
read here in the copy Huawei authored for Open Telekom Cloud
(https://github.com/opentelekomcloud-docs/elastic-cloud-server,
umn/source/service_overview/ecs_specifications_and_types/gpu-accelerated_ecss.rst). Which
flavor is sold in which region is not published in a source read here: :data:`REGION_FLAVORS`
is unsourced. P2s (V100 PCIe 32 GB) is left out: the GPU catalog has no such model. The tables
say "V100" with 16 GiB for P2v and NVLink between its GPUs, named here SXM2 (the NVLink form);
P3's "A100 80GB" states no form factor, so the GPU name parser's family default applies and the
offer's model is marked inferred.

Currency and tax: the China site (bss.myhuaweicloud.com) answers in CNY; no source read here
says whether the list price includes VAT, so ``tax_included`` is None.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

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

PATH = "/v2/bills/ratings/on-demand-resources"
ALGORITHM = "SDK-HMAC-SHA256"
CONTENT_TYPE = "application/json"
MAX_PRODUCTS = 100  # product_infos per request (documented maximum)
HOUR = 4  # usage_measure_id of an hour
YUAN = 1  # measure_id of the amounts
REGIONS = ("cn-north-4", "cn-east-3", "cn-south-1", "ap-southeast-1")
# flavor -> (GPU as the flavor table names it, GPU memory GB, GPUs, vCPUs, memory GiB)
FLAVORS: dict[str, tuple[str, str, int, int, int]] = {
    "p2v.2xlarge.8": ("NVIDIA V100 SXM2 16GB", "16", 1, 8, 64),
    "p2v.8xlarge.8": ("NVIDIA V100 SXM2 16GB", "16", 4, 32, 256),
    "pi2.2xlarge.4": ("NVIDIA T4", "16", 1, 8, 32),
    "g6.4xlarge.4": ("NVIDIA T4", "16", 1, 16, 64),
    "g6.20xlarge.7": ("NVIDIA T4", "16", 2, 80, 560),
    "p3.2xlarge.8": ("NVIDIA A100 80GB", "80", 1, 8, 64),
    "p3.16xlarge.8": ("NVIDIA A100 80GB", "80", 8, 64, 512),
}
# region -> GPU flavors asked there (unsourced: see the module docstring)
REGION_FLAVORS: dict[str, tuple[str, ...]] = {
    "cn-north-4": tuple(FLAVORS),
    "cn-east-3": ("p2v.2xlarge.8", "pi2.2xlarge.4", "g6.4xlarge.4", "p3.2xlarge.8"),
    "cn-south-1": ("p2v.2xlarge.8", "pi2.2xlarge.4", "g6.4xlarge.4", "g6.20xlarge.7"),
    "ap-southeast-1": ("pi2.2xlarge.4", "g6.4xlarge.4"),
}
_ID = re.compile(r"^([a-z]{2}-[a-z]+-\d{1,2})/([a-z0-9]{1,8}\.[a-z0-9]{1,12}\.\d{1,2})$")


def product_infos(region: str, flavors: tuple[str, ...]) -> list[dict[str, Any]]:
    """The documented ``DemandProductInfo`` of one hour of each flavor (Linux) in ``region``."""
    return [
        {
            "id": f"{region}/{flavor}",
            "cloud_service_type": "hws.service.type.ec2",
            "resource_type": "hws.resource.type.vm",
            "resource_spec": f"{flavor}.linux",
            "region": region,
            "usage_factor": "Duration",
            "usage_value": 1,
            "usage_measure_id": HOUR,
            "subscription_num": 1,
        }
        for flavor in flavors
    ]


def _uri_encode(text: str) -> str:
    return quote(text, safe="-_.~")


def canonical_request(
    method: str, url: str, headers: Mapping[str, str], payload: bytes
) -> tuple[str, str]:
    """(CanonicalRequest, SignedHeaders) of the APIG AK/SK algorithm: the path ends with "/",
    query parameters sorted and encoded, headers lower-cased and sorted, the body hashed."""
    parts = urlsplit(url)
    path = "/".join(_uri_encode(p) for p in parts.path.split("/"))
    path = path if path.endswith("/") else f"{path}/"
    pairs = sorted(
        (_uri_encode(k), _uri_encode(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )
    query = "&".join(f"{k}={v}" for k, v in pairs)
    signed = sorted((k.lower(), v.strip()) for k, v in headers.items())
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in signed)
    signed_headers = ";".join(k for k, _ in signed)
    body_hash = hashlib.sha256(payload).hexdigest()
    text = f"{method}\n{path}\n{query}\n{canonical_headers}\n{signed_headers}\n{body_hash}"
    return text, signed_headers


def sdk_authorization(
    access_key: str,
    secret_key: str,
    method: str,
    url: str,
    headers: Mapping[str, str],
    payload: bytes,
) -> str:
    """The ``Authorization`` header (SDK-HMAC-SHA256) over ``headers``, which must hold
    ``X-Sdk-Date`` (the request time, YYYYMMDDTHHMMSSZ)."""
    date = next(v for k, v in headers.items() if k.lower() == "x-sdk-date")
    canonical, signed_headers = canonical_request(method, url, headers, payload)
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = f"{ALGORITHM}\n{date}\n{digest}"
    signature = hmac.new(secret_key.encode(), to_sign.encode(), hashlib.sha256).hexdigest()
    return f"{ALGORITHM} Access={access_key}, SignedHeaders={signed_headers}, Signature={signature}"


class HuaweiEcs(ApiSource):
    name = "huawei"
    provider = "huawei"
    schedule = "1d"
    parser_version = "1"
    base_url = "https://bss.myhuaweicloud.com"
    currency = "CNY"
    credential = "huawei_secret_access_key"
    credential_id = "huawei_access_key_id"
    credential_options = ("huawei_project_id",)
    tax_included = None
    docs_url = "https://support.huaweicloud.com/api-oce/bcloud_01001.html"
    terms_url = "https://www.huaweicloud.com/pricing/calculator.html#/ecs"
    seed_fixtures = tuple(f"ratings-{region}.json" for region in REGIONS)

    def start(self, ctx: Context) -> Iterator[Request]:
        project = ctx.options.get("huawei_project_id", "")
        for region in REGIONS:
            flavors = REGION_FLAVORS[region]
            for first in range(0, len(flavors), MAX_PRODUCTS):
                body = {
                    "project_id": project,
                    "inquiry_precision": 1,
                    "product_infos": product_infos(region, flavors[first : first + MAX_PRODUCTS]),
                }
                yield Request(
                    f"{ctx.base_url}{PATH}",
                    method="POST",
                    content=json.dumps(body, separators=(",", ":")).encode(),
                    headers={"Content-Type": CONTENT_TYPE},
                    meta={"region": region},
                )

    def sign(self, request: Request, ctx: Context) -> Request:
        if not ctx.credential or not ctx.credential_id:
            return request
        signed = {
            "Content-Type": CONTENT_TYPE,
            "Host": urlsplit(request.url).netloc,
            "X-Sdk-Date": datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"),
        }
        payload = request.content or b""
        authorization = sdk_authorization(
            ctx.credential_id, ctx.credential, request.method, request.url, signed, payload
        )
        headers = {**(request.headers or {}), **signed, "Authorization": authorization}
        headers.pop("Host")  # the HTTP client sends it
        return replace(request, headers=headers)

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        body = response_json(response)
        if not isinstance(body, dict):
            raise LayoutChanged("the answer is not a JSON object")
        code = body.get("error_code")
        if code not in (None, "", "CBC.0000"):
            detail = f"{str(code)[:40]}: {str(body.get('error_msg', ''))[:200]}"
            raise SourceError("api error", detail)
        results = body.get("product_rating_results")
        if not isinstance(results, list):
            raise LayoutChanged("missing list 'product_rating_results'")
        currency = body.get("currency")
        if currency not in (None, "", "CNY"):
            raise LayoutChanged(f"unexpected currency {str(currency)[:10]!r}")
        region = response.meta.get("region") if response.request is not None else None
        for result in results:
            record = self.result(result)
            if region is not None and record["region"] != region:
                raise LayoutChanged("a price of a region the request did not ask")
            yield record

    def result(self, result: Any) -> RawRecord:
        if not isinstance(result, dict):
            raise LayoutChanged("a product rating result is not an object")
        match = _ID.match(str(result.get("id", "")))
        if match is None:
            raise LayoutChanged(f"unexpected product id {str(result.get('id'))[:80]!r}")
        region, flavor = match.groups()
        if region not in REGION_FLAVORS or flavor not in REGION_FLAVORS[region]:
            raise LayoutChanged(f"a price nobody asked for {region}/{flavor}")
        if result.get("measure_id", YUAN) != YUAN:
            raise LayoutChanged(f"unexpected measure_id {str(result.get('measure_id'))[:10]!r}")
        amount = result.get("official_website_amount")
        if isinstance(amount, bool) or not isinstance(amount, int | Decimal):
            raise LayoutChanged(f"unparseable price {str(amount)[:40]!r}")
        gpu, memory, count, vcpus, ram = FLAVORS[flavor]
        return {
            "sku": flavor,
            "gpu_name_raw": gpu,
            "gpu_memory_gb": memory,
            "gpu_count": count,
            "vcpus": vcpus,
            "memory_gb": ram,
            "region": region,
            "price_kind": "on_demand",
            "unit": "hour",
            "amount": str(plain(amount)),
            "source_url": self.terms_url,
        }
