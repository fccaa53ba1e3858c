"""Cloud Billing Catalog API through a real local HTTP server: keys, paging, machine prices."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from crawlers.normalize.reference import reference_index
from crawlers.providers.gcp import ACCELERATORS, MACHINES, sku_price, skus_url
from schema.crawl import CrawlRun
from schema.prices import CatalogVersion, Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import check_bad_answers, offers_by, versions

DIR = FIXTURES / "gcp"
PAGES = [DIR / f"skus-page-{n}.json" for n in (1, 2, 3)]
REAL = Path("gcp") / "cloudbilling-skus-page-a100-a2-excerpt-opencost.json"
OFFER = Offer.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
KEY = "test-key-AIzaSy"
# 273 per-GPU region prices + 708 machine-type prices (35 GPU SKUs × regions, 22 machines)
SEEN = 981


def _settings(settings: Settings, server: ReplayServer, **extra: Any) -> Settings:
    update = {
        "source_base_urls": {"gcp": server.url},
        "http_max_retries": 2,
        "gcp_api_key": KEY,
        **extra,
    }
    return settings.model_copy(update=update)


def _route_fixtures(server: ReplayServer) -> list[str]:
    routes, token = [], ""
    for page in PAGES:
        target = skus_url("", token)
        server.route(target, Reply.file(page))
        routes.append(target)
        token = json.loads(page.read_bytes())["nextPageToken"]
    assert token == ""
    return routes


def _skus() -> list[dict[str, Any]]:
    return [sku for page in PAGES for sku in json.loads(page.read_bytes())["skus"]]


def _unit_price(description: str) -> Decimal:
    """A fixture SKU's price, found by its description (an independent reading)."""
    (sku,) = [s for s in _skus() if s["description"] == description]
    priced = sku_price(sku)
    assert priced is not None
    return priced[0]


def _small_page() -> bytes:
    """One last page: the A100 GPU and A2 core/RAM SKUs (what prices a2 machine types)."""
    keep = {"Nvidia Tesla A100 GPU running in Americas", "A2 Instance Core running in Americas",
            "A2 Instance Ram running in Americas"}  # fmt: skip
    skus = [s for s in _skus() if s["description"] in keep]
    return json.dumps({"skus": skus, "nextPageToken": ""}).encode()


def _offers(engine: Engine) -> dict[tuple[str, str, str], dict[str, Any]]:
    return offers_by(engine, "gcp", "sku", "region", "price_kind")


def test_full_crawl_prices_gpus_and_machine_types(
    engine: Engine, settings: Settings, reference_data: None, server: ReplayServer
) -> None:
    _route_fixtures(server)
    report = crawl_source(engine, _settings(settings, server), "gcp")
    assert report.label == "ok", report
    assert report.counts["seen"] == report.counts["added"] == SEEN
    assert report.counts["rejected"] == 0 and report.unmapped == {}
    # the key travels in a header, never in a URL (so never in logs or provenance)
    for _, path, headers, _ in server.requests:
        assert headers["X-Goog-Api-Key"] == KEY and KEY not in path
    with engine.connect() as conn:
        urls = conn.execute(select(RUN.c.source_urls).where(RUN.c.source == "gcp")).scalar_one()
    assert len(urls) == 3 and not any(KEY in url for url in urls)

    offers = _offers(engine)
    a100 = offers[("nvidia-tesla-a100", "us-central1", "on_demand")]
    assert a100["amount"] == Decimal("2.933908")
    assert (a100["price_per"], a100["gpu_count"], a100["unit"]) == ("gpu", 1, "hour")
    assert (a100["gpu_slug"], a100["country"]) == ("nvidia-a100-sxm-40gb", "US")
    # 1 A100 + 12 vCPUs + 85 GiB: Google's published a2-highgpu-1g price
    a2 = offers[("a2-highgpu-1g", "us-central1", "on_demand")]
    assert a2["amount"] == Decimal("3.673385") and a2["price_per"] == "instance"
    assert (a2["gpu_count"], a2["vcpus"], a2["memory_gb"]) == (1, 12, 85)
    assert offers[("a2-highgpu-1g", "europe-west4", "spot")]["country"] == "NL"

    h100 = offers[("nvidia-h100-80gb", "us-east4", "reserved_1y")]["amount"]
    core = _unit_price("Commitment v1: A3 Cpu in Virginia for 1 Year")
    ram = _unit_price("Commitment v1: A3 Ram in Virginia for 1 Year")
    a3 = offers[("a3-highgpu-8g", "us-east4", "reserved_1y")]
    assert a3["amount"] == 8 * h100 + 208 * core + 1872 * ram
    assert a3["gpu_slug"] == "nvidia-h100-sxm-80gb" and a3["unit"] == "hour"
    g2 = offers[("g2-standard-48", "asia-northeast1", "spot")]
    assert g2["country"] == "JP" and g2["gpu_slug"] == "nvidia-l4-24gb" and g2["gpu_count"] == 4
    mega = offers[("a3-megagpu-8g", "us-central1", "on_demand")]
    assert mega["amount"] == 8 * Decimal("10.344275712") + 208 * Decimal("0.031008") + 1872 * (
        Decimal("0.003101")
    )
    assert offers[("a3-ultragpu-8g", "europe-west1", "on_demand")]["gpu_slug"] == (
        "nvidia-h200-sxm-141gb"
    )
    # the last non-zero tier of a tiered SKU; the workstation GPU is its own SKU
    assert offers[("nvidia-tesla-k80", "us-west1", "on_demand")]["amount"] == Decimal("0.45")
    assert ("nvidia-tesla-t4-vws", "europe-west1", "on_demand") in offers
    # DWS, a new A4 slice SKU, custom and sole-tenant cores are not priced
    assert {sku for sku, _, _ in offers} == {*MACHINES, "nvidia-tesla-a100", "nvidia-a100-80gb",
                                             "nvidia-h100-80gb", "nvidia-h100-mega-80gb",
                                             "nvidia-h200-141gb", "nvidia-l4", "nvidia-tesla-t4",
                                             "nvidia-tesla-t4-vws", "nvidia-tesla-v100",
                                             "nvidia-tesla-p100", "nvidia-tesla-p4",
                                             "nvidia-tesla-k80"}  # fmt: skip
    on_demand_h100 = offers[("nvidia-h100-80gb", "us-central1", "on_demand")]["amount"]
    assert on_demand_h100 == Decimal("9.796550569")

    again = crawl_source(engine, _settings(settings, server), "gcp")
    assert again.label == "ok" and again.catalog_version is None
    assert (again.counts["added"], again.counts["changed"], again.counts["updated"]) == (0, 0, 0)


def test_real_catalog_page_through_the_server(
    engine: Engine, settings: Settings, server: ReplayServer, realdata: Path
) -> None:
    page = realdata / REAL
    token = json.loads(page.read_bytes())["nextPageToken"]
    assert token
    server.route(skus_url(""), Reply.file(page))
    server.route(skus_url("", token), Reply(b"{}"))  # an empty last page: proto3 JSON
    report = crawl_source(engine, _settings(settings, server), "gcp")
    assert report.label == "ok", report
    assert server.hits[skus_url("", token)] == 1  # the client asked for the next page
    offers = _offers(engine)
    for region in ("us-central1", "us-east1", "us-west1"):
        gpu = offers[("nvidia-tesla-a100", region, "on_demand")]
        assert gpu["amount"] == Decimal("2.933908") and gpu["price_per"] == "gpu"
        assert offers[("a2-highgpu-1g", region, "on_demand")]["amount"] == (
            Decimal("2.933908") + 12 * Decimal("0.031611") + 85 * Decimal("0.004237")
        )
    assert {sku for sku, _, _ in offers} == {
        "nvidia-tesla-a100",
        *(name for name, m in MACHINES.items() if m.accelerator == "nvidia-tesla-a100"),
    }


def test_real_catalog_page_from_file(realdata: Path) -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "gcp", from_files=[realdata / REAL], dry_run=True)
    assert report.label == "ok"
    gpus = [r for r in report.records if r.price_per.value == "gpu"]
    assert sorted(r.region for r in gpus) == ["us-central1", "us-east1", "us-west1"]
    assert {(r.amount, r.gpu_count, r.price_kind.value, r.currency) for r in gpus} == {
        (Decimal("2.933908"), Decimal(1), "on_demand", "USD")
    }
    machines = {
        (r.sku, r.region): r.amount for r in report.records if r.price_per.value == "instance"
    }
    assert machines[("a2-highgpu-8g", "us-west1")] == (
        8 * Decimal("2.933908") + 96 * Decimal("0.031611") + 680 * Decimal("0.004237")
    )


def _renamed_pricing_info() -> bytes:
    page = json.loads(_small_page())
    for sku in page["skus"]:
        sku["pricing_info"] = sku.pop("pricingInfo")
    return json.dumps(page).encode()


FAULTS = {
    "field": (Reply(_renamed_pricing_info()), "failed: layout changed"),
    "root": (Reply(b'{"items": [], "nextPageToken": ""}'), "failed: layout changed"),
}


def test_faults_fail_and_keep_the_catalog(
    engine: Engine, settings: Settings, server: ReplayServer, subtests: pytest.Subtests
) -> None:
    server.route(skus_url(""), Reply(_small_page()))
    assert crawl_source(engine, _settings(settings, server), "gcp").label == "ok"
    check_bad_answers(engine, settings, server, subtests, "gcp", skus_url(""), FAULTS)


def test_empty_result_is_not_applied(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(skus_url(""), Reply(b"{}"))
    report = crawl_source(engine, _settings(settings, server), "gcp")
    assert report.label.startswith("failed: empty result")
    assert _offers(engine) == {} and versions(engine) == 0


def test_tables_use_reference_slugs() -> None:
    slugs = reference_index().gpu_slugs
    assert {acc.gpu_model for acc in ACCELERATORS.values() if acc.gpu_model} <= slugs
    assert {machine.accelerator for machine in MACHINES.values()} <= {
        acc.type for acc in ACCELERATORS.values()
    }


def test_saved_pages_dry_run_without_key_or_database() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "gcp", from_files=PAGES, dry_run=True)
    assert report.label == "ok" and report.counts["seen"] == SEEN
    kinds = {(r.price_per.value, r.price_kind.value) for r in report.records}
    assert kinds == {
        (per, kind)
        for per in ("gpu", "instance")
        for kind in ("on_demand", "spot", "reserved_1y", "reserved_3y")
    }
