"""RunPod GraphQL through a real local HTTP server: cloud prices, compliance evidence, errors."""

from __future__ import annotations

import json
import zlib
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select

from crawlers.base import Response
from crawlers.providers.runpod import RunPod
from schema.crawl import CrawlRun, CrawlRunPayload, RawPayload
from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.factories import gpu_of
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, offers_by

PATH = "/graphql"
FILE = FIXTURES / "runpod" / "gpu-catalog.json"
OFFER = Offer.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
PAYLOAD = RawPayload.__table__  # type: ignore[attr-defined]
PRICES = 106


def _offers(engine: Engine) -> dict[tuple[str, str], dict[str, Any]]:
    return offers_by(engine, "runpod", "sku", "price_kind")


def test_secure_and_community_prices_and_stored_compliance_evidence(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, Reply.file(FILE))
    report = crawl_source(engine, configure(settings, server, "runpod"), "runpod")
    assert report.label == "ok", report
    assert report.counts["added"] == PRICES

    offers = _offers(engine)
    secure = offers[("NVIDIA H100 80GB HBM3/secure", "on_demand")]
    assert (secure["amount"], secure["price_per"], secure["gpu_count"], secure["unit"]) == (
        Decimal("2.69"),
        "gpu",
        1,
        "hour",
    )
    assert secure["region"] == "global" and secure["country"] is None
    assert offers[("NVIDIA H100 80GB HBM3/community", "spot")]["amount"] == Decimal("1.59")
    assert offers[("NVIDIA A100 80GB PCIe/community", "on_demand")]["amount"] == Decimal("1.19")
    assert offers[("NVIDIA B200/secure", "spot")]["amount"] == Decimal("3.59")
    assert ("NVIDIA B200/community", "on_demand") not in offers  # not on Community Cloud
    assert not any(sku.startswith("AMD Instinct MI300X") for sku, _ in offers)  # no price

    slugs = {r.sku: gpu_of(r) for r in report.records}
    assert slugs["NVIDIA H100 80GB HBM3/secure"] == "nvidia-h100-sxm-80gb"
    assert slugs["NVIDIA RTX 6000 Ada Generation/community"] == "nvidia-rtx-6000-ada-48gb"

    method, _, headers, body = server.requests[-1]
    assert method == "POST"
    assert {k.lower(): v for k, v in headers.items()}["authorization"] == "Bearer test-key"
    query = json.loads(body)["query"]
    assert "securePrice" in query and "compliance" in query

    # The compliance list rides in the stored raw payload: a loader reads it from there.
    with engine.connect() as conn:
        stored = conn.execute(
            select(PAYLOAD.c.compressed)
            .join(RUN_PAYLOAD, RUN_PAYLOAD.c.sha256 == PAYLOAD.c.sha256)
            .where(RUN_PAYLOAD.c.crawl_run_id == report.crawl_run_id)
        ).scalar_one()
    evidence = RunPod().compliance(Response("stored", 200, zlib.decompress(stored)))
    by_centre = {e["data_center"]: e for e in evidence}
    assert len(by_centre) == 29
    assert by_centre["US-TX-3"]["schemes"] == [
        "hipaa",
        "iso27001",
        "pci_dss",
        "soc1_type2",
        "soc2_type2",
        "soc3",
    ]
    assert by_centre["EUR-IS-1"]["compliance"] == ["GDPR", "ISO_IEC_27001", "RENEWABLE"]
    assert by_centre["EUR-IS-1"]["schemes"] == ["iso27001"]
    assert by_centre["US-KS-1"]["listed"] is False

    again = crawl_source(engine, configure(settings, server, "runpod"), "runpod")
    assert again.label == "ok" and again.catalog_version is None


def test_graphql_errors_fail_clearly(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = {
        "errors": [
            {
                "message": 'Cannot query field "compliance" on type "DataCenter".',
                "locations": [{"line": 20, "column": 5}],
                "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"},
            }
        ],
        "data": None,
    }
    server.route(PATH, Reply(json.dumps(body).encode()))
    report = crawl_source(engine, configure(settings, server, "runpod"), "runpod")
    assert report.label == "failed: graphql error"
    with engine.connect() as conn:
        error = conn.execute(select(RUN.c.error).where(RUN.c.id == report.crawl_run_id)).scalar()
    assert 'Cannot query field "compliance"' in error
    assert _offers(engine) == {}
    server.route(PATH, Reply(b'{"data": null}'))  # no errors and no data: not a known layout
    report = crawl_source(engine, configure(settings, server, "runpod"), "runpod")
    assert report.label.startswith("failed: layout changed") and _offers(engine) == {}


def test_saved_answer_dry_run() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "runpod", from_files=[FILE], dry_run=True)
    assert report.label == "ok"
    assert len(report.records) == PRICES
    by_key = {(r.sku, r.price_kind.value): r for r in report.records}
    assert by_key[("NVIDIA H200/secure", "on_demand")].amount == Decimal("3.99")
    assert gpu_of(by_key[("NVIDIA H200/secure", "on_demand")]) == "nvidia-h200-sxm-141gb"
