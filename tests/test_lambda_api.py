"""Lambda Cloud API through a real local HTTP server: prices, auth, failures, no flapping."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, select

from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.replay import ReplayServer, Reply

PATH = "/api/v1/instance-types"
DIR = FIXTURES / "lambda"
OFFER = Offer.__table__  # type: ignore[attr-defined]
TYPES = 19


def _settings(settings: Settings, server: ReplayServer, **extra: Any) -> Settings:
    update: dict[str, Any] = {
        "source_base_urls": {"lambda": server.url},
        "http_max_retries": 2,
        "lambda_api_key": "test-key",
    }
    return settings.model_copy(update={**update, **extra})


def _offers(engine: Engine) -> dict[str, dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(OFFER).where(OFFER.c.source == "lambda")).mappings().all()
    return {row["sku"]: dict(row) for row in rows}


def test_instance_types_become_global_hourly_offers(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    throttled = Reply(
        b'{"error": {"code": "global/too-many-requests"}}', status=429, headers={"Retry-After": "0"}
    )
    server.route(PATH, throttled, Reply.file(DIR / "instance-types.json"))
    report = crawl_source(engine, _settings(settings, server), "lambda")
    assert report.label == "ok", report
    assert report.counts["seen"] == report.counts["added"] == TYPES
    assert len(server.requests) == 2  # the 429 was waited out

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
    again = crawl_source(engine, _settings(settings, server), "lambda")
    assert again.label == "ok" and again.catalog_version is None
    assert [again.counts[k] for k in ("added", "changed", "withdrawn", "updated")] == [0, 0, 0, 0]

    # An empty answer after good crawls is quarantined: the catalog stays as it was.
    server.route(PATH, Reply(b'{"data": {}}'))
    empty = crawl_source(engine, _settings(settings, server), "lambda")
    assert empty.status.value == "quarantined"
    offers = _offers(engine)
    assert len(offers) == TYPES and {o["status"] for o in offers.values()} == {"active"}


def test_missing_key_is_skipped_without_a_request(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, Reply.file(DIR / "instance-types.json"))
    report = crawl_source(engine, _settings(settings, server, lambda_api_key=None), "lambda")
    assert report.label == "skipped: no credential"
    assert server.requests == []
    assert _offers(engine) == {}


def _renamed_price() -> bytes:
    payload = json.loads((DIR / "instance-types.json").read_text())
    for entry in payload["data"].values():
        item = entry["instance_type"]
        item["price_usd_cents"] = item.pop("price_cents_per_hour")
    return json.dumps(payload).encode()


BAD_ANSWERS = {
    "unauthorized": (
        Reply(
            b'{"error": {"code": "global/invalid-api-key", "message": "API key was invalid, '
            b'expired, or deleted."}}',
            status=401,
        ),
        "failed: unauthorized",
    ),
    "truncated-json": (Reply(b'{"data": {"gpu_1x_a10": '), "failed: invalid payload"),
    "renamed-field": (Reply(_renamed_price()), "failed: layout changed"),
    "renamed-root": (Reply(b'{"instance_types": {}}'), "failed: layout changed"),
    "empty": (Reply(b'{"data": {}}'), "failed: empty result"),
}


def test_bad_answers_fail_and_write_nothing(
    engine: Engine, settings: Settings, server: ReplayServer, subtests: pytest.Subtests
) -> None:
    for case, (reply, label) in BAD_ANSWERS.items():
        with subtests.test(case):
            server.route(PATH, reply)
            report = crawl_source(engine, _settings(settings, server), "lambda")
            assert report.label.startswith(label)
            assert _offers(engine) == {}


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
