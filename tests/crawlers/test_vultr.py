"""Vultr Cloud GPU plans through a real local HTTP server: cursor paging, GPU slices."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from crawlers.providers.vultr import plans_url
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, offers_by

DIR = FIXTURES / "vultr"
CURSOR = "bmV4dF9fdmNnLWExMDAtNmMtNjBnLTQwdnJhbQ=="  # page 1's meta.links.next
OFFERS = 147  # 28 plans x their locations
# (sku, region) -> (amount, gpu_count, gpu, vcpus, memory_gb, country)
EXPECTED = {
    ("vcg-a100-12c-120g-80vram", "ewr"): ("2.397", "1", "nvidia-a100-pcie-80gb", 12, 120, "US"),
    ("vcg-a100-96c-960g-640vram", "del"): ("19.178", "8", "nvidia-a100-pcie-80gb", 96, 960, "IN"),
    ("vcg-a100-1c-6g-4vram", "ams"): ("0.123", "0.05", "nvidia-a100-pcie-80gb", 1, 6, "NL"),
    ("vcg-a16-2c-8g-2vram", "lhr"): ("0.059", "0.125", "nvidia-a16-16gb", 2, 8, "GB"),
    ("vcg-a40-1c-5g-2vram", "blr"): ("0.073", "0.0417", "nvidia-a40-48gb", 1, 5, "IN"),
    ("vcg-l40s-128c-1500g-384vram", "atl"): ("13.368", "8", "nvidia-l40s-48gb", 128, 1500, "US"),
    ("vcg-l40s-32c-375g-96vram", "ams"): ("3.342", "2", "nvidia-l40s-48gb", 32, 375, "NL"),
}


def _offers(engine: Engine) -> dict[tuple[str, str], dict[str, Any]]:
    return offers_by(engine, "vultr", "sku", "region")


def _serve(server: ReplayServer) -> None:
    server.route(plans_url(""), Reply.file(DIR / "plans-page-1.json"))
    server.route(plans_url("", CURSOR), Reply.file(DIR / "plans-page-2.json"))


def test_plans_become_one_offer_per_location_with_gpu_slices(
    engine: Engine, settings: Settings, reference_data: None, server: ReplayServer
) -> None:
    _serve(server)
    report = crawl_source(engine, configure(settings, server, "vultr"), "vultr")
    assert report.label == "ok", report
    assert report.counts["seen"] == report.counts["added"] == OFFERS
    assert [r[1] for r in server.requests] == [plans_url(""), plans_url("", CURSOR)]

    offers = _offers(engine)
    assert len(offers) == OFFERS
    for key, (amount, count, gpu, vcpus, memory, country) in EXPECTED.items():
        offer = offers[key]
        got = (
            offer["amount"],
            offer["gpu_count"],
            offer["gpu_slug"],
            offer["vcpus"],
            offer["memory_gb"],
            offer["country"],
        )
        assert got == (Decimal(amount), Decimal(count), gpu, vcpus, memory, country), key
        assert (offer["currency"], offer["price_kind"], offer["unit"]) == (
            "USD",
            "on_demand",
            "hour",
        )
    assert {o["gpu_slug"] for o in offers.values()} == {
        "nvidia-a16-16gb",
        "nvidia-a40-48gb",
        "nvidia-a100-pcie-80gb",
        "nvidia-l40s-48gb",
    }
    assert {r for _, r in offers} == {"ewr", "ord", "lax", "atl", "ams", "lhr", "blr", "del"}
    assert all(o["country"] for o in offers.values())
    headers = {k.lower(): v for k, v in server.requests[-1][2].items()}
    assert "authorization" not in headers  # listing plans needs no key


def test_an_unknown_gpu_type_is_kept_and_reported_unmapped(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    page = (
        b'{"plans": [{"id": "vcg-x1-8c-64g-24vram", "vcpu_count": 8, "ram": 65536, "disk": 100,'
        b' "disk_count": 1, "bandwidth": 1000, "monthly_cost": 500, "hourly_cost": 0.685,'
        b' "type": "vcg", "locations": ["ewr"], "gpu_vram_gb": 24, "gpu_type": "NVIDIA_X1"}],'
        b' "meta": {"total": 1, "links": {"next": "", "prev": ""}}}'
    )
    server.route(plans_url(""), Reply(page))
    report = crawl_source(engine, configure(settings, server, "vultr"), "vultr")
    assert report.label == "ok", report
    assert report.counts["unmapped"] == 1
    offer = _offers(engine)[("vcg-x1-8c-64g-24vram", "ewr")]
    assert offer["gpu_slug"] is None and offer["gpu_name_raw"] == "NVIDIA_X1"
    assert offer["gpu_count"] == 1 and offer["amount"] == Decimal("0.685")
