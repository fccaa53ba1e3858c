"""A small catalog for the web page tests: varied offers, a hostile string, price history."""

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

HOSTILE_SKU = '<img src=x onerror="window.__pwned=1">"\'&amp;'
HISTORY_SKU = "gpu-0"
HISTORY_AMOUNTS = ("21.50", "19.25", "22.75")
"""Price changes of HISTORY_SKU after its first price: 1 + 3 observations in all."""
H100_OFFERS = 50
A100_OFFERS = 10


def seed_records() -> list[dict[str, Any]]:
    out = []
    for i in range(H100_OFFERS):
        out.append(
            record(i, provider="lambda", gpu_count=("1", "2", "8")[i % 3], price_kind="on_demand")
        )
    for i in range(100, 100 + A100_OFFERS):
        out.append(
            record(
                i,
                provider="lambda",
                gpu_name_raw="A100 80GB",
                gpu_count="4",
                country="US",
                price_kind="spot",
                amount=str(Decimal("6.00") + Decimal(i % 7) / 4),
            )
        )
    out.append(record(200, provider="lambda", sku=HOSTILE_SKU, gpu_count="1", amount="1.23"))
    return out


def _crawl(records: list[dict[str, Any]], when: datetime) -> CrawlResult:
    body = json.dumps(records, sort_keys=True).encode()
    payload = Payload("https://acme.example/prices.json", body, when, "application/json", 200)
    return CrawlResult(source="acme", records=records, payloads=[payload])


def seed(engine: Engine, settings: Settings, *, reference: bool = True) -> None:
    """Reference data (unless ``reference=False``: the database holds it already), then one
    ingest plus one per price change of HISTORY_SKU (weeks apart)."""
    if reference:
        load_reference(engine, REFERENCE_DIR)
    records = seed_records()
    start = datetime.now(UTC) - timedelta(days=120)
    ingest(engine, settings, _crawl(records, start), now=start)
    for step, amount in enumerate(HISTORY_AMOUNTS, start=1):
        changed = [dict(r) for r in records]
        next(r for r in changed if r["sku"] == HISTORY_SKU)["amount"] = amount
        when = start + timedelta(days=25 * step)
        ingest(engine, settings, _crawl(changed, when), now=when)
