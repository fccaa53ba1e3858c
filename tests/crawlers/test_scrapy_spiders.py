"""Pricing-page spiders parsing saved pages offline (no network, no reactor).

Real captures (../shared/realdata/html) must give exactly the values the realdata README
lists; authored fixtures (fixtures/<source>/) cover each page's traps. End-to-end crawls
over HTTP live in test_scrapy_crawl.py.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from crawlers.base import Context, SourceError
from crawlers.http import FetchPolicy
from crawlers.registry import all_sources
from crawlers.scrapy import HtmlSpider
from crawlers.scrapy.runner import SpiderOutput, run_spider
from schema.records import OfferRecord
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES, ROOT

D = Decimal
PAGES = {
    "lambda-web": "pricing.html",
    "nebius-web": "prices.html",
    "digitalocean-web": "gpu-droplets.html",
    "paperspace-web": "pricing.html",
    "coreweave-web": "pricing.html",
}
REAL = {
    "lambda-web": "html/lambda/lambda-ai-pricing-wayback-20260109.html",
    "nebius-web": "html/nebius/nebius-prices-wayback-20260712.html",
    "digitalocean-web": "html/digitalocean/digitalocean-gpu-droplets-pricing-wayback-20250707.html",
}


@pytest.fixture
def offline() -> Settings:
    return Settings(environment="test", _env_file=None)  # type: ignore[call-arg]


def parse(name: str, *pages: Path) -> SpiderOutput:
    cls: Any = all_sources()[name]
    return run_spider(cls, Context(base_url=cls.base_url), FetchPolicy(), from_files=list(pages))


def offers(settings: Settings, name: str, page: Path) -> list[OfferRecord]:
    report = crawl_source(None, settings, name, from_files=[page], dry_run=True)
    assert report.label == "ok", report.label
    assert not report.rejections
    return report.records


def by(records: list[OfferRecord], *fields: str) -> dict[tuple[object, ...], OfferRecord]:
    table = {tuple(getattr(r, f) for f in fields): r for r in records}
    assert len(table) == len(records), "duplicate offers"
    return table


# ---------------------------------------------------------------- real captures


def test_lambda_real_capture(realdata: Path, offline: Settings) -> None:
    records = offers(offline, "lambda-web", realdata / REAL["lambda-web"])
    assert len(records) == 5
    assert {(r.gpu_count, r.price_per.value, r.unit.value, r.currency) for r in records} == {
        (D(8), "gpu", "hour", "USD")
    }
    prices = {(r.gpu_name_raw, r.amount) for r in records}
    assert prices == {
        ("NVIDIA B200 SXM6 180 GB", D("4.99")),
        ("NVIDIA H100 SXM 80 GB", D("2.99")),
        ("NVIDIA A100 SXM 80 GB", D("1.79")),
        ("NVIDIA A100 SXM 40 GB", D("1.29")),
        ("NVIDIA Tesla V100 16 GB", D("0.55")),
    }
    h100 = next(r for r in records if r.gpu_model == "nvidia-h100-sxm-80gb")
    assert h100.amount * h100.gpu_count == D("23.92")  # per instance
    # same data-plan, told apart by VRAM: two SKUs and two GPU models
    a100 = {r.gpu_model: r.sku for r in records if "A100" in r.sku}
    assert a100 == {
        "nvidia-a100-sxm-80gb": "8x NVIDIA A100 SXM 80 GB",
        "nvidia-a100-sxm-40gb": "8x NVIDIA A100 SXM 40 GB",
    }


def test_nebius_real_capture(realdata: Path, offline: Settings) -> None:
    page = realdata / REAL["nebius-web"]
    records = offers(offline, "nebius-web", page)
    table = by(records, "sku", "price_kind")
    expected = {
        "NVIDIA HGX H100": ("2.15", "3.85"),
        "NVIDIA HGX B200": ("3.95", "7.15"),
        "NVIDIA HGX H200": ("2.45", "4.50"),
        "NVIDIA HGX B300": ("4.30", "7.85"),
    }
    for sku, (spot, on_demand) in expected.items():
        assert table[(sku, "spot")].amount == D(spot)
        assert table[(sku, "on_demand")].amount == D(on_demand)
        assert not table[(sku, "on_demand")].price_floor
    assert all(r.price_per.value == "gpu" and r.unit.value == "hour" for r in records)
    assert not [r for r in records if "NVL72" in r.sku]  # "––" / "Contact us": no price
    floors = {(r.sku, r.price_kind.value, r.amount) for r in records if r.price_floor}
    assert floors == {
        ("NVIDIA L40S with Intel CPU", "spot", D("0.90")),
        ("NVIDIA L40S with Intel CPU", "on_demand", D("1.82")),
        ("NVIDIA L40S with AMD CPU", "spot", D("0.74")),
        ("NVIDIA L40S with AMD CPU", "on_demand", D("1.55")),
    }
    assert parse("nebius-web", page).no_price == {"––": 2, "Contact us": 2}  # counted


def test_digitalocean_real_capture(realdata: Path, offline: Settings) -> None:
    records = offers(offline, "digitalocean-web", realdata / REAL["digitalocean-web"])
    table = by(records, "sku", "price_kind")
    on_demand = {sku: r.amount for (sku, kind), r in table.items() if kind == "on_demand"}
    assert on_demand == {
        "NVIDIA H100x8": D("2.99"),
        "NVIDIA H100": D("3.39"),  # promotional price wins over the struck-through 6.74
        "AMD Instinct™ MI300Xx8": D("1.99"),
        "AMD Instinct™ MI300X": D("1.99"),
        "NVIDIA L40S": D("1.57"),  # its link slug is "undefined": the title is the SKU
        "NVIDIA RTX 4000 Ada Generation": D("0.76"),
        "NVIDIA RTX 6000 Ada Generation": D("1.57"),
    }
    reserved = {sku: r.amount for (sku, kind), r in table.items() if kind == "reserved_1y"}
    assert reserved == {"NVIDIA H100x8": D("1.99"), "AMD Instinct™ MI300Xx8": D("1.49")}
    assert all(r.price_per.value == "gpu" and r.unit.value == "hour" for r in records)
    mi300x = table[("AMD Instinct™ MI300X", "on_demand")]
    assert (mi300x.gpu_count, mi300x.gpu_memory_gb, mi300x.gpu_model) == (
        D(1),
        D(192),
        "amd-mi300x-192gb",
    )
    assert table[("NVIDIA H100x8", "on_demand")].gpu_count == D(8)  # "GPUs per Droplet"
    assert table[("NVIDIA H100x8", "reserved_1y")].gpu_count == D(8)  # title suffix
    assert table[("NVIDIA H100x8", "on_demand")].memory_gb == D(1920)  # "1,920 GiB"


# ---------------------------------------------------------------- authored fixtures


@pytest.mark.parametrize(
    ("name", "count", "no_price", "samples"),
    [
        (
            "lambda-web",
            15,
            {"CONTACT SALES": 1},
            {
                ("1x NVIDIA GH200 96 GB", "on_demand"): "1.49",
                ("4x NVIDIA H100 SXM 80 GB", "on_demand"): "3.09",
            },
        ),
        (
            "nebius-web",
            14,
            {"Contact us": 2},
            {("NVIDIA HGX H100", "on_demand"): "3.85", ("NVIDIA HGX H100", "spot"): "2.15"},
        ),
        (
            "digitalocean-web",
            9,
            {},
            {("NVIDIA H100", "on_demand"): "3.39", ("NVIDIA H100x8", "reserved_1y"): "1.99"},
        ),
        (
            "paperspace-web",
            30,
            {"Contact sales": 1},
            {
                ("H100", "reserved_3y"): "2.24",
                ("H100x8", "on_demand"): "5.95",
                ("A100-80G", "on_demand"): "3.18",
            },
        ),
        (
            "coreweave-web",
            9,
            {"N/A": 6, "Contact sales": 1},
            {("nvidia-gb200-nvl72", "on_demand"): "42.00", ("nvidia-hgx-h100", "spot"): "19.70"},
        ),
    ],
)
def test_fixture_pages(
    offline: Settings,
    name: str,
    count: int,
    no_price: dict[str, int],
    samples: dict[tuple[str, str], str],
) -> None:
    page = FIXTURES / name / PAGES[name]
    records = offers(offline, name, page)
    assert len(records) == count
    table = by(records, "sku", "price_kind")
    for key, amount in samples.items():
        assert table[key].amount == D(amount)
    assert parse(name, page).no_price == no_price


def test_lambda_reads_tabs_from_the_islands_script(offline: Settings) -> None:
    records = offers(offline, "lambda-web", FIXTURES / "lambda-web" / "pricing.html")
    assert {r.gpu_count for r in records} == {D(1), D(2), D(4), D(8)}  # from tab labels
    assert len([r for r in records if r.gpu_count == 8]) == 5  # HTML and JSON deduped


def test_nebius_skips_future_dated_and_cpu_columns(offline: Settings) -> None:
    records = offers(offline, "nebius-web", FIXTURES / "nebius-web" / "prices.html")
    h100 = by(records, "sku", "price_kind")[("NVIDIA HGX H100", "on_demand")]
    assert h100.amount == D("3.85")  # not the "Effective October 1, 2026" 4.50
    assert not [r for r in records if "EPYC" in r.sku or "Ice Lake" in r.sku]
    assert all(r.price_floor for r in records if r.price_kind.value == "spot")  # "from $…"


def test_paperspace_ignores_hidden_copies_and_reads_the_footnote(offline: Settings) -> None:
    records = offers(offline, "paperspace-web", FIXTURES / "paperspace-web" / "pricing.html")
    skus = {r.sku for r in records}
    assert not {"P5000", "P6000", "V100"} & skus  # the hidden legacy grid
    assert D("3.09") not in {r.amount for r in records if r.sku.startswith("H100")}  # template
    h100 = by(records, "sku", "price_kind")
    assert h100[("H100", "reserved_3y")].amount == D("2.24")  # "2.24*"
    assert h100[("H100", "on_demand")].amount == D("5.95")  # from the footnote
    assert h100[("H100x8", "on_demand")].gpu_count == D(8)
    assert h100[("H100x8", "on_demand")].price_per.value == "gpu"


def test_coreweave_drops_footnote_markers_and_mobile_duplicates(offline: Settings) -> None:
    records = offers(offline, "coreweave-web", FIXTURES / "coreweave-web" / "pricing.html")
    table = by(records, "sku", "price_kind")
    nvl72 = table[("nvidia-gb200-nvl72", "on_demand")]
    assert (nvl72.gpu_count, nvl72.price_per.value, nvl72.region) == (
        D(4),
        "instance",
        "north-america",
    )
    assert table[("nvidia-hgx-h100", "on_demand")].memory_gb == D(2048)  # "2,048", not VRAM
    assert "nvidia-hgx-b300" not in {sku for sku, _ in table}  # "Contact sales"


# ---------------------------------------------------------------- bad pages, offline


def _variant(tmp_path: Path, name: str, edit: object, encoding: str = "utf-8") -> Path:
    source = (FIXTURES / name / PAGES[name]).read_text(encoding="utf-8")
    text = edit(source) if callable(edit) else source
    page = tmp_path / f"{name}.html"
    page.write_bytes(text.encode(encoding))
    return page


def test_layout_changed_offline(tmp_path: Path, offline: Settings) -> None:
    page = _variant(tmp_path, "lambda-web", lambda t: t.replace("data-plan", "data-sku"))
    report = crawl_source(None, offline, "lambda-web", from_files=[page], dry_run=True)
    assert report.label == "failed: layout changed"
    with pytest.raises(SourceError, match="tr\\[data-plan\\]"):
        parse("lambda-web", page)


def test_row_without_a_price_is_rejected_not_lost(tmp_path: Path, offline: Settings) -> None:
    page = _variant(
        tmp_path,
        "lambda-web",
        lambda t: t.replace('<td data-label="PRICE/GPU/HR*">$2.99</td>', "", 1).replace(
            '<td data-label="PRICE/GPU/HR*">$0.55</td>',
            '<td data-label="PRICE/GPU/HR*">$O.55</td>',
            1,
        ),
    )
    report = crawl_source(None, offline, "lambda-web", from_files=[page], dry_run=True)
    assert report.label == "ok"
    assert len(report.records) == 13
    reasons = sorted((r.record or {}).get("sku", "") + " | " + r.reason for r in report.rejections)
    assert len(reasons) == 2
    assert reasons[0].startswith("8x NVIDIA H100 SXM 80 GB | ")  # no price cell
    assert "amount: Field required" in reasons[0]
    assert reasons[1] == "8x NVIDIA Tesla V100 16 GB | amount: unparseable amount '$O.55'"


def test_half_a_table(tmp_path: Path, offline: Settings) -> None:
    """A page cut mid-table: whole rows parse, the cut row is rejected with a reason."""
    source = (FIXTURES / "nebius-web" / "prices.html").read_text(encoding="utf-8")
    cut = source.index("<p>$4.50</p>")  # inside the H200 row, before its price cells
    page = tmp_path / "half.html"
    page.write_text(source[:cut])
    report = crawl_source(None, offline, "nebius-web", from_files=[page], dry_run=True)
    assert report.label == "ok"
    assert {r.sku for r in report.records} == {"NVIDIA HGX B300", "NVIDIA HGX B200"}
    assert [(r.record or {}).get("sku") for r in report.rejections] == ["NVIDIA HGX H200"]
    assert not parse("nebius-web", page).complete  # so ingest withdraws nothing


def test_non_utf8_page_decoded_by_its_declared_charset(tmp_path: Path, offline: Settings) -> None:
    page = _variant(
        tmp_path,
        "digitalocean-web",
        lambda t: t.replace('<meta charSet="utf-8"/>', '<meta charset="windows-1252"/>'),
        encoding="cp1252",
    )
    assert "™".encode("cp1252") in page.read_bytes()
    records = offers(offline, "digitalocean-web", page)
    assert "AMD Instinct™ MI300X" in {r.gpu_name_raw for r in records}
    assert len(records) == 9


def test_offline_parsing_starts_no_reactor(offline: Settings) -> None:
    offers(offline, "coreweave-web", FIXTURES / "coreweave-web" / "pricing.html")
    assert "twisted.internet.reactor" not in sys.modules


# ---------------------------------------------------------------- guards


def html_sources() -> dict[str, type[HtmlSpider]]:
    return {n: c for n, c in all_sources().items() if getattr(c, "is_gpuatlas_spider", False)}


def test_every_spider_has_fixtures_docs_and_tests() -> None:
    spiders = html_sources()
    assert set(PAGES) <= set(spiders)
    doc = (ROOT / "docs" / "sources" / "web-pages.md").read_text(encoding="utf-8")
    tests = "".join(
        p.read_text(encoding="utf-8") for p in ROOT.glob("tests/crawlers/test_scrapy_*.py")
    )
    for name, cls in spiders.items():
        folder = FIXTURES / (cls.fixtures or name)
        assert (folder / "robots.txt").is_file(), f"{name}: no fixtures robots.txt"
        assert list(folder.glob("*.html")), f"{name}: no saved page"
        assert f"`{name}`" in doc, f"{name}: not in docs/sources/web-pages.md"
        assert f'"{name}"' in tests, f"{name}: no test"
        assert issubclass(cls, HtmlSpider) and cls.kind == "html"
        assert cls.provider and cls.base_url.startswith("https://") and cls.start_paths
