"""Lambda Cloud API through a real local HTTP server: prices, auth, failures, no flapping."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, select

from schema.prices import Offer
from service.config import Settings
from service.crawl import crawl_source
from tests.conftest import FIXTURES
from tests.replay import Reply, ReplayServer

PATH = "/api/v1/instance-types"
DIR = FIXTURES / "lambda"
OFFER = Offer.__table__  # type: ignore[attr-defined]
TYPES = 19


def _settings(settings: Settings, server: ReplayServer, **extra: Any) -> Settings:
    update: dict[str, Any] = {
        "source_base_urls": {"lambda": server.url}, "http_max_retries": 2,
        "lambda_api_key": "test-key",
    }
    return settings.model_copy(update={**update, **extra})


def _offers(engine: Engine) -> dict[str, dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(OFFER).where(OFFER.c.source == "lambda")).mappings().all()
    return {row["sku"]: dict(row) for row in rows}


def _fixture(name: str = "instance-types.json") -> dict[str, Any]:
    return json.loads((DIR / name).read_text())


def test_instance_types_become_global_hourly_offers(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, Reply.file(DIR / "instance-types.json"))
    report = crawl_source(engine, _settings(settings, server), "lambda")
    assert report.label == "ok", report
    assert report.counts["seen"] == report.counts["added"] == TYPES

    offers = _offers(engine)
    h100 = offers["gpu_8x_h100_sxm5"]
    assert h100["amount"] == Decimal("23.92")  # 2392 cents per instance-hour
    assert (h100["currency"], h100["price_kind"], h100["unit"], h100["price_per"]) == (
        "USD", "on_demand", "hour", "instance")
    assert h100["gpu_count"] == 8 and h100["vcpus"] == 208 and h100["memory_gb"] == 1800
    assert h100["gpu_memory_gb"] == 80
    assert h100["region"] == "global" and h100["country"] is None
    assert offers["gpu_1x_a10"]["amount"] == Decimal("0.75")
    assert offers["gpu_8x_b200_sxm6"]["amount"] == Decimal("47.92")
    # listed whether or not it has capacity now
    assert "gpu_8x_a100" in offers

    slugs = {r.sku: r.gpu_model for r in report.records}
    assert slugs["gpu_8x_h100_sxm5"] == "nvidia-h100-sxm-80gb"
    assert slugs["gpu_1x_h100_pcie"] == "nvidia-h100-pcie-80gb"
    assert slugs["gpu_8x_a100_80gb_sxm4"] == "nvidia-a100-sxm-80gb"

    (request,) = server.requests
    headers = {k.lower(): v for k, v in request[2].items()}
    assert headers["authorization"] == "Bearer test-key"
    assert headers["user-agent"].startswith("gpuatlas/")

    # An hour later capacity has moved between regions; prices have not: nothing is written.
    server.route(PATH, Reply.file(DIR / "instance-types-capacity-moved.json"))
    again = crawl_source(engine, _settings(settings, server), "lambda")
    assert again.label == "ok"
    assert again.catalog_version is None
    assert {k: again.counts[k] for k in ("added", "changed", "withdrawn", "updated")} == {
        "added": 0, "changed": 0, "withdrawn": 0, "updated": 0}


def test_missing_key_is_skipped_without_a_request(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, Reply.file(DIR / "instance-types.json"))
    report = crawl_source(engine, _settings(settings, server, lambda_api_key=None), "lambda")
    assert report.label == "skipped: no credential"
    assert server.requests == []
    assert _offers(engine) == {}


def test_rejected_key_is_unauthorized(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = {"error": {"code": "global/invalid-api-key",
                      "message": "API key was invalid, expired, or deleted."}}
    server.route(PATH, Reply(json.dumps(body).encode(), status=401))
    report = crawl_source(engine, _settings(settings, server), "lambda")
    assert report.label == "failed: unauthorized"
    assert _offers(engine) == {}


def test_rate_limit_is_waited_out(engine: Engine, settings: Settings, server: ReplayServer) -> None:
    server.route(PATH, Reply(b'{"error": {"code": "global/too-many-requests"}}', status=429,
                             headers={"Retry-After": "0"}),
                 Reply.file(DIR / "instance-types.json"))
    report = crawl_source(engine, _settings(settings, server), "lambda")
    assert report.label == "ok"
    assert len(server.requests) == 2
    assert len(_offers(engine)) == TYPES


def _renamed_price() -> bytes:
    payload = _fixture()
    for entry in payload["data"].values():
        item = entry["instance_type"]
        item["price_usd_cents"] = item.pop("price_cents_per_hour")
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("body", "label"),
    [
        pytest.param(b'{"data": {"gpu_1x_a10": ', "failed: invalid payload", id="truncated-json"),
        pytest.param(_renamed_price(), "failed: layout changed", id="renamed-field"),
        pytest.param(b'{"instance_types": {}}', "failed: layout changed", id="renamed-root"),
        pytest.param(b'{"data": {}}', "failed: empty result", id="empty"),
    ],
)
def test_bad_payloads_fail_and_write_nothing(
    engine: Engine, settings: Settings, server: ReplayServer, body: bytes, label: str
) -> None:
    server.route(PATH, Reply(body))
    report = crawl_source(engine, _settings(settings, server), "lambda")
    assert report.label.startswith(label)
    assert _offers(engine) == {}


def test_empty_answer_after_a_good_crawl_is_quarantined(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, Reply.file(DIR / "instance-types.json"))
    assert crawl_source(engine, _settings(settings, server), "lambda").label == "ok"
    server.route(PATH, Reply(b'{"data": {}}'))
    report = crawl_source(engine, _settings(settings, server), "lambda")
    assert report.status.value == "quarantined"
    offers = _offers(engine)
    assert len(offers) == TYPES and {o["status"] for o in offers.values()} == {"active"}


def test_saved_response_dry_run_needs_no_key_or_database() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "lambda", from_files=[DIR / "instance-types.json"],
                          dry_run=True)
    assert report.label == "ok"
    by_sku = {r.sku: r for r in report.records}
    assert len(by_sku) == TYPES
    assert by_sku["gpu_1x_gh200"].amount == Decimal("1.49")
    assert by_sku["gpu_1x_gh200"].gpu_model == "nvidia-gh200-96gb"
    assert by_sku["gpu_8x_v100"].gpu_count == 8
