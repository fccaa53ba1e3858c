"""Lambda Cloud API through a real local HTTP server: prices, auth, failures, no flapping."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, offers_by

PATH = "/api/v1/instance-types"
DIR = FIXTURES / "lambda"
OFFER = Offer.__table__  # type: ignore[attr-defined]
TYPES = 19


def _offers(engine: Engine) -> dict[str, dict[str, Any]]:
    return offers_by(engine, "lambda", "sku")


def test_instance_types_become_global_hourly_offers(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, Reply.file(DIR / "instance-types.json"))
    report = crawl_source(engine, configure(settings, server, "lambda"), "lambda")
    assert report.label == "ok", report
    assert report.counts["seen"] == report.counts["added"] == TYPES

    offers = _offers(engine)
    h100 = offers["gpu_8x_h100_sxm5"]
    assert h100["amount"] == Decimal("23.92")  # 2392 cents per instance-hour
    assert (h100["currency"], h100["price_kind"], h100["unit"], h100["price_per"]) == (
        "USD",
        "on_demand",
        "hour",
        "instance",
    )
    assert h100["gpu_count"] == 8 and h100["vcpus"] == 208 and h100["memory_gb"] == 1800
    assert h100["gpu_memory_gb"] == 80
    assert h100["region"] == "global" and h100["country"] is None
    assert offers["gpu_1x_a10"]["amount"] == Decimal("0.75")
    assert offers["gpu_8x_b200_sxm6"]["amount"] == Decimal("47.92")
    assert "gpu_8x_a100" in offers  # listed whether or not it has capacity now

    slugs = {r.sku: r.gpu_model for r in report.records}
    assert slugs["gpu_8x_h100_sxm5"] == "nvidia-h100-sxm-80gb"
    assert slugs["gpu_1x_h100_pcie"] == "nvidia-h100-pcie-80gb"
    assert slugs["gpu_8x_a100_80gb_sxm4"] == "nvidia-a100-sxm-80gb"

    headers = {k.lower(): v for k, v in server.requests[-1][2].items()}
    assert headers["authorization"] == "Bearer test-key"
    assert headers["user-agent"].startswith("gpuatlas/")

    # An hour later capacity has moved between regions; prices have not: nothing is written.
    server.route(PATH, Reply.file(DIR / "instance-types-capacity-moved.json"))
    again = crawl_source(engine, configure(settings, server, "lambda"), "lambda")
    assert again.label == "ok" and again.catalog_version is None
    assert [again.counts[k] for k in ("added", "changed", "withdrawn", "updated")] == [0, 0, 0, 0]

    # An empty answer after good crawls is quarantined: the catalog stays as it was.
    server.route(PATH, Reply(b'{"data": {}}'))
    empty = crawl_source(engine, configure(settings, server, "lambda"), "lambda")
    assert empty.status.value == "quarantined"
    offers = _offers(engine)
    assert len(offers) == TYPES and {o["status"] for o in offers.values()} == {"active"}

    # A renamed root is a layout change: the catalog stays as it was.
    server.route(PATH, Reply(b'{"instance_types": {}}'))
    renamed = crawl_source(engine, configure(settings, server, "lambda"), "lambda")
    assert renamed.label.startswith("failed: layout changed") and _offers(engine) == offers


def test_saved_response_dry_run_needs_no_key_or_database() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(
        None, settings, "lambda", from_files=[DIR / "instance-types.json"], dry_run=True
    )
    assert report.label == "ok"
    by_sku = {r.sku: r for r in report.records}
    assert len(by_sku) == TYPES
    assert by_sku["gpu_1x_gh200"].amount == Decimal("1.49")
    assert by_sku["gpu_1x_gh200"].gpu_model == "nvidia-gh200-96gb"
    assert by_sku["gpu_8x_v100"].gpu_count == 8
