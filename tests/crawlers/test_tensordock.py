"""TensorDock marketplace through a real local HTTP server: cheapest GPU price per country."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import Engine

from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, offers_by

PATH = "/api/v0/client/deploy/hostnodes"
# (sku, region) -> (amount per GPU-hour, gpu model)
EXPECTED = {
    ("a100-pcie-80gb", "US"): ("0.75", "nvidia-a100-pcie-80gb"),
    ("a100-sxm4-80gb", "DE"): ("0.85", "nvidia-a100-sxm-80gb"),
    ("a40-pcie-48gb", "NL"): ("0.4", "nvidia-a40-48gb"),
    ("geforcertx3090-pcie-24gb", "US"): ("0.2", "nvidia-rtx-3090-24gb"),
    ("geforcertx4090-pcie-24gb", "DE"): ("0.37", "nvidia-rtx-4090-24gb"),
    ("geforcertx4090-pcie-24gb", "NL"): ("0.36", "nvidia-rtx-4090-24gb"),
    ("geforcertx4090-pcie-24gb", "US"): ("0.33", "nvidia-rtx-4090-24gb"),  # offline 0.29 ignored
    ("h100-sxm5-80gb", "FI"): ("2.4", "nvidia-h100-sxm-80gb"),
    ("h100-sxm5-80gb", "US"): ("2.15", "nvidia-h100-sxm-80gb"),  # the cheaper of two hosts
    ("l40-pcie-48gb", "DE"): ("0.6", "nvidia-l40-48gb"),
    ("l40s-pcie-48gb", "CA"): ("0.65", "nvidia-l40s-48gb"),
    ("rtxa4000-pcie-16gb", "US"): ("0.22", "nvidia-rtx-a4000-16gb"),
    ("rtxa5000-pcie-24gb", "CA"): ("0.21", "nvidia-rtx-a5000-24gb"),
    ("rtxa6000-pcie-48gb", "CA"): ("0.39", "nvidia-rtx-a6000-48gb"),
    ("rtxa6000-pcie-48gb", "GB"): ("0.5", "nvidia-rtx-a6000-48gb"),
    ("rtxa6000-pcie-48gb", "US"): ("0.45", "nvidia-rtx-a6000-48gb"),
    ("v100-sxm2-16gb", "SE"): ("0.19", "nvidia-v100-sxm2-16gb"),
}


def test_hosts_become_the_cheapest_gpu_price_per_country(
    engine: Engine, settings: Settings, reference_data: None, server: ReplayServer
) -> None:
    server.route(PATH, Reply.file(FIXTURES / "tensordock" / "hostnodes.json"))
    report = crawl_source(engine, configure(settings, server, "tensordock"), "tensordock")
    assert report.label == "ok", report

    offers = offers_by(engine, "tensordock", "sku", "region")
    got = {k: (str(o["amount"].normalize()), o["gpu_slug"]) for k, o in offers.items()}
    assert got == {k: (str(Decimal(a).normalize()), g) for k, (a, g) in EXPECTED.items()}
    for (_, region), offer in offers.items():
        assert offer["country"] == region
        assert (offer["price_per"], offer["gpu_count"], offer["price_kind"]) == (
            "gpu",
            1,
            "on_demand",
        )
    headers = {k.lower(): v for k, v in server.requests[-1][2].items()}
    assert "authorization" not in headers  # the host list is public


def test_a_country_name_nobody_knows_is_region_unknown(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = (
        b'{"success": true, "hostnodes": {"h1": {"location": {"city": "X", "region": "Y",'
        b' "country": "Atlantis"}, "specs": {"gpu": {"h100-sxm5-80gb": {"amount": 1,'
        b' "price": 2.5, "vram": 80}}}, "status": {"online": true}}}}'
    )
    server.route(PATH, Reply(body))
    report = crawl_source(engine, configure(settings, server, "tensordock"), "tensordock")
    assert report.label == "ok", report
    offer = offers_by(engine, "tensordock", "sku", "region")[("h100-sxm5-80gb", "unknown")]
    assert offer["country"] is None and offer["amount"] == Decimal("2.5")
