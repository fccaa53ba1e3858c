"""Tencent Cloud CVM: GPU instance prices per zone from the CVM API, in CNY.

https://www.tencentcloud.com/document/api/213/33254 (DescribeZoneInstanceConfigInfos),
https://www.tencentcloud.com/document/product/213/30654 (signature v3, TC3-HMAC-SHA256).

One signed ``POST /`` (JSON body, action in ``X-TC-Action``) per region of :data:`REGIONS`:
``DescribeZoneInstanceConfigInfos`` filtered to the GPU families of :data:`FAMILIES` and to
pay-as-you-go (``POSTPAID_BY_HOUR`` → ``on_demand``) and spot (``SPOTPAID`` → ``spot``)
billing. Each item is one instance type in one zone, with its ``Price`` (``UnitPrice`` per
``ChargeUnit`` ``HOUR``; a spot price is ``UnitPriceDiscount``, the discounted rate). The
region is the zone without its number (``ap-guangzhou-3`` → ``ap-guangzhou``); a type sold
in several zones of a region is one offer at the lowest zone price. Sold-out items are left
out.

The API answers errors with HTTP 200 and ``Response.Error``: ``AuthFailure.*`` is
"unauthorized", ``RequestLimitExceeded`` "rate limited", anything else "api error".

The items name no GPU model, only counts (``GpuCount``, fractional for vGPU types): the
model comes from the instance family (:data:`FAMILIES`, from Tencent's GPU instance type
page https://www.tencentcloud.com/document/product/560/19701).

Currency and tax: an account of the China site (cloud.tencent.com) is quoted in CNY, VAT
included (not confirmed by a source read here; see README "Sources").
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

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

SERVICE = "cvm"
API_VERSION = "2017-03-12"
ACTION = "DescribeZoneInstanceConfigInfos"
CONTENT_TYPE = "application/json; charset=utf-8"
REGIONS = ("ap-beijing", "ap-shanghai", "ap-guangzhou", "ap-hongkong")
CHARGE_TYPES = {"POSTPAID_BY_HOUR": "on_demand", "SPOTPAID": "spot"}
# instance family -> (GPU as Tencent names it, GPU memory GB)
FAMILIES: dict[str, tuple[str, str]] = {
    "GN7": ("NVIDIA T4", "16"),
    "GN10Xp": ("NVIDIA V100 SXM2 32GB", "32"),
    "GT4": ("NVIDIA A100 SXM4 40GB", "40"),
    "PNV4": ("NVIDIA A10", "24"),
}
_ZONE = re.compile(r"^([a-z]{2}-[a-z]+(?:-fsi)?)-\d{1,2}$")
_TYPE = re.compile(r"^[A-Z0-9][A-Za-z0-9]{0,15}\.[A-Z0-9]{1,16}$")


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def canonical_request(headers: Mapping[str, str], payload: bytes) -> tuple[str, str]:
    """(CanonicalRequest, SignedHeaders) of a ``POST /`` with these headers and body."""
    signed = sorted((k.lower(), v.strip().lower()) for k, v in headers.items())
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in signed)
    signed_headers = ";".join(k for k, _ in signed)
    body_hash = hashlib.sha256(payload).hexdigest()
    text = f"POST\n/\n\n{canonical_headers}\n{signed_headers}\n{body_hash}"
    return text, signed_headers


def tc3_authorization(
    secret_id: str,
    secret_key: str,
    headers: Mapping[str, str],
    payload: bytes,
    timestamp: int,
    service: str = SERVICE,
) -> str:
    """The ``Authorization`` header of signature v3 (TC3-HMAC-SHA256) over ``headers``."""
    date = datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d")
    scope = f"{date}/{service}/tc3_request"
    canonical, signed_headers = canonical_request(headers, payload)
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = f"TC3-HMAC-SHA256\n{timestamp}\n{scope}\n{digest}"
    key = _hmac(_hmac(_hmac(f"TC3{secret_key}".encode(), date), service), "tc3_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return (
        f"TC3-HMAC-SHA256 Credential={secret_id}/{scope}, "
        f"SignedHeaders={signed_headers}, Signature={signature}"
    )


class TencentCvm(ApiSource):
    name = "tencent"
    provider = "tencent"
    schedule = "1d"
    parser_version = "1"
    base_url = "https://cvm.tencentcloudapi.com"
    currency = "CNY"
    credential = "tencent_secret_key"
    credential_id = "tencent_secret_id"
    tax_included = True
    docs_url = "https://www.tencentcloud.com/document/api/213/33254"
    terms_url = "https://buy.cloud.tencent.com/price/cvm"
    seed_fixtures = tuple(f"zone-instance-config-{region}.json" for region in REGIONS)

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()

    def start(self, ctx: Context) -> Iterator[Request]:
        for region in REGIONS:
            body = {
                "Filters": [
                    {"Name": "instance-family", "Values": sorted(FAMILIES)},
                    {"Name": "instance-charge-type", "Values": list(CHARGE_TYPES)},
                ]
            }
            yield Request(
                f"{ctx.base_url}/",
                method="POST",
                content=json.dumps(body, separators=(",", ":")).encode(),
                headers={
                    "Content-Type": CONTENT_TYPE,
                    "X-TC-Action": ACTION,
                    "X-TC-Version": API_VERSION,
                    "X-TC-Region": region,
                },
                meta={"region": region},
            )

    def sign(self, request: Request, ctx: Context) -> Request:
        if not ctx.credential or not ctx.credential_id:
            return request
        timestamp = int(datetime.now(UTC).timestamp())
        signed = {
            "content-type": CONTENT_TYPE,
            "host": urlsplit(request.url).netloc,
            "x-tc-action": ACTION.lower(),
        }
        authorization = tc3_authorization(
            ctx.credential_id, ctx.credential, signed, request.content or b"", timestamp
        )
        headers = {
            **(request.headers or {}),
            "X-TC-Timestamp": str(timestamp),
            "Authorization": authorization,
        }
        return replace(request, headers=headers)

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        body = response_json(response)
        if not isinstance(body, dict) or not isinstance(body.get("Response"), dict):
            raise LayoutChanged("no 'Response' object")
        answer = body["Response"]
        if "Error" in answer:
            raise _api_error(answer["Error"])
        items = answer.get("InstanceTypeQuotaSet")
        if not isinstance(items, list):
            raise LayoutChanged("missing list 'Response.InstanceTypeQuotaSet'")
        best: dict[tuple[str, str, str], RawRecord] = {}
        for item in items:
            record = self.item(item)
            if record is None:
                continue
            key = (record["region"], record["sku"], record["price_kind"])
            kept = best.get(key)
            if kept is not None:
                self.skipped["same type in another zone"] += 1
                if Decimal(kept["amount"]) <= Decimal(record["amount"]):
                    continue
            best[key] = record
        yield from best.values()

    def item(self, item: dict[str, Any]) -> RawRecord | None:
        """One zone's item as a record, or None when left out on purpose."""
        family = str(item["InstanceFamily"])
        gpu = FAMILIES.get(family)
        if gpu is None:
            self.skipped[f"family {family[:20]}"] += 1
            return None
        price_kind = CHARGE_TYPES.get(str(item["InstanceChargeType"]))
        if price_kind is None:
            self.skipped["charge type"] += 1
            return None
        if item["Status"] != "SELL":
            self.skipped["sold out"] += 1
            return None
        sku, zone = str(item["InstanceType"]), str(item["Zone"])
        match = _ZONE.match(zone)
        if match is None or not _TYPE.match(sku):
            raise LayoutChanged(f"unexpected zone or type {zone[:40]!r} {sku[:40]!r}")
        price = item["Price"]
        if price.get("ChargeUnit") != "HOUR":
            raise LayoutChanged(f"unexpected ChargeUnit {str(price.get('ChargeUnit'))[:20]!r}")
        amount = price["UnitPriceDiscount" if price_kind == "spot" else "UnitPrice"]
        if isinstance(amount, bool) or not isinstance(amount, int | Decimal):
            raise LayoutChanged(f"unparseable price {str(amount)[:40]!r}")
        return {
            "sku": sku,
            "gpu_name_raw": gpu[0],
            "gpu_memory_gb": gpu[1],
            "gpu_count": item["GpuCount"],
            "vcpus": item.get("Cpu"),
            "memory_gb": item.get("Memory"),
            "region": match.group(1),
            "price_kind": price_kind,
            "unit": "hour",
            "amount": str(plain(amount)),
            "source_url": self.terms_url,
        }


def _api_error(error: Any) -> SourceError:
    code = str(error.get("Code", "")) if isinstance(error, dict) else ""
    message = str(error.get("Message", "")) if isinstance(error, dict) else ""
    detail = f"{code[:80]}: {message[:200]}"
    if code.startswith("AuthFailure"):
        return SourceError("unauthorized", detail)
    if code.startswith("RequestLimitExceeded"):
        return SourceError("rate limited", detail)
    return SourceError("api error", detail)
