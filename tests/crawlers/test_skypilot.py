"""SkyPilot catalog CSVs, fetched over a real local HTTP server and ingested; real samples too."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, select

from crawlers.base import Context, Response
from crawlers.platforms.skypilot import (
    GpuInfo,
    GpuInfoRefused,
    amount_text,
    collapse,
    parse_gpu_info,
    per_gpu_memory,
    refine_gpu_name,
)
from crawlers.registry import all_sources, get_source
from schema.crawl import CrawlRun, RejectedRecord
from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import CrawlReport, crawl_source
from tests.conftest import FIXTURES
from tests.support.factories import gpu_of
from tests.support.replay import ReplayServer, Reply, module_server, reused_server  # noqa: F401 (fixtures)
from tests.support.source_contract import offers_by

SKY = FIXTURES / "skypilot"
OFFER = Offer.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
PAPERSPACE = "paperspace/skypilot-catalog-v6-paperspace-vms.csv"
SCALEWAY = "scaleway/skypilot-catalog-v6-scaleway-vms.csv"
LAMBDA_HEADER = (
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
)
H100 = "\"{'Gpus': [{'Name': 'H100', 'Manufacturer': 'NVIDIA', 'Count': 1.0, 'MemoryInfo': {'SizeInMiB': 81920}}], 'TotalGpuMemoryInMiB': 81920}\""


def _settings(settings: Settings, server: ReplayServer, name: str) -> Settings:
    return settings.model_copy(
        update={"source_base_urls": {name: server.url}, "http_max_retries": 2}
    )


def _serve(server: ReplayServer, name: str, *replies: Reply) -> str:
    source: Any = get_source(name)
    path: str = source.catalog_path()
    server.route(path, *replies)
    return server.url + path


def _crawl(
    engine: Engine, settings: Settings, server: ReplayServer, name: str, body: bytes
) -> CrawlReport:
    _serve(server, name, Reply(body, content_type="text/csv"))
    return crawl_source(engine, _settings(settings, server, name), name)


def _offers(engine: Engine, source: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return offers_by(engine, source, "sku", "region", "price_kind")


def _lambda_csv(*rows: str) -> bytes:
    good = [
        f"gpu_1x_h100_pcie,H100,1.0,26.0,200.0,2.49,us-east-1,{H100},",
        f"gpu_1x_h100_pcie,H100,1.0,26.0,200.0,2.49,us-west-3,{H100},",
        f"gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,23.92,us-east-1,{H100},",
    ]
    return ("\n".join([LAMBDA_HEADER, *good, *rows]) + "\n").encode()


# --------------------------------------------------------------------------- sources


def test_every_cloud_is_a_peer_source_of_a_reference_provider() -> None:
    reference = yaml.safe_load((FIXTURES / "reference" / "providers.yaml").read_text())
    slugs = {p["slug"] for p in reference["providers"]}
    sources: dict[str, Any] = {n: c for n, c in all_sources().items() if n.startswith("skypilot:")}
    assert len(sources) >= 20
    for name, cls in sources.items():
        assert name == f"skypilot:{cls.peer}"
        assert cls.kind == "peer"
        assert cls.provider in slugs, f"{name}: provider {cls.provider!r} not in reference data"
        assert cls.currency in {"USD", "EUR"}
        assert (FIXTURES / cls.fixtures).is_dir()
        for sample in cls.seed_fixtures:  # what `gpuatlas seed` replays for this source
            assert (SKY / sample).is_file()
    assert sources["skypilot:scaleway"].currency == "EUR"
    assert sources["skypilot:do"].provider == "digitalocean"
    assert sources["skypilot:oci"].provider == "oracle"
    assert sources["skypilot:vast"].provider == "vastai"
    assert "skypilot:gcp" not in sources  # GPUs priced apart from machine types


FIXTURE_OFFERS = {
    "skypilot:lambda": ("lambda.csv", 12),
    "skypilot:runpod": ("runpod.csv", 33),
    "skypilot:scaleway": ("scaleway.csv", 7),
    "skypilot:aws": ("aws.csv", 14),
    "skypilot:vast": ("vast.csv", 12),
    "skypilot:primeintellect": ("primeintellect.csv", 6),
    "skypilot:do": ("do.csv", 3),
    "skypilot:azure": ("azure.csv", 13),
    "skypilot:oci": ("oci.csv", 9),
    "skypilot:nebius": ("nebius.csv", 9),
    "skypilot:paperspace": ("paperspace.csv", 8),
    "skypilot:ovhcloud": ("ovhcloud.csv", 7),
    "skypilot:seeweb": ("seeweb.csv", 6),
    "skypilot:fluidstack": ("fluidstack.csv", 8),
    "skypilot:cudo": ("cudo.csv", 10),
    "skypilot:hyperbolic": ("hyperbolic.csv", 3),
    "skypilot:hyperstack": ("hyperstack.csv", 8),
    "skypilot:jarvislabs": ("jarvislabs.csv", 6),
    "skypilot:mithril": ("mithril.csv", 8),
    "skypilot:verda": ("verda.csv", 13),
    "skypilot:shadeform": ("shadeform.csv", 11),
}
FIXTURE_REJECTED = {"skypilot:seeweb": 1}
"""Seeweb lists some GPU types without a region: no place, so validation rejects them."""


def test_every_cloud_has_a_fixture_with_offers() -> None:
    sources = {n for n in all_sources() if n.startswith("skypilot:")}
    assert sources == set(FIXTURE_OFFERS), sources ^ set(FIXTURE_OFFERS)


def test_every_fixture_crawls_and_ingests(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    for name, (fixture, offers) in FIXTURE_OFFERS.items():
        url = _serve(server, name, Reply.file(SKY / fixture))
        report = crawl_source(engine, _settings(settings, server, name), name)
        assert report.label == "ok", (name, report.reason)
        assert report.counts["seen"] == report.counts["added"] == offers, name
        assert report.counts["rejected"] == FIXTURE_REJECTED.get(name, 0), name
        stored = _offers(engine, name)
        assert len(stored) == offers, name
        cls: Any = get_source(name)
        assert cls.seed_fixtures == [fixture]
        assert {r["currency"] for r in stored.values()} == {cls.currency}
        assert {r["source_url"] for r in stored.values()} == {url}
        assert {r["provider"] for r in stored.values()} == {cls.provider}
        with engine.connect() as conn:
            run = conn.execute(select(RUN).where(RUN.c.id == report.crawl_run_id)).mappings().one()
        assert (run["source_urls"], run["parser_version"]) == ([url], "1")


def test_columns_are_read_by_header_with_crlf_and_bom(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    # runpod.csv: CRLF, Region/SpotPrice/Price/AvailabilityZone/GpuInfo order
    assert b"\r\n" in (SKY / "runpod.csv").read_bytes()
    report = _crawl(engine, settings, server, "skypilot:runpod", (SKY / "runpod.csv").read_bytes())
    assert report.label == "ok"
    runpod = _offers(engine, "skypilot:runpod")
    spot = runpod[("1x_L40S_SECURE", "CA-MTL-1", "spot")]
    on_demand = runpod[("1x_L40S_SECURE", "CA-MTL-1", "on_demand")]
    assert (spot["amount"], on_demand["amount"]) == (Decimal("0.26"), Decimal("0.86"))
    assert spot["country"] == "CA"  # Region is a country code, the zone is the data centre
    assert on_demand["gpu_memory_gb"] is None  # GpuInfo's "SizeInMiB": 48 is GB: not trusted
    assert ("1x_H100-SXM_SECURE", "US-TX-3", "spot") not in runpod  # empty SpotPrice
    # scaleway.csv: BOM, AvailabilityZone first, EUR, zones are Scaleway's locations
    assert (SKY / "scaleway.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    report = _crawl(
        engine, settings, server, "skypilot:scaleway", (SKY / "scaleway.csv").read_bytes()
    )
    assert report.label == "ok"
    scaleway = _offers(engine, "skypilot:scaleway")
    h100 = scaleway[("H100-1-80G", "fr-par-2", "on_demand")]
    assert (h100["amount"], h100["currency"], h100["gpu_count"]) == (Decimal("2.73"), "EUR", 1)
    assert h100["gpu_memory_gb"] == Decimal("79.65")
    assert h100["gpu_name_raw"] == "NVIDIA H100 PCIe"  # GpuInfo refines AcceleratorName
    assert {k[1] for k in scaleway if k[0] == "RENDER-S"} == {"fr-par-1", "fr-par-2"}
    assert not any(k[0] == "DEV1-S" for k in scaleway)  # CPU-only


def test_zone_rows_collapse_to_one_offer_with_a_floor(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    report = _crawl(engine, settings, server, "skypilot:aws", (SKY / "aws.csv").read_bytes())
    assert report.label == "ok"
    aws = _offers(engine, "skypilot:aws")
    g5_spot = aws[("g5.xlarge", "us-east-1", "spot")]
    assert (g5_spot["amount"], g5_spot["price_floor"]) == (Decimal("0.4086"), True)
    g5 = aws[("g5.xlarge", "us-east-1", "on_demand")]
    assert (g5["amount"], g5["price_floor"]) == (Decimal("1.006"), False)
    g6_spot = aws[("g6.xlarge", "us-east-1", "spot")]
    assert g6_spot["price_floor"] is False  # both zones agree
    assert ("p4de.24xlarge", "us-east-1", "spot") not in aws
    assert aws[("p5.48xlarge", "eu-north-1", "on_demand")]["amount"] == Decimal("98.32")
    assert ("m5.large", "us-east-1", "on_demand") not in aws
    # Vast: hosts of one type in one location, several prices → the lowest, as a floor
    report = _crawl(engine, settings, server, "skypilot:vast", (SKY / "vast.csv").read_bytes())
    vast = _offers(engine, "skypilot:vast")
    texas = vast[("1x-RTX_4090-32-65536", "Texas, US, NA", "on_demand")]
    assert (texas["amount"], texas["price_floor"], texas["country"]) == (
        Decimal("0.35"),
        True,
        "US",
    )
    assert vast[("4x-H100_SXM-32-65536", "The Netherlands, NL, EU", "on_demand")][
        "gpu_memory_gb"
    ] == Decimal("79.65")  # SizeInMiB is the total over 4 GPUs there


def test_spot_only_rows_json_gpu_info_and_float_noise(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = (SKY / "primeintellect.csv").read_bytes()
    report = _crawl(engine, settings, server, "skypilot:primeintellect", body)
    assert report.label == "ok"
    offers = _offers(engine, "skypilot:primeintellect")
    spot_sku = "datacrunch__1xH200_141GB__44__182__SPOT"
    assert offers[(spot_sku, "FIN-02", "spot")]["amount"] == Decimal("0.94")
    assert (spot_sku, "FIN-02", "on_demand") not in offers
    oblivus = offers[("oblivus__4xA100_80GB__124__480", "MON1", "on_demand")]
    assert oblivus["amount"] == Decimal("5.8855")  # 5.8854999999999995 in the file
    assert oblivus["gpu_memory_gb"] == Decimal("80")  # JSON GpuInfo, total over 4 GPUs
    assert oblivus["country"] == "CA"


def test_unchanged_catalog_stores_nothing_twice(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = (SKY / "lambda.csv").read_bytes()
    first = _crawl(engine, settings, server, "skypilot:lambda", body)
    again = crawl_source(engine, _settings(settings, server, "skypilot:lambda"), "skypilot:lambda")
    assert first.counts["added"] == 12
    assert again.label == "ok"
    assert again.counts["added"] == again.counts["changed"] == again.counts["withdrawn"] == 0
    assert again.catalog_version is None


# --------------------------------------------------------------------------- bad input


def test_missing_required_column_is_layout_changed_and_keeps_the_catalog(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    assert _crawl(engine, settings, server, "skypilot:lambda", _lambda_csv()).label == "ok"
    before = _offers(engine, "skypilot:lambda")
    renamed = _lambda_csv().replace(b",Price,", b",PricePerHour,", 1)
    server.hits.clear()
    report = _crawl(engine, settings, server, "skypilot:lambda", renamed)
    assert report.label == "failed: layout changed"
    assert _offers(engine, "skypilot:lambda") == before
    with engine.connect() as conn:
        run = conn.execute(select(RUN).where(RUN.c.id == report.crawl_run_id)).mappings().one()
    assert "Price" in run["error"]


def test_non_numeric_price_rejects_that_row_only(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = _lambda_csv(f"gpu_1x_a10,A10,1.0,30.0,200.0,N/A,us-east-1,{H100},")
    report = _crawl(engine, settings, server, "skypilot:lambda", body)
    assert report.label == "ok"
    assert report.counts["seen"] == 3
    assert report.counts["rejected"] == 1
    with engine.connect() as conn:
        rejected = conn.execute(select(REJECTED)).mappings().one()
    assert rejected["reason"].startswith("amount:")
    assert "N/A" in rejected["reason"]
    assert rejected["record"]["sku"] == "gpu_1x_a10"


def test_hostile_gpu_info_is_never_evaluated(
    engine: Engine, settings: Settings, server: ReplayServer, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    evil = f"\"__import__('os').system('touch {marker}')\""
    in_dict = f"\"{{'Gpus': [{{'Name': __import__('os').system('touch {marker}')}}]}}\""
    nested = '"' + "[" * 3000 + "]" * 3000 + '"'
    big = '"' + "{'Gpus': [" + "{'Name': 'H100'}, " * 400 + "]}" + '"'
    huge = '"' + "x" * 200_000 + '"'  # over the csv module's field limit: unreadable row
    body = _lambda_csv(
        f"gpu_1x_a10,A10,1.0,30.0,200.0,0.75,us-east-1,{evil},",
        f"gpu_1x_a6000,A6000,1.0,14.0,100.0,0.8,us-east-1,{in_dict},",
        f"gpu_8x_v100,V100,8.0,92.0,448.0,4.4,us-east-1,{nested},",
        f"gpu_4x_a6000,A6000,4.0,56.0,400.0,3.2,us-east-1,{big},",
        f"gpu_2x_a6000,A6000,2.0,28.0,200.0,1.6,us-east-1,{huge},",
    )
    started = time.monotonic()
    report = _crawl(engine, settings, server, "skypilot:lambda", body)
    assert time.monotonic() - started < 10
    assert report.label == "ok"
    assert not marker.exists()
    offers = _offers(engine, "skypilot:lambda")
    for sku, name in [
        ("gpu_1x_a10", "A10"),
        ("gpu_1x_a6000", "A6000"),
        ("gpu_8x_v100", "V100"),
        ("gpu_4x_a6000", "A6000"),
    ]:
        offer = offers[(sku, "us-east-1", "on_demand")]
        assert (offer["gpu_name_raw"], offer["gpu_memory_gb"]) == (name, None)
    assert ("gpu_2x_a6000", "us-east-1", "on_demand") not in offers


def test_gpu_info_readings() -> None:
    assert parse_gpu_info("") == GpuInfo()
    assert parse_gpu_info("A100-80GB") == GpuInfo(name="A100-80GB")
    info = parse_gpu_info(
        "{'gpus': [{'name': 'h100', 'count': 8.0, 'memoryinfo': {'sizeinmib': 81559}}]}"
    )
    assert info == GpuInfo("h100", Decimal("8.0"), Decimal("81559"))
    json_info = parse_gpu_info(
        '{"Gpus":[{"Name":"B300","Count":1,"MemoryInfo":{"SizeInMiB":268288}}]}'
    )
    assert json_info.name == "B300"
    assert parse_gpu_info("{'Gpus': [{'Name': 'L4', 'Count': '1.0'}]}").count == Decimal("1.0")
    for hostile in [
        "__import__('os')",
        "{'Gpus': [{'Name': (lambda: 1)()}]}",
        "{'Gpus': 'H100'}",
        "[1, 2, 3]",
        "{" + "'a': 1, " * 2000 + "}",
        "[" * 500 + "]" * 500,
    ]:
        with pytest.raises(GpuInfoRefused):
            parse_gpu_info(hostile)
    assert per_gpu_memory(GpuInfo(memory_mib=Decimal(80)), "per_gpu", Decimal(1)) is None
    assert per_gpu_memory(GpuInfo(memory_mib=Decimal(655360)), "total", Decimal(8)) == "80"
    assert per_gpu_memory(GpuInfo(memory_mib=Decimal(204800)), None, Decimal(1)) is None


def test_name_refinement_collapse_and_amounts() -> None:
    assert refine_gpu_name("H100", "NVIDIA H100 PCIe") == "NVIDIA H100 PCIe"
    assert refine_gpu_name("A100-80GB", "A100") == "A100-80GB"
    assert refine_gpu_name("A100-80GB", "A100 PCIe") == "A100-80GB"
    assert amount_text("0.36979999999999996") == "0.3698"
    assert amount_text("47.60") == "47.60"
    assert amount_text("N/A") == "N/A"
    rows = [
        {"sku": "a", "region": "r", "price_kind": "spot", "amount": "2"},
        {"sku": "a", "region": "r", "price_kind": "spot", "amount": "1.5"},
        {"sku": "a", "region": "r", "price_kind": "on_demand", "amount": "3"},
        {"sku": "a", "region": "r", "price_kind": "on_demand", "amount": "3.0"},
        {"sku": "b", "region": "r", "price_kind": "spot", "amount": "oops"},
    ]
    assert collapse(rows) == [
        {"sku": "a", "region": "r", "price_kind": "spot", "amount": "1.5", "price_floor": True},
        {"sku": "a", "region": "r", "price_kind": "on_demand", "amount": "3"},
        {"sku": "b", "region": "r", "price_kind": "spot", "amount": "oops"},
    ]


BAD_PAYLOADS = [
    ("404", Reply(b"not found", status=404, content_type="text/plain"), "failed: not found"),
    (
        "html",
        Reply(b"<!DOCTYPE html><html>rate page</html>", content_type="text/html"),
        "failed: layout changed",
    ),
    ("empty", Reply(b"", content_type="text/csv"), "failed: layout changed"),
    (
        "unbalanced-quote",
        Reply(_lambda_csv() + b'gpu_1x_x,H100,1,2,3,"4.1,us,,\n', content_type="text/csv"),
        "failed: invalid payload",
    ),
    (
        "cpu-only",
        Reply(_lambda_csv().split(b"\n")[0] + b"\ncpu_4x,,,4,16,0.2,us-east-1,,\n"),
        "failed: empty result",
    ),
]


def test_bad_payloads_fail_cleanly(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    for case, reply, label in BAD_PAYLOADS:
        server.hits.clear()
        _serve(server, "skypilot:lambda", reply)
        report = crawl_source(
            engine, _settings(settings, server, "skypilot:lambda"), "skypilot:lambda"
        )
        assert report.label.startswith(label), (case, report.label)
        assert _offers(engine, "skypilot:lambda") == {}, case
    with engine.connect() as conn:
        statuses = conn.execute(select(RUN.c.status)).scalars().all()
    assert statuses == ["failed"] * len(BAD_PAYLOADS)


def test_short_rows_are_skipped_not_guessed(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = _lambda_csv("gpu_8x_a100,A100,8.0,124.0,1800.0,10.3")  # cut before Region
    report = _crawl(engine, settings, server, "skypilot:lambda", body)
    assert report.label == "ok"
    assert report.counts["seen"] == 3
    assert not any(k[0] == "gpu_8x_a100" for k in _offers(engine, "skypilot:lambda"))


# --------------------------------------------------------------------------- real samples


def _parse_file(name: str, path: Path) -> tuple[Any, list[dict[str, Any]]]:
    source = get_source(name)()
    response = Response(path.as_uri(), 200, path.read_bytes())
    records = [r for r in source.parse(response, Context(base_url="")) if isinstance(r, dict)]
    return source, records


def _by_sku(report: CrawlReport) -> Iterator[tuple[str, Any]]:
    for record in report.records:
        yield record.sku, record


def test_realdata_paperspace(engine: Engine, settings: Settings, realdata: Path) -> None:
    path = realdata / PAPERSPACE
    source, _ = _parse_file("skypilot:paperspace", path)
    assert source.stats["rows"] == 19
    assert source.stats["skipped: no accelerator (CPU-only)"] == 5
    report = crawl_source(engine, settings, "skypilot:paperspace", from_files=[path])
    assert report.label == "ok"
    assert report.counts["seen"] == report.counts["added"] == 14
    records = dict(_by_sku(report))
    assert len(records) == 14  # 14 GPU machine types, one region
    expected = {
        "H100x8": (8, "nvidia-h100-sxm-80gb", "47.60"),
        "H100": (1, "nvidia-h100-sxm-80gb", "5.95"),
        "A100-80G": (1, "nvidia-a100-sxm-80gb", "3.18"),
        "A100-80Gx8": (8, "nvidia-a100-sxm-80gb", "25.44"),
        "GPU+": (1, "nvidia-quadro-m4000", "0.45"),
    }
    for sku, (count, model, amount) in expected.items():
        record = records[sku]
        assert (record.gpu_count, gpu_of(record), record.amount) == (
            count,
            model,
            Decimal(amount),
        )
        assert (record.currency, record.price_kind.value, record.unit.value) == (
            "USD",
            "on_demand",
            "hour",
        )
        assert record.source_url == path.resolve().as_uri()
    assert records["GPU+"].gpu_name_raw == "M4000"
    assert {r.region for r in report.records} == {"East Coast (NY2)"}
    assert not any(sku.startswith("C") and sku[1:].isdigit() for sku in records)
    assert _offers(engine, "skypilot:paperspace")[("H100x8", "East Coast (NY2)", "on_demand")][
        "amount"
    ] == Decimal("47.60")


def test_realdata_scaleway(engine: Engine, settings: Settings, realdata: Path) -> None:
    path = realdata / SCALEWAY
    header = path.read_text().splitlines()[0].split(",")
    assert header.index("AvailabilityZone") == 0  # a different column order: read by header
    source, _ = _parse_file("skypilot:scaleway", path)
    assert source.stats["rows"] == 5
    report = crawl_source(engine, settings, "skypilot:scaleway", from_files=[path])
    assert report.label == "ok"
    assert report.counts["seen"] == 5
    assert {r.sku for r in report.records} == {"RENDER-S", "GPU-3070-S", "H100-1-80G", "H100-2-80G"}
    assert {r.region for r in report.records if r.sku == "RENDER-S"} == {"fr-par-1", "fr-par-2"}
    assert {r.currency for r in report.records} == {"EUR"}  # assumed, and recorded
    records = {(r.sku, r.region): r for r in report.records}
    h100 = records[("H100-1-80G", "fr-par-2")]
    assert (h100.gpu_count, h100.gpu_model, h100.amount) == (
        1,
        "nvidia-h100-pcie-80gb",
        Decimal("2.52"),
    )
    assert records[("H100-2-80G", "fr-par-2")].amount == Decimal("5.04")
    assert records[("H100-2-80G", "fr-par-2")].gpu_count == 2
    rtx = records[("GPU-3070-S", "fr-par-2")]
    assert (rtx.gpu_model, rtx.amount) == ("nvidia-rtx-3070-8gb", Decimal("0.98"))
    stored = _offers(engine, "skypilot:scaleway")
    assert {r["currency"] for r in stored.values()} == {"EUR"}
    assert stored[("H100-1-80G", "fr-par-2", "on_demand")]["amount"] == Decimal("2.52")
