"""The issue-4 spiders beyond the first five, and issue 24's Crusoe and Voltage Park: offline
parses of their authored fixtures (exact offers) and the hook a "layout changed" error names.

Offline parses run the spider's own ``parse`` in-process (``--from-file``); crawls over
HTTP are in the contract suite (test_source_contract.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from crawlers.base import Context, SourceError
from crawlers.http import FetchPolicy
from crawlers.registry import all_sources, get_source
from crawlers.scrapy.runner import SpiderOutput, run_spider
from schema.records import OfferRecord
from service.core.config import Settings
from service.crawl.run import crawl_source
from service.crawl.seed import seed_files
from tests.conftest import FIXTURES
from tests.support.factories import gpu_of

D = Decimal
PAGES: dict[str, tuple[str, ...]] = {
    "hyperstack-web": ("gpu-pricing.html",),
    "scaleway-web": ("prices-gpu.html",),
    "datacrunch-web": ("products.html",),
    "gcore-web": ("ai-gpu.html",),
    "genesiscloud-web": ("pricing.html",),
    "crusoe-web": ("pricing.html",),
    "voltagepark-web": ("pricing.html",),
    "ovhcloud-web": ("public-cloud-prices.html", "bare-metal-gpu.html"),
}
Row = tuple[str, str, str, str | None, int, str]
"""(sku, price_kind, region, gpu_model, gpu_count, amount)"""


@pytest.fixture
def offline() -> Settings:
    return Settings(environment="test", _env_file=None)  # type: ignore[call-arg]


def pages(name: str) -> list[Path]:
    return [FIXTURES / name / page for page in PAGES[name]]


def offers(settings: Settings, name: str, files: list[Path] | None = None) -> list[OfferRecord]:
    report = crawl_source(None, settings, name, from_files=files or pages(name), dry_run=True)
    assert report.label == "ok", report.label
    assert not report.rejections
    return report.records


def parse(name: str, files: list[Path] | None = None) -> SpiderOutput:
    cls: Any = all_sources()[name]
    ctx = Context(base_url=cls.base_url)
    return run_spider(cls, ctx, FetchPolicy(), from_files=files or pages(name))


def rows(records: list[OfferRecord]) -> set[Row]:
    table = {
        (r.sku, r.price_kind.value, r.region, gpu_of(r), int(r.gpu_count or 0), str(r.amount))
        for r in records
    }
    assert len(table) == len(records), "duplicate offers"
    return table


def basis(records: list[OfferRecord]) -> set[tuple[str, str, str]]:
    """The (currency, unit, price_per) triples the records use."""
    return {(r.currency, r.unit.value, r.price_per.value) for r in records}


# ---------------------------------------------------------------- offline parses


def test_hyperstack(offline: Settings) -> None:
    records = offers(offline, "hyperstack-web")
    g = "global"
    assert rows(records) == {
        ("NVIDIA H200 SXM", "on_demand", g, "nvidia-h200-sxm-141gb", 1, "3.50"),
        ("NVIDIA H100 SXM", "on_demand", g, "nvidia-h100-sxm-80gb", 1, "2.40"),
        ("NVIDIA H100 NVLink", "on_demand", g, "nvidia-h100-pcie-80gb", 1, "1.95"),
        ("NVIDIA H100", "on_demand", g, "nvidia-h100-pcie-80gb", 1, "1.90"),  # not SXM
        ("NVIDIA A100 SXM", "on_demand", g, "nvidia-a100-sxm-80gb", 1, "1.60"),
        ("NVIDIA L40", "on_demand", g, "nvidia-l40-48gb", 1, "1.00"),
        ("NVIDIA RTX A6000", "on_demand", g, "nvidia-rtx-a6000-48gb", 1, "0.50"),
        ("NVIDIA A4000", "on_demand", g, "nvidia-rtx-a4000-16gb", 1, "0.15"),
        ("NVIDIA A100 SXM", "spot", g, "nvidia-a100-sxm-80gb", 1, "1.08"),
        ("NVIDIA H100 SXM", "spot", g, "nvidia-h100-sxm-80gb", 1, "1.60"),
    }
    assert basis(records) == {("USD", "hour", "gpu")}
    h200 = next(r for r in records if r.sku == "NVIDIA H200 SXM")
    assert (h200.vcpus, h200.memory_gb, h200.gpu_memory_gb) == (D(24), D(240), D(141))
    assert D("2.04") not in {r.amount for r in records}  # reservation: no term, skipped
    assert parse("hyperstack-web").no_price == {"Coming soon": 1}


def test_scaleway(offline: Settings) -> None:
    records = offers(offline, "scaleway-web")
    assert rows(records) == {
        ("H100-1-80G", "on_demand", "fr-par-2", "nvidia-h100-pcie-80gb", 1, "2.73"),
        ("H100-1-80G", "on_demand", "pl-waw-2", "nvidia-h100-pcie-80gb", 1, "2.73"),
        ("H100-2-80G", "on_demand", "fr-par-2", "nvidia-h100-pcie-80gb", 2, "5.46"),
        ("H100-SXM-8-80G", "on_demand", "fr-par-2", "nvidia-h100-sxm-80gb", 8, "23.028"),
        ("L40S-1-48G", "on_demand", "fr-par-2", "nvidia-l40s-48gb", 1, "1.40"),
        ("L40S-8-48G", "on_demand", "fr-par-2", "nvidia-l40s-48gb", 8, "11.20"),
        ("L4-1-24G", "on_demand", "fr-par-2", "nvidia-l4-24gb", 1, "0.75"),
        ("GPU-3070-S", "on_demand", "fr-par-2", "nvidia-rtx-3070-8gb", 1, "0.98"),
        ("RENDER-S", "on_demand", "fr-par-1", "nvidia-p100-pcie-16gb", 1, "1.221"),
    }
    assert basis(records) == {("EUR", "hour", "instance")}  # HT, per instance-hour
    assert all(not r.price_floor for r in records)
    assert parse("scaleway-web").no_price == {"Coming soon": 1}


def test_scaleway_reads_the_table_when_the_json_is_gone(tmp_path: Path, offline: Settings) -> None:
    source = pages("scaleway-web")[0].read_text(encoding="utf-8")
    page = tmp_path / "no-json.html"
    page.write_text(source.replace('id="__NEXT_DATA__"', 'id="__OTHER__"'), encoding="utf-8")
    assert rows(offers(offline, "scaleway-web", [page])) == rows(offers(offline, "scaleway-web"))


def test_datacrunch(offline: Settings) -> None:
    records = offers(offline, "datacrunch-web")
    g = "global"
    expected = {
        ("8B200.240V", "nvidia-b200-sxm-180gb", 8, "29.10", "11.64"),
        ("1B200.30V", "nvidia-b200-sxm-180gb", 1, "3.64", "1.46"),
        ("8H200.141S.176V", "nvidia-h200-sxm-141gb", 8, "24.96", "9.98"),
        ("1H200.141S.44V", "nvidia-h200-sxm-141gb", 1, "3.12", "1.25"),
        ("8H100.80S.176V", "nvidia-h100-sxm-80gb", 8, "19.92", "7.97"),
        ("1H100.80S.30V", "nvidia-h100-sxm-80gb", 1, "2.49", "1.00"),
        ("8A100.176V", "nvidia-a100-sxm-80gb", 8, "10.32", "4.13"),
        ("1L40S.20V", "nvidia-l40s-48gb", 1, "0.91", "0.36"),
    }
    want = {(sku, "on_demand", g, m, n, od) for sku, m, n, od, _ in expected}
    want |= {(sku, "spot", g, m, n, spot) for sku, m, n, _, spot in expected}
    want.add(("1RTXPRO6000.30V", "on_demand", g, "nvidia-rtx-pro-6000-96gb", 1, "1.39"))
    assert rows(records) == want
    assert basis(records) == {("USD", "hour", "instance")}
    assert D("23.28") not in {r.amount for r in records}  # the daily dynamic price
    b200 = next(r for r in records if r.sku == "8B200.240V")
    assert (b200.vcpus, b200.memory_gb) == (D(240), D(1800))
    assert not [r for r in records if r.sku.startswith("CPU")]
    assert parse("datacrunch-web").no_price == {"Contact us": 1, "–": 2}


def test_gcore(offline: Settings) -> None:
    records = offers(offline, "gcore-web")
    g = "global"
    assert rows(records) == {
        ("bm3-ai-ndp-1xlarge-h200-141-8", "on_demand", g, "nvidia-h200-sxm-141gb", 8, "29.00"),
        ("bm3-ai-1xlarge-h100-80-8", "on_demand", g, "nvidia-h100-sxm-80gb", 8, "22.40"),
        ("bm3-ai-1xlarge-a100-80-8", "on_demand", g, "nvidia-a100-sxm-80gb", 8, "13.20"),
        ("g3-ai-32-192-1500-l40s-48-1", "on_demand", g, "nvidia-l40s-48gb", 1, "1.55"),
        ("g3-ai-48-384-3000-l40s-48-2", "on_demand", g, "nvidia-l40s-48gb", 2, "3.10"),
        ("bm1-ai-small-v1pod-4", "on_demand", g, "graphcore-gc200-ipu", 4, "0.80"),  # 4 IPUs
    }
    assert basis(records) == {("EUR", "hour", "instance")}
    metal = {r.sku for r in records if r.bare_metal}
    assert metal == {r.sku for r in records if r.sku.startswith("bm")}
    assert parse("gcore-web").no_price == {"Contact sales": 1}  # price_status "hide"


def test_gcore_price_service_error_is_rejected_not_dropped(
    tmp_path: Path, offline: Settings
) -> None:
    source = pages("gcore-web")[0].read_text(encoding="utf-8")
    page = tmp_path / "error.html"
    page.write_text(source.replace('"price_status":"hide"', '"price_status":"error"'))
    report = crawl_source(None, offline, "gcore-web", from_files=[page], dry_run=True)
    assert report.label == "ok"
    assert [(r.record or {}).get("sku") for r in report.rejections] == ["bm3-ai-1xlarge-b200-180-8"]
    assert not parse("gcore-web", [page]).complete  # so ingest withdraws nothing


def test_genesiscloud(offline: Settings) -> None:
    records = offers(offline, "genesiscloud-web")
    assert rows(records) == {
        ("hgx-b200", "on_demand", "global", "nvidia-b200-sxm-180gb", 1, "3.75"),
        ("hgx-h200", "on_demand", "global", "nvidia-h200-sxm-141gb", 1, "2.80"),
        ("hgx-h100", "on_demand", "global", "nvidia-h100-sxm-80gb", 1, "2.19"),
    }
    assert basis(records) == {("USD", "hour", "gpu")}
    assert {r.sku for r in records if r.price_floor} == {"hgx-h200"}  # "from $2.80"
    assert {r.gpu_name_raw for r in records} == {
        "NVIDIA HGX B200",  # the "New" tag is not part of the name
        "NVIDIA HGX H200",
        "NVIDIA HGX H100",
    }
    assert parse("genesiscloud-web").no_price == {"Coming soon": 1}


def test_crusoe(offline: Settings) -> None:
    records = offers(offline, "crusoe-web")
    g, od, spot = "global", "on_demand", "spot"
    assert rows(records) == {
        ("nvidia-h200-141gb-hgx", od, g, "nvidia-h200-sxm-141gb", 1, "4.29"),
        ("nvidia-h100-80gb-hgx", od, g, "nvidia-h100-sxm-80gb", 1, "3.90"),
        ("nvidia-h100-80gb-hgx", spot, g, "nvidia-h100-sxm-80gb", 1, "1.60"),
        ("nvidia-a100-80gb-sxm", od, g, "nvidia-a100-sxm-80gb", 1, "1.95"),
        ("nvidia-a100-80gb-sxm", spot, g, "nvidia-a100-sxm-80gb", 1, "1.30"),
        ("nvidia-a100-40gb-pcie", od, g, "nvidia-a100-pcie-40gb", 1, "1.45"),
        ("nvidia-a100-40gb-pcie", spot, g, "nvidia-a100-pcie-40gb", 1, "1.00"),
        ("nvidia-l40s-48gb-pcie", od, g, "nvidia-l40s-48gb", 1, "1.00"),
        ("nvidia-l40s-48gb-pcie", spot, g, "nvidia-l40s-48gb", 1, "0.50"),
        ("amd-mi300x-192gb", od, g, "amd-mi300x-192gb", 1, "3.45"),
        ("amd-mi300x-192gb", spot, g, "amd-mi300x-192gb", 1, "0.95"),
    }
    assert basis(records) == {("USD", "hour", "gpu")}
    assert {r.gpu_memory_gb for r in records} == {D(141), D(80), D(40), D(48), D(192)}
    # GB200 and B200 (both columns) and H200's spot column say "Contact sales"
    assert parse("crusoe-web").no_price == {"Contact sales": 5}


def test_voltagepark(offline: Settings) -> None:
    records = offers(offline, "voltagepark-web")
    g, h100 = "global", "nvidia-h100-sxm-80gb"
    assert rows(records) == {
        ("hgx-h100-on-demand-ethernet", "on_demand", g, h100, 1, "1.99"),
        ("hgx-h100-on-demand-3200-gbps-infiniband", "on_demand", g, h100, 8, "2.29"),
    }
    assert basis(records) == {("USD", "hour", "gpu")}
    assert parse("voltagepark-web").no_price == {}  # Long-Term Reserve is not read


def test_ovhcloud(offline: Settings) -> None:
    records = offers(offline, "ovhcloud-web")
    g = "global"
    hourly = {
        ("h100-380", "nvidia-h100-pcie-80gb", 1, "2.80"),
        ("h100-760", "nvidia-h100-pcie-80gb", 2, "5.60"),
        ("h100-1520", "nvidia-h100-pcie-80gb", 4, "11.20"),
        ("a100-180", "nvidia-a100-pcie-80gb", 1, "2.75"),
        ("l40s-90", "nvidia-l40s-48gb", 1, "1.40"),
        ("l4-90", "nvidia-l4-24gb", 1, "0.75"),
        ("t1-45", "nvidia-v100-sxm2-16gb", 1, "1.80"),  # "€1,80 HT / heure"
        ("t2-45", "nvidia-v100s-pcie-32gb", 1, "1.94"),
        ("rtx5000-28", "nvidia-quadro-rtx-5000-16gb", 1, "0.36"),  # Quadro RTX 5000
    }
    monthly = {
        ("SCALE-GPU-1", "nvidia-l4-24gb", 2, "1299.99"),  # "À partir de 1 299,99 € HT/mois"
        ("SCALE-GPU-2", "nvidia-l40s-48gb", 2, "2649.99"),
        ("HGR-AI-2", "nvidia-l40s-48gb", 4, "5199.99"),
    }
    assert rows(records) == {(s, "on_demand", g, m, n, a) for s, m, n, a in hourly} | {
        (s, "monthly", g, m, n, a) for s, m, n, a in monthly
    }
    cloud = [r for r in records if r.price_kind.value == "on_demand"]
    metal = [r for r in records if r.price_kind.value == "monthly"]
    assert basis(cloud) == {("EUR", "hour", "instance")}
    assert basis(metal) == {("EUR", "month", "instance")}
    assert all(r.price_floor and r.bare_metal for r in metal)
    assert not any(r.price_floor for r in cloud)
    assert D("2.16") not in {r.amount for r in records}  # the hidden TTC copy
    assert not [r for r in records if r.sku.startswith(("b3-", "HGR-SDS"))]  # no GPU
    h100 = next(r for r in records if r.sku == "h100-380")
    assert (h100.vcpus, h100.memory_gb, h100.gpu_memory_gb) == (D(30), D(380), D(80))
    assert parse("ovhcloud-web").no_price == {"Sur demande": 1, "Sur devis": 1}


def test_ovhcloud_pages_parse_in_any_order(offline: Settings) -> None:
    swapped = list(reversed(pages("ovhcloud-web")))
    assert rows(offers(offline, "ovhcloud-web", swapped)) == rows(offers(offline, "ovhcloud-web"))


def test_seed_replays_every_page_in_start_url_order() -> None:
    for name, files in PAGES.items():
        assert [p.name for p in seed_files(get_source(name))] == list(files)


# ---------------------------------------------------------------- layout changed


def _swap(old: str, new: str) -> Callable[[str], str]:
    return lambda page: page.replace(old, new)


LAYOUT_CHANGES: dict[str, tuple[Callable[[str], str], str]] = {
    "hyperstack-web": (_swap("page-price_card", "pricing-card"), "page-price_card"),
    "scaleway-web": (
        lambda p: p.replace("ComponentPricingOffer", "Offer").replace("<th", "<td"),
        "GPU Instances table",
    ),
    "datacrunch-web": (_swap("GPU model", "Accelerator"), "GPU model"),
    "gcore-web": (_swap('"component":"gpu-pricing"', '"component":"prices"'), "gpu-pricing"),
    "genesiscloud-web": (_swap("per GPU/hour", "per hour"), "per GPU/hour"),
    "voltagepark-web": (_swap("pricing11_plan", "pricing12_plan"), "div.pricing11_plan"),
    "ovhcloud-web": (
        lambda p: p.replace("<th>Prix</th>", "<th>Tarif</th>").replace("data-server", "data-x"),
        "GPU price table",
    ),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_CHANGES))
def test_layout_changed(tmp_path: Path, offline: Settings, name: str) -> None:
    edit, hook = LAYOUT_CHANGES[name]
    mangled = []
    for path in pages(name):
        copy = tmp_path / path.name
        copy.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
        mangled.append(copy)
    report = crawl_source(None, offline, name, from_files=mangled, dry_run=True)
    assert report.label == "failed: layout changed"
    assert not report.records
    with pytest.raises(SourceError, match=re.escape(hook)):
        parse(name, mangled)
