"""Azure Retail Prices API through a real local HTTP server: paging, prices, failures."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from crawlers.base import LayoutChanged
from crawlers.normalize.reference import reference_index
from crawlers.providers.azure import SERIES, SIZES, AzureRetailPrices, first_page_url, rebase
from schema.prices import CatalogVersion, Offer, PriceObservation
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import check_bad_answers, offers_by

DIR = FIXTURES / "azure"
OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
H100 = "Standard_ND96isr_H100_v5"
# Every priced row of the fixtures, less Windows, DevTest, 5-year, non-primary and
# monthly rows; the 8 rows of a size missing from the module's table are rejected.
SEEN, REJECTED = 2572, 8


def _settings(settings: Settings, server: ReplayServer, **extra: Any) -> Settings:
    update = {"source_base_urls": {"azure": server.url}, "http_max_retries": 2, **extra}
    return settings.model_copy(update=update)


def _path(url: str) -> str:
    """The request target the replay server sees for a URL (path and query)."""
    return rebase(url, "") if url.startswith("http") else url


def _pages(series: str) -> list[Path]:
    return sorted(DIR.glob(f"{series.lower()}-page-*.json"), key=lambda p: int(p.stem[-1]))


def _route_fixtures(server: ReplayServer) -> list[str]:
    """Route every fixture page at the URL the previous page's NextPageLink names."""
    routes = []
    for series in SERIES:
        target = first_page_url("", series)
        for page in _pages(series):
            server.route(target, Reply.file(page))
            routes.append(target)
            link = json.loads(page.read_bytes())["NextPageLink"]
            if link:
                target = _path(link)
    return routes


def _small_page(series: str, skus: set[str]) -> bytes:
    """One short last page of a series: its fixture rows of a few sizes."""
    items = [
        item
        for page in _pages(series)
        for item in json.loads(page.read_bytes())["Items"]
        if item["armSkuName"] in skus
    ]
    return json.dumps({"Items": items, "NextPageLink": None, "Count": len(items)}).encode()


SMALL = {
    "NC": {"Standard_NC24ads_A100_v4", "Standard_NC4as_T4_v3"},
    "ND": {H100},
    "NG": {"Standard_NG32ads_V620_v1"},
    "NV": {"Standard_NV6ads_A10_v5"},
}


def _route_small(server: ReplayServer) -> None:
    for series in SERIES:
        server.route(first_page_url("", series), Reply(_small_page(series, SMALL[series])))


def _offers(engine: Engine) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    return offers_by(engine, "azure", "sku", "region", "price_kind", "unit")


def test_full_crawl_follows_every_page(
    engine: Engine, settings: Settings, reference_data: None, server: ReplayServer
) -> None:
    routes = _route_fixtures(server)
    report = crawl_source(engine, _settings(settings, server), "azure")
    assert report.label == "ok", report
    assert report.counts["seen"] == report.counts["added"] == SEEN
    assert report.counts["rejected"] == REJECTED
    # 7 pages (breadth-first over the 4 queries; each once: test_source_contract.py)
    assert len(routes) == 7
    agents = {r[2].get("User-Agent", "") for r in server.requests}
    assert all(agent.startswith("gpuatlas/") for agent in agents)

    offers = _offers(engine)
    assert len(offers) == SEEN
    on_demand = offers[(H100, "eastus", "on_demand", "hour")]
    assert on_demand["amount"] == Decimal("98.32") and on_demand["currency"] == "USD"
    assert on_demand["gpu_slug"] == "nvidia-h100-sxm-80gb"
    assert (on_demand["gpu_count"], on_demand["vcpus"], on_demand["memory_gb"]) == (8, 96, 1900)
    assert on_demand["country"] == "US"
    assert offers[(H100, "eastus", "spot", "hour")]["amount"] == Decimal("29.496")
    assert offers[(H100, "swedencentral", "on_demand", "hour")]["country"] == "SE"
    assert offers[(H100, "francecentral", "on_demand", "hour")]["amount"] == Decimal("115.0344")

    # a reservation is the whole term's price; its hourly equivalent is computed from the unit
    reserved = offers[(H100, "eastus", "reserved_1y", "term_1y")]
    assert reserved["amount"] == Decimal("533996")
    with engine.connect() as conn:
        hourly = conn.execute(
            select(OBS.c.hourly_amount).where(OBS.c.id == reserved["observation_id"])
        ).scalar_one()
    assert hourly == Decimal("60.9584474886")  # 533996 / 8760 h
    assert offers[(H100, "eastus", "reserved_3y", "term_3y")]["amount"] == Decimal("1059378")
    # no 5-year term, monthly meter, Windows or DevTest price made it in
    assert {key[2:] for key in offers if key[0] == H100} == {
        ("on_demand", "hour"),
        ("spot", "hour"),
        ("reserved_1y", "term_1y"),
        ("reserved_3y", "term_3y"),
    }
    assert offers[(H100, "westus3", "on_demand", "hour")]["amount"] == Decimal("98.32")

    a10 = offers[("Standard_NV6ads_A10_v5", "westeurope", "low_priority", "hour")]
    assert a10["gpu_count"] == Decimal("0.1666666667") and a10["gpu_slug"] == "nvidia-a10-24gb"
    assert a10["gpu_memory_gb"] == 4
    a100 = offers[("Standard_NC24ads_A100_v4", "eastus", "on_demand", "hour")]
    assert a100["amount"] == Decimal("3.673") and a100["gpu_slug"] == "nvidia-a100-pcie-80gb"
    nvl = offers[("Standard_NC40ads_H100_v5", "eastus", "on_demand", "hour")]
    assert nvl["gpu_slug"] == "nvidia-h100-nvl-94gb"
    assert (
        offers[("Standard_ND96amsr_A100_v4", "eastus", "on_demand", "hour")]["gpu_slug"]
        == "nvidia-a100-sxm-80gb"
    )
    assert (
        offers[("Standard_ND96asr_v4", "eastus", "on_demand", "hour")]["gpu_slug"]
        == "nvidia-a100-sxm-40gb"
    )
    mi300x = offers[("Standard_ND96isr_MI300X_v5", "eastus", "on_demand", "hour")]
    assert mi300x["gpu_slug"] == "amd-mi300x-192gb"
    assert (
        offers[("Standard_NC6s_v3", "eastus", "on_demand", "hour")]["gpu_slug"]
        == "nvidia-v100-pcie-16gb"
    )

    # a size missing from the table is rejected with a reason, not dropped silently
    assert {r.record.get("sku") for r in report.rejections if r.record} == {
        "Standard_NV4ads_V710_v5"
    }
    assert {r.reason for r in report.rejections} == {"gpu_count: Field required"}
    # GPUs without a reference row (AMD V620, MI25 slices) are reported, never dropped
    for record in report.records:
        assert record.gpu_model or f"gpu:{record.gpu_name_raw}" in report.unmapped

    again = crawl_source(engine, _settings(settings, server), "azure")
    assert again.label == "ok"
    assert again.catalog_version is None
    assert (again.counts["added"], again.counts["changed"], again.counts["withdrawn"]) == (0, 0, 0)
    assert again.counts["updated"] == 0


def _renamed(field: str, new: str) -> bytes:
    page = json.loads(_small_page("NC", SMALL["NC"]))
    for item in page["Items"]:
        item[new] = item.pop(field)
    return json.dumps(page).encode()


FAULTS = {
    "type": (Reply(_renamed("type", "priceType")), "failed: layout changed"),
    "root": (Reply(b'{"items": [], "NextPageLink": null}'), "failed: layout changed"),
}


def test_faults_fail_and_keep_the_catalog(
    engine: Engine, settings: Settings, server: ReplayServer, subtests: pytest.Subtests
) -> None:
    _route_small(server)
    assert crawl_source(engine, _settings(settings, server), "azure").label == "ok"
    check_bad_answers(engine, settings, server, subtests, "azure", first_page_url("", "NC"), FAULTS)


def test_saved_pages_dry_run_without_network_or_database() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    files = [page for series in SERIES for page in _pages(series)]
    report = crawl_source(None, settings, "azure", from_files=files, dry_run=True)
    assert report.label == "ok"
    assert report.counts["seen"] == SEEN and report.counts["rejected"] == REJECTED
    h200 = {(r.region, r.price_kind.value): r for r in report.records if r.sku.endswith("H200_v5")}
    assert h200[("eastus", "on_demand")].amount == Decimal("110.24")
    assert h200[("eastus", "on_demand")].gpu_model == "nvidia-h200-sxm-141gb"
    assert all(r.currency == "USD" and r.price_per.value == "instance" for r in report.records)


def test_row_mapping_rules() -> None:
    source = AzureRetailPrices()
    row = {
        "currencyCode": "USD",
        "retailPrice": Decimal("6.98"),
        "armRegionName": "eastus",
        "productName": "Virtual Machines NCads H100 v5 Series",
        "skuName": "NC40ads H100 v5 Low Priority",
        "armSkuName": "standard_nc40ads_h100_v5",  # casing varies between meters
        "type": "Consumption",
        "unitOfMeasure": "1 Hour",
        "isPrimaryMeterRegion": True,
    }
    record = source.record(row)
    assert record is not None
    assert (record["sku"], record["price_kind"], record["gpu_count"]) == (
        "Standard_NC40ads_H100_v5",
        "low_priority",
        "1",
    )
    assert source.record({**row, "productName": row["productName"] + " Windows"}) is None
    assert source.record({**row, "type": "DevTestConsumption"}) is None
    assert source.record({**row, "retailPrice": 0}) is None
    assert source.skipped == {"windows": 1, "devtest": 1, "zero price": 1}
    assert set(SIZES) >= {H100, "Standard_ND96isr_MI300X_v5", "Standard_NV36ads_A10_v5"}


def test_size_table_uses_reference_slugs() -> None:
    slugs = reference_index().gpu_slugs
    assert {size.gpu_model for size in SIZES.values() if size.gpu_model} <= slugs


def test_next_page_link_stays_on_the_configured_host() -> None:
    link = "https://prices.azure.com:443/api/retail/prices?$filter=x&$skip=1000"
    assert rebase(link, "http://127.0.0.1:8080") == (
        "http://127.0.0.1:8080/api/retail/prices?$filter=x&$skip=1000"
    )
    with pytest.raises(LayoutChanged):
        rebase("https://evil.example/steal?x=1", "https://prices.azure.com")
