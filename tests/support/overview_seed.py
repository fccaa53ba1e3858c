"""A small catalog for the overview tests: two GPUs, two providers, price kinds, a trend.

Everything is ingested in time order (as crawls happen), so catalog versions and times
agree. All times relative to now; prices chosen so every expected figure is exact:

- H100 SXM (lambda, US): on-demand 8 GPUs at 16, 17, 18, 19 USD/h (2.00 per GPU-hour the
  cheapest) until 30 days ago, when the 16 became 24 (cheapest 2.125); spot 12 USD/h (1.50).
- L40S (ovhcloud, FR): on-demand 1.50 until 30 days ago, then 1.20 and a new offer at 1.40;
  1-year reserved paid upfront 8,760 USD a term (1.00 per GPU-hour).
- A100 80GB (lambda, US): spot only, 8 GPUs at 8.80 USD/h (1.10 per GPU-hour), unchanged:
  its GPU page charts the spot price, flat.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult, Payload
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from tests.support.factories import record

H100 = "nvidia-h100-sxm-80gb"
A100 = "nvidia-a100-sxm-80gb"
L40S = "nvidia-l40s-48gb"
CHANGED_DAYS_AGO = 30
TREND = {H100: (Decimal("2"), Decimal("2.125")), L40S: (Decimal("1.5"), Decimal("1.2"))}
"""GPU -> (cheapest on-demand before the change, after it)."""


def _acme(changed: bool) -> list[dict[str, Any]]:
    out = [
        record(
            i,
            provider="lambda",
            gpu_count="8",
            country="US",
            region="us-east-1",
            amount="24.00" if changed and i == 0 else f"{16 + i}.00",
        )
        for i in range(4)
    ]
    out.append(
        record(
            10,
            provider="lambda",
            gpu_count="8",
            country="US",
            region="us-east-1",
            price_kind="spot",
            amount="12.00",
        )
    )
    out.append(
        record(
            11,
            provider="lambda",
            gpu_name_raw="A100 80GB",
            gpu_count="8",
            country="US",
            region="us-east-1",
            price_kind="spot",
            amount="8.80",
        )
    )
    return out


def _beta(changed: bool) -> list[dict[str, Any]]:
    common = {"source": "beta", "provider": "ovhcloud", "gpu_name_raw": "L40S", "gpu_count": "1"}
    out = [
        record(20, sku="l40s-a", region="GRA11", amount="1.20" if changed else "1.50", **common),
        record(
            21,
            sku="l40s-term",
            region="GRA11",
            price_kind="reserved_1y",
            unit="term_1y",
            amount="8760.00",
            **common,
        ),
    ]
    for r in out:
        r["country"] = "FR"
    if changed:
        out.append(record(22, sku="l40s-b", region="GRA11", amount="1.40", **common))
        out[-1]["country"] = "FR"
    return out


def _crawl(source: str, records: list[dict[str, Any]], when: datetime) -> CrawlResult:
    body = json.dumps(records, sort_keys=True).encode()
    url = f"https://{source}.example/prices.json"
    payload = Payload(url, body, when, "application/json", 200)
    return CrawlResult(source=source, records=records, payloads=[payload])


def seed(engine: Engine, settings: Settings) -> None:
    load_reference(engine, REFERENCE_DIR)
    now = datetime.now(UTC)
    first = now - timedelta(days=100)
    changed = now - timedelta(days=CHANGED_DAYS_AGO)
    ingest(engine, settings, _crawl("acme", _acme(False), first), now=first)
    ingest(engine, settings, _crawl("beta", _beta(False), first), now=first)
    ingest(engine, settings, _crawl("acme", _acme(True), changed), now=changed)
    ingest(engine, settings, _crawl("beta", _beta(True), changed), now=changed)
