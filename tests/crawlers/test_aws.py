"""AWS Price List bulk API through a real local HTTP server: region index, streamed offers."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from crawlers.normalize.reference import reference_index
from crawlers.providers.aws import FAMILIES, GPU_COUNTS, INDEX_PATH, AwsPriceList
from schema.prices import CatalogVersion, Offer
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.bench.aws_parse import measure_parse, write_synthetic_offer
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import check_bad_answers, offers_by, versions

DIR = FIXTURES / "aws"
OFFER = Offer.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
REGIONS = ("us-east-1", "eu-central-1", "ap-northeast-1")
# 153 instance type × region pairs, each with 5 prices (on-demand, No Upfront 1y/3y per
# hour, All Upfront 1y/3y per term)
SEEN = 765


def _settings(settings: Settings, server: ReplayServer, **extra: Any) -> Settings:
    update = {"source_base_urls": {"aws": server.url}, "http_max_retries": 2, **extra}
    return settings.model_copy(update=update)


def _offer_path(region: str) -> str:
    index = json.loads((DIR / "region_index.json").read_bytes())
    return str(index["regions"][region]["currentVersionUrl"])


def _route_fixtures(server: ReplayServer) -> list[str]:
    server.route(INDEX_PATH, Reply.file(DIR / "region_index.json"))
    for region in REGIONS:
        server.route(_offer_path(region), Reply.file(DIR / f"{region}-index.json"))
    return [INDEX_PATH, *(_offer_path(region) for region in REGIONS)]


def _small_offer(types: set[str]) -> bytes:
    """The us-east-1 offer file cut down to a few instance types (all their variants)."""
    offer = json.loads((DIR / "us-east-1-index.json").read_bytes())
    offer["products"] = {
        sku: product
        for sku, product in offer["products"].items()
        if product.get("attributes", {}).get("instanceType") in types
    }
    for kind in ("OnDemand", "Reserved"):
        terms = offer["terms"][kind]
        offer["terms"][kind] = {sku: terms[sku] for sku in offer["products"] if sku in terms}
    return json.dumps(offer, indent=2).encode()


SMALL = {"p5.48xlarge", "g6.xlarge", "m5.large"}


def _route_small(server: ReplayServer) -> None:
    index = json.loads((DIR / "region_index.json").read_bytes())
    index["regions"] = {"us-east-1": index["regions"]["us-east-1"]}
    server.route(INDEX_PATH, Reply(json.dumps(index).encode()))
    server.route(_offer_path("us-east-1"), Reply(_small_offer(SMALL)))


def _offers(engine: Engine) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    return offers_by(engine, "aws", "sku", "region", "price_kind", "unit")


def test_full_crawl_reads_every_region(
    engine: Engine, settings: Settings, reference_data: None, server: ReplayServer
) -> None:
    _route_fixtures(server)
    report = crawl_source(engine, _settings(settings, server), "aws")
    assert report.label == "ok", report
    assert report.counts["seen"] == report.counts["added"] == SEEN
    assert report.counts["rejected"] == 0

    offers = _offers(engine)
    p5 = offers[("p5.48xlarge", "us-east-1", "on_demand", "hour")]
    assert p5["amount"] == Decimal("98.32") and p5["currency"] == "USD"
    assert (p5["gpu_slug"], p5["gpu_count"], p5["gpu_memory_gb"]) == ("nvidia-h100-sxm-80gb", 8, 80)
    assert (p5["vcpus"], p5["memory_gb"], p5["country"]) == (192, 2048, "US")  # "2,048 GiB"
    assert p5["source_url"] == (
        "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/"
        "us-east-1/index.json"
    )
    # No Upfront: the hourly fee; All Upfront: the fee for the whole term
    assert offers[("p5.48xlarge", "us-east-1", "reserved_1y", "hour")]["amount"] == Decimal(
        "60.9584"
    )
    assert offers[("p5.48xlarge", "us-east-1", "reserved_1y", "term_1y")]["amount"] == 499544
    assert offers[("p5.48xlarge", "us-east-1", "reserved_3y", "hour")]["amount"] == Decimal(
        "42.2776"
    )
    assert offers[("p5.48xlarge", "us-east-1", "reserved_3y", "term_3y")]["amount"] == 981863
    frankfurt = offers[("p5.48xlarge", "eu-central-1", "on_demand", "hour")]
    assert frankfurt["amount"] == Decimal("117.984") and frankfurt["country"] == "DE"
    assert offers[("g5.xlarge", "ap-northeast-1", "on_demand", "hour")]["country"] == "JP"
    # only Linux, shared tenancy, no SQL, "Used" capacity, AWS Regions, standard No/All Upfront
    assert {key[2:] for key in offers if key[:2] == ("g6.xlarge", "us-east-1")} == {
        ("on_demand", "hour"),
        ("reserved_1y", "hour"),
        ("reserved_1y", "term_1y"),
        ("reserved_3y", "hour"),
        ("reserved_3y", "term_3y"),
    }
    assert {key[1] for key in offers} == set(REGIONS)  # no Local Zone
    assert {key[0].split(".")[0] for key in offers} <= set(FAMILIES)  # no m5, c7i, t3
    metal = offers[("g4dn.metal", "us-east-1", "on_demand", "hour")]
    assert metal["bare_metal"] is True and metal["gpu_count"] == 8
    inf2 = offers[("inf2.48xlarge", "us-east-1", "on_demand", "hour")]
    assert (inf2["gpu_slug"], inf2["gpu_count"]) == ("aws-inferentia2-32gb", 12)
    assert offers[("p6-b200.48xlarge", "us-east-1", "on_demand", "hour")]["gpu_slug"] == (
        "nvidia-b200-sxm-180gb"
    )
    assert offers[("g5g.16xlarge", "us-east-1", "on_demand", "hour")]["gpu_slug"] == (
        "nvidia-t4-16gb"
    )
    assert {sku for sku, *_ in offers} == set(GPU_COUNTS)  # every family listed, every size
    # cluster facts: the price list's networkPerformance is the source's speed; what it
    # does not say (EFA or not, NVSwitch) comes from the reference data, or stays unknown
    assert (p5["network_gbps"], p5["network"], p5["cluster_basis"]) == (3200, "efa", "rrrs")
    assert (p5["interconnect"], p5["interconnect_gbps"]) == ("nvswitch", 900)
    small = offers[("g6.xlarge", "us-east-1", "on_demand", "hour")]  # "Up to 25 Gigabit"
    assert (small["network_gbps"], small["network"], small["interconnect"]) == (25, None, "pcie")
    arm = offers[("g5g.16xlarge", "us-east-1", "on_demand", "hour")]  # no reference row
    assert (arm["network_gbps"], arm["interconnect"], arm["cluster_basis"]) == (25, None, "---s")

    again = crawl_source(engine, _settings(settings, server), "aws")
    assert again.label == "ok" and again.catalog_version is None
    assert (again.counts["added"], again.counts["changed"], again.counts["updated"]) == (0, 0, 0)


def _renamed(path: tuple[str, ...], new: str) -> bytes:
    offer = json.loads(_small_offer(SMALL))
    if len(path) == 1:
        offer[new] = offer.pop(path[0])
    else:  # a product attribute block
        for product in offer["products"].values():
            product[new] = product.pop(path[1])
    return json.dumps(offer).encode()


FAULTS = {
    "products": (Reply(_renamed(("products",), "items")), "failed: layout changed"),
    "terms": (Reply(_renamed(("terms",), "prices")), "failed: layout changed"),
}


def test_faults_fail_and_keep_the_catalog(
    engine: Engine, settings: Settings, server: ReplayServer, subtests: pytest.Subtests
) -> None:
    _route_small(server)
    assert crawl_source(engine, _settings(settings, server), "aws").label == "ok"
    assert len(_offers(engine)) == 10
    check_bad_answers(engine, settings, server, subtests, "aws", _offer_path("us-east-1"), FAULTS)


def test_renamed_region_index_field_is_a_layout_change(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    server.route(INDEX_PATH, Reply(b'{"formatVersion": "v1.0", "offers": {}}'))
    report = crawl_source(engine, _settings(settings, server), "aws")
    assert report.label.startswith("failed: layout changed")


def test_offer_files_without_gpus_are_an_empty_result(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    _route_small(server)
    server.route(_offer_path("us-east-1"), Reply(_small_offer({"m5.large"})))
    report = crawl_source(engine, _settings(settings, server), "aws")
    assert report.label.startswith("failed: empty result")
    assert _offers(engine) == {} and versions(engine) == 0


def test_saved_offer_files_dry_run() -> None:
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    files = [DIR / f"{region}-index.json" for region in REGIONS]
    report = crawl_source(None, settings, "aws", from_files=files, dry_run=True)
    assert report.label == "ok" and report.counts["seen"] == SEEN
    assert set(report.unmapped) <= {"gpu:AWS Inferentia"}  # inf1 has no reference row yet
    index = crawl_source(
        None, settings, "aws", from_files=[DIR / "region_index.json"], dry_run=True
    )
    assert index.label.startswith("failed: empty result")  # an index holds no prices


def test_unknown_size_of_a_known_family_takes_the_product_gpu_count() -> None:
    source = AwsPriceList()
    product = json.loads(_small_offer({"g6.xlarge"}))["products"]
    (item,) = [p for p in product.values() if p["attributes"]["operatingSystem"] == "Linux"
               and p["attributes"]["tenancy"] == "Shared"
               and p["attributes"]["capacitystatus"] == "Used"
               and p["attributes"]["preInstalledSw"] == "NA"]  # fmt: skip
    item["attributes"].update(instanceType="g6.96xlarge", gpu="16")
    record = source.product(item, None)
    assert record is not None and record["gpu_count"] == 16
    item["attributes"].update(operatingSystem="Windows")
    assert source.product(item, None) is None
    assert source.skipped == {"operatingSystem Windows": 1}


def test_family_table_uses_reference_slugs() -> None:
    slugs = reference_index().gpu_slugs
    assert {family.gpu_model for family in FAMILIES.values() if family.gpu_model} <= slugs
    assert {sku.split(".")[0] for sku in GPU_COUNTS} == set(FAMILIES)


def test_offer_file_parse_streams_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "offer.json"
    expected = write_synthetic_offer(path, size_mb=100)
    assert path.stat().st_size > 100 * 1024**2
    result = measure_parse(path)
    assert result["records"] == expected
    assert result["peak_mb"] < 200, result
