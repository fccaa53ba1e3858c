"""RunPod Serverless per-second prices through a real local HTTP server."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import Engine

from crawlers.providers.runpod_serverless import gpu_names, price_table
from service.core.config import Settings
from service.crawl.run import crawl_source
from service.query.filters import OfferFilters
from service.query.offers import list_offers
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import configure, offers_by

PATH = "/serverless/pricing.md"
PAGE = (FIXTURES / "runpod-serverless" / "pricing.md").read_bytes()
HEADER = (
    b"| GPU type(s) | Memory | Flex cost per second | Active cost per second |\n"
    b"| --- | --- | --- | --- |\n"
)


def crawl(engine: Engine, settings: Settings, server: ReplayServer, *bodies: bytes) -> str:
    server.route(PATH, *(Reply(b) for b in bodies))
    return crawl_source(
        engine, configure(settings, server, "runpod-serverless"), "runpod-serverless"
    ).label


def test_tiers_become_per_second_offers_per_gpu(
    engine: Engine, settings: Settings, reference_data: None, server: ReplayServer
) -> None:
    server.route(
        PATH,
        Reply(b"slow down", status=429, headers={"Retry-After": "0"}),
        Reply.file(FIXTURES / "runpod-serverless" / "pricing.md"),
    )
    report = crawl_source(
        engine, configure(settings, server, "runpod-serverless"), "runpod-serverless"
    )
    assert report.label == "ok", report
    offers = offers_by(engine, "runpod-serverless", "sku", "price_kind")
    assert len(offers) == 32  # 16 GPUs in 9 tiers, flex and active
    h100 = offers[("serverless/H100", "serverless")]
    assert (h100["amount"], h100["unit"], h100["price_per"], h100["gpu_count"]) == (
        Decimal("0.00116"),
        "second",
        "gpu",
        1,
    )
    assert h100["gpu_slug"] == "nvidia-h100-sxm-80gb"  # the family default, marked inferred
    assert offers[("serverless/H100", "serverless_active")]["amount"] == Decimal("0.00093")
    # one tier, three GPUs, one price; PRO names a pool, not a GPU
    tier = {s: offers[(f"serverless/{s}", "serverless")] for s in ("L40", "L40S", "RTX 6000 Ada")}
    assert {o["amount"] for o in tier.values()} == {Decimal("0.00053")}
    assert tier["RTX 6000 Ada"]["gpu_slug"] == "nvidia-rtx-6000-ada-48gb"
    assert all(o["gpu_slug"] for o in offers.values())  # every GPU name resolves
    # listed with its hourly equivalent, found by price kind, and placed where RunPod runs
    with engine.connect() as conn:
        rows = list_offers(conn, OfferFilters(price_kind="serverless", gpu="h100"), 10)
    [row] = rows
    assert row["gpu_hour_usd"] == Decimal("4.176")  # 0.00116 USD a second × 3,600
    assert row["country"] is not None and row["locations"]


def test_a_reordered_table_reads_by_header_and_a_bad_cell_is_rejected(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = (
        b"| Active cost per second | GPU type(s) | Flex cost per second | Memory |\n"
        b"| --- | --- | --- | --- |\n"
        b"| \\$0.00093 | H100 PRO | \\$0.00116 | 80 GB |\n"
        b"| Contact sales | B300 | \\$0.00300 | 288 GB |\n"
    )
    label = crawl(engine, settings, server, body)
    assert label == "ok", label
    offers = offers_by(engine, "runpod-serverless", "sku", "price_kind")
    assert offers[("serverless/H100", "serverless")]["amount"] == Decimal("0.00116")
    assert offers[("serverless/H100", "serverless_active")]["amount"] == Decimal("0.00093")
    assert offers[("serverless/B300", "serverless")]["amount"] == Decimal("0.003")
    # the active cell that is no price is a rejection, not an offer at 0
    assert ("serverless/B300", "serverless_active") not in offers


def test_malformed_hostile_and_oversized_pages_fail_cleanly(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    # a row missing its price cells: Markdown pads it with empty cells, each a rejection
    short_row = HEADER + b"| H100 PRO | 80 GB |\n"
    assert crawl(engine, settings, server, short_row).startswith("failed: empty result")
    no_table = b"# Pricing\n\nServerless is billed per second. <script>alert(1)</script>\n"
    assert crawl(engine, settings, server, no_table).startswith("failed: layout changed")
    oversized = PAGE + b"\n" + b"x" * 1_100_000
    assert crawl(engine, settings, server, oversized).startswith("failed: layout changed")
    assert crawl(engine, settings, server, b"\xff\xfe\x00garbage").startswith(
        "failed: layout changed"
    )
    assert offers_by(engine, "runpod-serverless", "sku", "price_kind") == {}


def test_tier_names() -> None:
    assert gpu_names("L40, L40S, 6000 Ada PRO") == ["L40", "L40S", "RTX 6000 Ada"]
    assert gpu_names("4090 PRO") == ["GeForce RTX 4090"]
    assert gpu_names("A4000, A4500, RTX 4000") == ["RTX A4000", "RTX A4500", "RTX 4000 Ada"]
    assert gpu_names("MI300X") == ["MI300X"]  # unknown short names pass on as written
    columns, rows = price_table(PAGE.decode())
    assert set(columns) == {"gpus", "memory", "flex", "active"} and len(rows) == 9
