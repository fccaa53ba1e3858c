"""CUDO Compute bare-metal machine types through a real local HTTP server: numbered pages,
on-demand prices only, the key sent as a Bearer token."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import Engine

from crawlers.providers.cudo import machine_types_url
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, offers_by

DIR = FIXTURES / "cudo"
PAGES = [machine_types_url("", n) for n in (1, 2, 3)]
# (sku, data centre) -> (USD per machine-hour, GPUs, GPU model, country)
EXPECTED = {
    ("sapphire-rapids-h200", "us-carlsbad-1"): ("25.12", 8, "nvidia-h200-sxm-141gb", "US"),
    ("sapphire-rapids-h200", "no-kristiansand-1"): ("24.72", 8, "nvidia-h200-sxm-141gb", "NO"),
    ("sapphire-rapids-h200", "us-newyork-1"): ("25.52", 8, "nvidia-h200-sxm-141gb", "US"),
    ("sapphire-rapids-h100", "us-carlsbad-1"): ("19.60", 8, "nvidia-h100-sxm-80gb", "US"),
    ("sapphire-rapids-h100", "us-newyork-1"): ("19.92", 8, "nvidia-h100-sxm-80gb", "US"),
    ("sapphire-rapids-h100", "no-kristiansand-1"): ("18.80", 8, "nvidia-h100-sxm-80gb", "NO"),
    ("sapphire-rapids-h100", "se-stockholm-1"): ("19.20", 8, "nvidia-h100-sxm-80gb", "SE"),
    ("sapphire-rapids-h100", "gb-bournemouth-1"): ("19.36", 8, "nvidia-h100-sxm-80gb", "GB"),
    ("epyc-milan-a100", "us-newyork-1"): ("11.92", 8, "nvidia-a100-sxm-80gb", "US"),
    ("epyc-milan-a100", "gb-bournemouth-1"): ("11.60", 8, "nvidia-a100-sxm-80gb", "GB"),
    ("epyc-genoa-l40s", "us-carlsbad-1"): ("7.92", 8, "nvidia-l40s-48gb", "US"),
    ("epyc-genoa-l40s", "se-stockholm-1"): ("7.68", 8, "nvidia-l40s-48gb", "SE"),
    ("epyc-genoa-l40s-4", "ca-montreal-3"): ("3.96", 4, "nvidia-l40s-48gb", "CA"),
    ("epyc-genoa-l40s", "no-kristiansand-1"): ("7.60", 8, "nvidia-l40s-48gb", "NO"),
    ("epyc-rome-a40", "gb-bournemouth-1"): ("1.96", 4, "nvidia-a40-48gb", "GB"),
    ("epyc-rome-a40", "no-kristiansand-1"): ("1.88", 4, "nvidia-a40-48gb", "NO"),
    ("epyc-rome-a40-8", "us-carlsbad-1"): ("3.92", 8, "nvidia-a40-48gb", "US"),
    ("epyc-rome-rtx-a6000", "gb-bournemouth-1"): ("2.12", 4, "nvidia-rtx-a6000-48gb", "GB"),
    ("epyc-rome-rtx-a6000", "us-newyork-1"): ("2.20", 4, "nvidia-rtx-a6000-48gb", "US"),
    ("epyc-rome-rtx-a6000-8", "ca-montreal-3"): ("4.24", 8, "nvidia-rtx-a6000-48gb", "CA"),
}


def test_machine_types_become_one_on_demand_offer_per_data_centre(
    engine: Engine, settings: Settings, reference_data: None, server: ReplayServer
) -> None:
    for n, page in enumerate(PAGES, 1):
        server.route(page, Reply.file(DIR / f"machine-types-page-{n}.json"))
    report = crawl_source(engine, configure(settings, server, "cudo"), "cudo")
    assert report.label == "ok", report
    assert [r[1] for r in server.requests] == PAGES  # 23 machine types, 10 a page

    offers = offers_by(engine, "cudo", "sku", "region")
    got = {
        key: (o["amount"], o["gpu_count"], o["gpu_slug"], o["country"]) for key, o in offers.items()
    }
    # no CPU-only machine, no machine with only a committed price (epyc-milan-a100 in
    # ca-montreal-3), no 12-month price
    assert got == {k: (Decimal(a), n, g, c) for k, (a, n, g, c) in EXPECTED.items()}
    for offer in offers.values():
        assert (offer["price_kind"], offer["unit"], offer["price_per"], offer["currency"]) == (
            "on_demand",
            "hour",
            "instance",
            "USD",
        )
        assert offer["bare_metal"] is True
    h100 = offers[("sapphire-rapids-h100", "se-stockholm-1")]
    assert (h100["vcpus"], h100["memory_gb"]) == (112, 2048)
    headers = {k.lower(): v for k, v in server.requests[0][2].items()}
    assert headers["authorization"] == "Bearer test-key"


def test_an_unknown_gpu_model_id_is_kept_and_reported_unmapped(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    page = (
        b'{"pageNumber": 1, "pageSize": 10, "totalCount": 1, "machineTypes": [{"id": "x1",'
        b' "dataCenterId": "se-stockholm-1", "cpuCores": 8, "memoryGib": 64, "gpus": 2,'
        b' "gpuModelId": "nvidia-x1", "machinesFree": 1, "prices": [{"dataCenterId":'
        b' "se-stockholm-1", "machineTypeId": "x1", "commitmentTerm": "COMMITMENT_TERM_NONE",'
        b' "priceHr": {"value": "3.500000"}}]}]}'
    )
    server.route(PAGES[0], Reply(page))
    report = crawl_source(engine, configure(settings, server, "cudo"), "cudo")
    assert report.label == "ok", report
    assert report.counts["unmapped"] == 1
    offer = offers_by(engine, "cudo", "sku", "region")[("x1", "se-stockholm-1")]
    assert offer["gpu_slug"] is None and offer["gpu_name_raw"] == "nvidia-x1"
    assert offer["gpu_count"] == 2 and offer["amount"] == Decimal("3.5")
