"""Vast.ai offer search through a real local HTTP server: id paging, cheapest ask per offer."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, offers_by

PATH = "/api/v0/bundles/"
PAGES = [FIXTURES / "vastai" / "bundles-page-1.json", FIXTURES / "vastai" / "bundles-page-2.json"]
OFFER = Offer.__table__  # type: ignore[attr-defined]
RECORDS = 513  # 268 on-demand + 245 interruptible, from 400 asks


def _offers(engine: Engine) -> dict[tuple[str, str, str], dict[str, Any]]:
    return offers_by(engine, "vastai", "sku", "region", "price_kind")


def _page(n: int) -> dict[str, Any]:
    return json.loads(PAGES[n].read_text())


def _replies(pages: list[dict[str, Any]] | None = None) -> list[Reply]:
    return [Reply(json.dumps(p).encode()) for p in pages or [_page(0), _page(1)]]


def test_offers_are_paged_by_id_and_reduced_to_the_cheapest_ask(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, *_replies())
    report = crawl_source(engine, configure(settings, server, "vastai"), "vastai")
    assert report.label == "ok", report
    assert report.counts["added"] == RECORDS

    assert [r[0] for r in server.requests] == ["POST", "POST"]
    first, second = (json.loads(r[3]) for r in server.requests)
    assert first["verified"] == {"eq": True} and first["rentable"] == {"eq": True}
    assert first["order"] == [["id", "asc"]] and first["limit"] == 250 and "id" not in first
    assert second["id"] == {"gt": max(o["id"] for o in _page(0)["offers"])}

    offers = _offers(engine)
    # three 8x H100 SXM asks in the US (Nevada, California, Texas): the cheapest wins
    h100 = offers[("8x H100 SXM 80GB", "US", "on_demand")]
    assert h100["amount"] == Decimal("12.642083")  # 12.642083333333334 from the API
    assert (h100["country"], h100["gpu_count"], h100["currency"]) == ("US", 8, "USD")
    bid = offers[("8x H100 SXM 80GB", "US", "interruptible")]
    assert bid["amount"] == Decimal("5.317739") and bid["price_floor"] is True
    assert offers[("8x H100 SXM 80GB", "TW", "on_demand")]["amount"] == Decimal("15.216694")
    # usable MiB snapped to nominal size: L40S shows 46068 MiB
    assert offers[("1x L40S 48GB", "US", "on_demand")]["gpu_memory_gb"] == 48
    # hosts without a location are kept, not dropped
    assert any(region == "unknown" for _, region, _ in offers)

    slugs = {r.sku: r.gpu_model for r in report.records}
    assert slugs["8x H100 SXM 80GB"] == "nvidia-h100-sxm-80gb"
    assert slugs["1x A100 SXM4 40GB"] == "nvidia-a100-sxm-40gb"
    assert slugs["1x A100 PCIE 80GB"] == "nvidia-a100-pcie-80gb"

    server.hits.clear()
    again = crawl_source(engine, configure(settings, server, "vastai"), "vastai")
    assert again.label == "ok" and again.catalog_version is None


def test_a_cheaper_ask_moves_only_its_offer(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(PATH, *_replies())
    assert crawl_source(engine, configure(settings, server, "vastai"), "vastai").label == "ok"
    first = _page(0)
    for offer in first["offers"]:
        if (
            offer["gpu_name"] == "H100 SXM"
            and offer["num_gpus"] == 8
            and offer["geolocation"] == "Texas, US"
        ):
            offer["dph_total"] = 11.9
    server.hits.clear()
    server.route(PATH, *_replies([first, _page(1)]))
    report = crawl_source(engine, configure(settings, server, "vastai"), "vastai")
    assert report.label == "ok"
    assert (
        report.counts["changed"] == 1 and report.counts["added"] == report.counts["withdrawn"] == 0
    )
    assert _offers(engine)[("8x H100 SXM 80GB", "US", "on_demand")]["amount"] == Decimal("11.9")
    kept = _offers(engine)
    server.route(PATH, Reply(b'{"results": []}'))  # a renamed root: a layout change
    renamed = crawl_source(engine, configure(settings, server, "vastai"), "vastai")
    assert renamed.label.startswith("failed: layout changed") and _offers(engine) == kept


def test_saved_pages_dry_run() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, settings, "vastai", from_files=PAGES, dry_run=True)
    assert report.label == "ok"
    assert len(report.records) == RECORDS
    assert {r.currency for r in report.records} == {"USD"}
    assert all(r.amount == r.amount.quantize(Decimal("0.000001")) for r in report.records)
