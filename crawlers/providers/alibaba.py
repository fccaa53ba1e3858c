"""Alibaba Cloud ECS: GPU instance prices from the ECS OpenAPI (RPC style), in CNY.

https://help.aliyun.com/document_detail/107829.html (DescribePrice),
https://help.aliyun.com/document_detail/25620.htm (DescribeInstanceTypes),
https://help.aliyun.com/document_detail/66186.html (DescribeAvailableResource).

Three calls, each a signed ``GET /?Action=…`` on ``ecs.aliyuncs.com``:

1. ``DescribeInstanceTypes`` with ``MinimumGPUAmount=1``, paged by ``NextToken`` (at most
   100 entries a page): the GPU instance types, with ``GPUSpec`` ("NVIDIA A10"),
   ``GPUAmount``, ``GPUMemorySize``, ``CpuCoreCount`` and ``MemorySize``.
2. ``DescribeAvailableResource`` per region of :data:`REGIONS` (pay-as-you-go instance
   types): which of them are sold there, in which zones, with stock.
3. ``DescribePrice`` per (region, available GPU type): pay-as-you-go per ``Hour``
   (``on_demand``) and a one-week subscription per ``Week`` (``weekly``). The price is the
   ``OriginalPrice`` (list price) of the ``instanceType`` item of ``DetailInfos``: the
   total also holds the system disk, which is not the instance's price.

A ``DescribePrice`` answer does not say what it prices: the region, type and unit come from
the request. Saved answers (``--from-file``, the seed) are read in the order the crawl
fetches them, each price answer matched to the request the crawl would have sent.

Signing (``SignatureVersion`` 1.0, ``HMAC-SHA1``): :func:`rpc_signature`; each attempt is
signed anew with a fresh nonce and timestamp (:meth:`AlibabaEcs.sign`).

Tax: prices on the China site are quoted in CNY including VAT (not confirmed by a source
read here; see README "Sources").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import uuid
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.http import require
from crawlers.normalize.decimal_json import plain, response_json

API_VERSION = "2014-05-26"
REGIONS = ("cn-beijing", "cn-hangzhou", "cn-shenzhen", "cn-hongkong")
"""Regions priced: North, East and South China, and Hong Kong (fixtures/reference/regions.yaml)."""
PRICE_UNITS = {"Hour": ("on_demand", "hour"), "Week": ("weekly", "week")}
PAGE_SIZE = "100"
_TYPE_ID = re.compile(r"^ecs\.[a-z0-9][a-z0-9.-]{0,62}$")
_REGION_ID = re.compile(r"^[a-z]{2}-[a-z0-9-]{1,30}$")


def percent_encode(text: str) -> str:
    """RFC 3986 encoding as the signature wants it: only ``A-Z a-z 0-9 - _ . ~`` stay."""
    return quote(text, safe="-_.~")


def string_to_sign(method: str, params: Mapping[str, str]) -> str:
    """``METHOD&%2F&<the encoded, sorted, encoded-again query>``."""
    canonical = "&".join(
        f"{percent_encode(k)}={percent_encode(v)}" for k, v in sorted(params.items())
    )
    return f"{method}&{percent_encode('/')}&{percent_encode(canonical)}"


def rpc_signature(method: str, params: Mapping[str, str], secret: str) -> str:
    """Base64 of HMAC-SHA1 over :func:`string_to_sign`, keyed with ``secret + "&"``."""
    digest = hmac.new(
        f"{secret}&".encode(), string_to_sign(method, params).encode(), hashlib.sha1
    ).digest()
    return base64.b64encode(digest).decode()


def signed_params(
    params: Mapping[str, str],
    key_id: str,
    secret: str,
    *,
    method: str = "GET",
    now: datetime | None = None,
    nonce: str | None = None,
) -> dict[str, str]:
    """The request's parameters with the common signature parameters and ``Signature``."""
    stamped = {
        **params,
        "AccessKeyId": key_id,
        "SignatureMethod": "HMAC-SHA1",
        "SignatureVersion": "1.0",
        "SignatureNonce": nonce or uuid.uuid4().hex,
        "Timestamp": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {**stamped, "Signature": rpc_signature(method, stamped, secret)}


@dataclass(frozen=True)
class GpuType:
    type_id: str
    gpu: str
    gpu_count: int
    gpu_memory_gb: Any
    vcpus: Any
    memory_gb: Any


class AlibabaEcs(ApiSource):
    name = "alibaba"
    provider = "alibaba"
    schedule = "1d"
    parser_version = "1"
    base_url = "https://ecs.aliyuncs.com"
    currency = "CNY"
    credential = "alibaba_access_key_secret"
    credential_id = "alibaba_access_key_id"
    tax_included = True
    docs_url = "https://help.aliyun.com/document_detail/107829.html"
    terms_url = "https://www.aliyun.com/price/product#/ecs/detail"
    seed_fixtures = (
        "instance-types-page-1.json",
        "instance-types-page-2.json",
        *(f"available-{region}.json" for region in REGIONS),
        *(
            f"price-{region}-{sku}-{unit.lower()}.json"
            for region, skus in (
                ("cn-beijing", ("gn7i-c8g1.2xlarge", "gn6v-c8g1.2xlarge", "gn7-c12g1.3xlarge")),
                ("cn-hangzhou", ("gn7i-c8g1.2xlarge", "gn7-c12g1.3xlarge")),
                ("cn-shenzhen", ("gn7i-c8g1.2xlarge", "gn6v-c8g1.2xlarge")),
                ("cn-hongkong", ("gn7i-c8g1.2xlarge",)),
            )
            for sku in sorted(skus)
            for unit in PRICE_UNITS
        ),
    )
    """The saved answers the seed replays, in the order a crawl fetches them."""

    def __init__(self) -> None:
        self.types: dict[str, GpuType] = {}
        self.expected: deque[Mapping[str, Any]] = deque()
        """Price requests asked for, in fetch order (what a saved answer answers)."""
        self.skipped: Counter[str] = Counter()

    # -------------------------------------------------------------------- requests

    def call(self, ctx: Context, action: str, **params: str) -> Request:
        meta = {"action": action, **params}
        if action == "DescribePrice":
            self.expected.append(meta)
        query = {"Action": action, "Version": API_VERSION, "Format": "JSON", **params}
        return Request(f"{ctx.base_url}/", params=query, meta=meta)

    def sign(self, request: Request, ctx: Context) -> Request:
        if not ctx.credential or not ctx.credential_id:
            return request
        params = signed_params(request.params or {}, ctx.credential_id, ctx.credential)
        return replace(request, params=params)

    def start(self, ctx: Context) -> Iterator[Request]:
        yield self.call(ctx, "DescribeInstanceTypes", MinimumGPUAmount="1", MaxResults=PAGE_SIZE)

    # -------------------------------------------------------------------- answers

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        body = response_json(response)
        if not isinstance(body, dict):
            raise LayoutChanged("the answer is not a JSON object")
        if "InstanceTypes" in body:
            yield from self.parse_types(body, ctx)
        elif "AvailableZones" in body:
            yield from self.parse_available(body, ctx)
        elif "PriceInfo" in body:
            meta = response.meta if response.request is not None else None
            if not self.expected:
                raise LayoutChanged("a price answer that no request asked for")
            asked = self.expected.popleft()
            yield from self.parse_price(body, meta or asked)
        else:
            raise LayoutChanged(f"unknown answer with keys {sorted(body)[:5]}")

    def parse_types(self, body: dict[str, Any], ctx: Context) -> Iterator[Request]:
        items = _list(body, "InstanceTypes", "InstanceType")
        for item in items:
            if "GPUAmount" not in item or "GPUSpec" not in item:
                raise LayoutChanged("instance type without GPUAmount/GPUSpec")
            type_id = str(item["InstanceTypeId"])
            if not _TYPE_ID.match(type_id):
                raise LayoutChanged(f"unexpected InstanceTypeId {type_id[:80]!r}")
            count = item["GPUAmount"]
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                self.skipped["no GPU"] += 1
                continue
            self.types[type_id] = GpuType(
                type_id,
                str(item["GPUSpec"]),
                count,
                item.get("GPUMemorySize"),
                item.get("CpuCoreCount"),
                item.get("MemorySize"),
            )
        token = body.get("NextToken")
        if token:
            yield self.call(
                ctx,
                "DescribeInstanceTypes",
                MinimumGPUAmount="1",
                MaxResults=PAGE_SIZE,
                NextToken=str(token),
            )
            return
        if not self.types:
            return  # no GPU type at all: the crawl ends empty
        for region in REGIONS:
            yield self.call(
                ctx,
                "DescribeAvailableResource",
                RegionId=region,
                DestinationResource="InstanceType",
                InstanceChargeType="PostPaid",
            )

    def parse_available(self, body: dict[str, Any], ctx: Context) -> Iterator[Request]:
        zones = _list(body, "AvailableZones", "AvailableZone")
        sold: set[str] = set()
        regions = {str(zone["RegionId"]) for zone in zones}
        if len(regions) > 1 or not all(_REGION_ID.match(r) for r in regions):
            raise LayoutChanged(f"unexpected RegionId {sorted(regions)[:3]!r}"[:120])
        for zone in zones:
            if zone.get("Status") != "Available":
                continue
            for resource in _list(zone, "AvailableResources", "AvailableResource"):
                if resource.get("Type") != "InstanceType":
                    continue
                for supported in _list(resource, "SupportedResources", "SupportedResource"):
                    if supported.get("Status") == "Available":
                        sold.add(str(supported["Value"]))
        if not regions:
            return
        (region,) = regions
        for type_id in sorted(sold & set(self.types)):
            for unit in PRICE_UNITS:
                params = {
                    "RegionId": region,
                    "ResourceType": "instance",
                    "InstanceType": type_id,
                    "PriceUnit": unit,
                }
                if unit != "Hour":
                    params["Period"] = "1"
                yield self.call(ctx, "DescribePrice", **params)

    def parse_price(self, body: dict[str, Any], asked: Mapping[str, Any]) -> Iterator[RawRecord]:
        price = body["PriceInfo"]["Price"]
        details = _list(price, "DetailInfos", "DetailInfo")
        instance = [d for d in details if d.get("Resource") == "instanceType"]
        if len(instance) != 1:
            raise LayoutChanged("DescribePrice has no single 'instanceType' detail")
        amount = instance[0]["OriginalPrice"]
        if isinstance(amount, bool) or not isinstance(amount, int | Decimal):
            raise LayoutChanged(f"unparseable price {str(amount)[:40]!r}")
        gpu_type = self.types.get(str(asked["InstanceType"]))
        if gpu_type is None:
            raise LayoutChanged(f"price of an unlisted type {str(asked['InstanceType'])[:80]!r}")
        price_kind, unit = PRICE_UNITS[str(asked["PriceUnit"])]
        yield {
            "sku": gpu_type.type_id,
            "gpu_name_raw": gpu_type.gpu,
            "gpu_count": gpu_type.gpu_count,
            "gpu_memory_gb": gpu_type.gpu_memory_gb,
            "vcpus": gpu_type.vcpus,
            "memory_gb": gpu_type.memory_gb,
            "region": str(asked["RegionId"]),
            "price_kind": price_kind,
            "unit": unit,
            "amount": str(plain(amount)),
            "currency": str(price["Currency"]),
            "source_url": self.terms_url,
        }


def _list(mapping: Any, outer: str, inner: str) -> list[Any]:
    """``mapping[outer][inner]``: Alibaba wraps every list in an object named for it."""
    items = require(mapping, outer, inner)
    if not isinstance(items, list):
        raise LayoutChanged(f"{outer}.{inner} is not a list")
    return items
