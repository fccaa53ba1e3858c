"""OVHcloud public catalog through a real local HTTP server: GPU flavours per region."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine

from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import check_bad_answers, offers_by

ROUTE = "/1.0/order/catalog/public/cloud?ovhSubsidiary=FR"
FILE = FIXTURES / "ovhcloud" / "catalog-public-cloud-FR.json"
OFFER = Offer.__table__  # type: ignore[attr-defined]
GPU_OFFERS = 178


def _settings(settings: Settings, server: ReplayServer) -> Settings:
    return settings.model_copy(
        update={"source_base_urls": {"ovhcloud": server.url}, "http_max_retries": 2}
    )


def _offers(engine: Engine) -> dict[tuple[str, str, str], dict[str, Any]]:
    return offers_by(engine, "ovhcloud", "sku", "region", "price_kind")


def test_gpu_flavours_become_hourly_and_monthly_offers_per_region(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(ROUTE, Reply.file(FILE))
    report = crawl_source(engine, _settings(settings, server), "ovhcloud")
    assert report.label == "ok", report
    assert report.counts["added"] == GPU_OFFERS

    offers = _offers(engine)
    hourly = offers[("h100-380", "GRA11", "on_demand")]
    assert (hourly["amount"], hourly["currency"], hourly["unit"]) == (Decimal("2.8"), "EUR", "hour")
    assert hourly["country"] == "FR" and hourly["gpu_count"] == 1 and hourly["vcpus"] == 30
    monthly = offers[("h100-380", "BHS5", "monthly")]
    assert (monthly["amount"], monthly["unit"], monthly["country"]) == (
        Decimal("1940"),
        "month",
        "CA",
    )
    h200 = offers[("h200-1920", "GRA11", "on_demand")]
    assert (h200["amount"], h200["gpu_count"], h200["gpu_memory_gb"]) == (Decimal("42"), 8, 141)
    # multi-AZ Paris has its own plan codes and price
    assert offers[("l40s-90", "EU-WEST-PAR", "on_demand")]["amount"] == Decimal("1.54")
    assert offers[("l40s-90", "GRA11", "on_demand")]["amount"] == Decimal("1.4")
    # hourly plans list no regions in the catalog: they take their flavour's regions
    assert {r for (s, r, k) in offers if s == "t1-45" and k == "on_demand"} == {
        "BHS5",
        "DE1",
        "GRA7",
        "GRA9",
    }

    skus = {sku for sku, _, _ in offers}
    assert not any(s.startswith("win-") for s in skus)  # Windows licence included: skipped
    assert "a10-180" not in skus  # coming soon
    assert "b3-8" not in skus  # no GPU
    assert not any(s.startswith("ai-app") for s in skus)  # per-minute AI Deploy, not an instance

    slugs = {r.sku: r.gpu_model for r in report.records}
    assert slugs["l40s-360"] == "nvidia-l40s-48gb"
    assert slugs["t2-45"] == "nvidia-v100s-pcie-32gb"

    assert "authorization" not in {k.lower() for k in server.requests[-1][2]}  # public, no key

    again = crawl_source(engine, _settings(settings, server), "ovhcloud")
    assert again.label == "ok" and again.catalog_version is None
    assert again.counts["added"] == again.counts["changed"] == again.counts["withdrawn"] == 0


def _catalog() -> dict[str, Any]:
    return json.loads(FILE.read_text())


def _no_gpu_flavours() -> bytes:
    catalog = _catalog()
    catalog["addons"] = [
        a for a in catalog["addons"] if "gpu" not in ((a.get("blobs") or {}).get("technical") or {})
    ]
    return json.dumps(catalog).encode()


ODD_ANSWERS = {
    "no-addons": (
        Reply(b'{"catalogId": 1, "locale": {"currencyCode": "EUR"}}'),
        "failed: layout changed",
    ),
    "no-gpu-flavours": (Reply(_no_gpu_flavours()), "failed: empty result"),
}


def test_odd_catalogs_fail_and_write_nothing(
    engine: Engine, settings: Settings, server: ReplayServer, subtests: pytest.Subtests
) -> None:
    check_bad_answers(engine, settings, server, subtests, "ovhcloud", ROUTE, ODD_ANSWERS)


def test_saved_catalog_dry_run() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "ovhcloud", from_files=[FILE], dry_run=True)
    assert report.label == "ok"
    assert len(report.records) == GPU_OFFERS
    rtx = next(
        r
        for r in report.records
        if r.sku == "rtx5000-84" and r.region == "BHS5" and r.price_kind.value == "on_demand"
    )
    assert (rtx.amount, rtx.gpu_count, rtx.country) == (Decimal("1.08"), 3, "CA")
