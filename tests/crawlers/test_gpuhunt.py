"""dstack gpuhunt's published catalog: version file, then a zipped CSV, over a real server."""

from __future__ import annotations

import io
import zipfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, select

from crawlers.base import LayoutChanged, SourceError
from crawlers.platforms.gpuhunt import (
    MAX_COMPRESSION_RATIO,
    looks_like_version,
    parse_version,
    read_member,
)
from crawlers.registry import all_sources
from schema.crawl import CrawlRun, CrawlRunPayload, RejectedRecord
from schema.prices import Offer
from service.core.config import Settings
from service.crawl.run import CrawlReport, crawl_source
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply, module_server, reused_server  # noqa: F401 (fixtures)
from tests.support.source_contract import offers_by

HUNT = FIXTURES / "gpuhunt"
VERSION = (HUNT / "version").read_text().strip()
OFFER = Offer.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
REJECTED = RejectedRecord.__table__  # type: ignore[attr-defined]
HEADER = (
    "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,disk_size,"
    "gpu_vendor,flags,cpu_arch,provider_data"
)


def zipped(members: dict[str, bytes]) -> bytes:
    """A catalog.zip as gpuhunt's publish script makes it (``zip -j``: members at the root)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2025, 11, 28, 1, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


def _serve(server: ReplayServer, peer: str, csv: bytes | None = None, **replies: Reply) -> str:
    """Route ``/v3/<peer>/version`` and its catalog.zip; return the zip's URL."""
    version_path = f"/v3/{peer}/version"
    zip_path = f"/v3/{peer}/{VERSION}/catalog.zip"
    server.route(
        version_path,
        replies.get("version", Reply(f"{VERSION}\n".encode(), content_type="text/plain")),
    )
    body = zipped({f"{peer}.csv": csv if csv is not None else (HUNT / f"{peer}.csv").read_bytes()})
    server.route(zip_path, replies.get("catalog", Reply(body, content_type="application/zip")))
    return server.url + zip_path


def _crawl(engine: Engine, settings: Settings, server: ReplayServer, name: str) -> CrawlReport:
    local = settings.model_copy(
        update={"source_base_urls": {name: server.url}, "http_max_retries": 2}
    )
    return crawl_source(engine, local, name)


def _offers(engine: Engine, source: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return offers_by(engine, source, "sku", "region", "price_kind")


def _csv(*rows: str) -> bytes:
    good = [
        "NVIDIA H100 80GB HBM3,EU-RO-1,2.69,16,125,1,H100,80.0,False,,nvidia,,x86,{}",
        "NVIDIA H100 80GB HBM3,EU-RO-1,21.52,128,1000,8,H100,80.0,False,,nvidia,,x86,{}",
    ]
    return ("\r\n".join([HEADER, *good, *rows]) + "\r\n").encode()


# --------------------------------------------------------------------------- sources


def test_every_gpuhunt_provider_maps_to_a_reference_provider() -> None:
    reference = yaml.safe_load((FIXTURES / "reference" / "providers.yaml").read_text())
    slugs = {p["slug"] for p in reference["providers"]}
    sources: dict[str, Any] = {n: c for n, c in all_sources().items() if n.startswith("gpuhunt:")}
    assert set(sources) >= {"gpuhunt:runpod", "gpuhunt:nebius", "gpuhunt:lambdalabs", "gpuhunt:aws"}
    for name, cls in sources.items():
        assert name == f"gpuhunt:{cls.peer}"
        assert (cls.kind, cls.currency) == ("peer", "USD")
        assert cls.provider in slugs, f"{name}: provider {cls.provider!r} not in reference data"
        assert (FIXTURES / cls.fixtures).is_dir()
        for sample in cls.seed_fixtures:  # what `gpuatlas seed` replays for this source
            assert (HUNT / sample).is_file()
    assert sources["gpuhunt:lambdalabs"].provider == "lambda"
    assert sources["gpuhunt:oci"].provider == "oracle"
    assert sources["gpuhunt:verda"].provider == "datacrunch"


FIXTURE_OFFERS = {
    "gpuhunt:aws": 10,
    "gpuhunt:azure": 7,
    "gpuhunt:cloudrift": 6,
    "gpuhunt:gcp": 7,
    "gpuhunt:lambdalabs": 5,
    "gpuhunt:nebius": 12,
    "gpuhunt:oci": 6,
    "gpuhunt:runpod": 17,
    "gpuhunt:verda": 6,
}


def test_every_provider_sample_crawls_and_ingests(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    sources: dict[str, Any] = {n: c for n, c in all_sources().items() if n.startswith("gpuhunt:")}
    assert set(sources) == set(FIXTURE_OFFERS), set(sources) ^ set(FIXTURE_OFFERS)
    for name, offers in FIXTURE_OFFERS.items():
        cls = sources[name]
        assert cls.seed_fixtures == [f"{cls.peer}.csv"], name
        url = _serve(server, cls.peer)
        report = _crawl(engine, settings, server, name)
        assert report.label == "ok", (name, report.reason)
        assert report.counts["seen"] == report.counts["added"] == offers, name
        assert report.counts["rejected"] == 0, name
        stored = _offers(engine, name)
        assert len(stored) == offers, name
        assert {r["source_url"] for r in stored.values()} == {url}
        assert {r["provider"] for r in stored.values()} == {cls.provider}


def test_runpod_version_then_zip(engine: Engine, settings: Settings, server: ReplayServer) -> None:
    zip_url = _serve(server, "runpod")
    report = _crawl(engine, settings, server, "gpuhunt:runpod")
    assert report.label == "ok", report.reason
    assert report.counts["seen"] == report.counts["added"] == 17
    assert report.counts["rejected"] == 0
    with engine.connect() as conn:
        run = conn.execute(select(RUN).where(RUN.c.id == report.crawl_run_id)).mappings().one()
        payloads = (
            conn.execute(select(RUN_PAYLOAD.c.url).where(RUN_PAYLOAD.c.crawl_run_id == run["id"]))
            .scalars()
            .all()
        )
    assert run["source_urls"] == [f"{server.url}/v3/runpod/version", zip_url]
    assert sorted(payloads) == sorted(run["source_urls"])  # both raw payloads kept
    offers = _offers(engine, "gpuhunt:runpod")
    assert {o["source_url"] for o in offers.values()} == {zip_url}
    assert {o["currency"] for o in offers.values()} == {"USD"}
    one = offers[("1x NVIDIA H100 80GB HBM3", "EU-RO-1", "on_demand")]
    eight = offers[("8x NVIDIA H100 80GB HBM3", "EU-RO-1", "on_demand")]
    assert (one["amount"], eight["amount"], eight["gpu_count"]) == (
        Decimal("2.69"),
        Decimal("21.52"),
        8,
    )
    assert one["gpu_name_raw"] == "H100 80GB"
    assert offers[("1x NVIDIA H100 80GB HBM3", "EU-RO-1", "spot")]["amount"] == Decimal("1.75")
    cluster = offers[("8x NVIDIA H100 80GB HBM3 [runpod-cluster]", "EU-RO-1", "on_demand")]
    assert cluster["amount"] == Decimal("23.92")
    rtx = offers[("3x NVIDIA GeForce RTX 4090", "US-TX-3", "on_demand")]
    assert rtx["amount"] == Decimal("2.07")  # 2.0699999999999994 in the file
    assert offers[("1x NVIDIA H100 80GB HBM3", "CZ", "on_demand")]["country"] == "CZ"
    assert not any("cpu3c" in sku for sku, _, _ in offers)


def test_presets_zones_and_old_layout(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    _serve(server, "nebius")
    assert _crawl(engine, settings, server, "gpuhunt:nebius").counts["seen"] == 12
    nebius = _offers(engine, "gpuhunt:nebius")
    assert nebius[("gpu-l40s-a 1gpu-8vcpu-32gb", "eu-north1", "on_demand")]["amount"] == Decimal(
        "1.5484"
    )
    assert nebius[("gpu-l40s-a 1gpu-16vcpu-64gb", "eu-north1", "on_demand")]["amount"] == Decimal(
        "1.7468"
    )
    _serve(server, "gcp")
    report = _crawl(engine, settings, server, "gpuhunt:gcp")
    assert report.label == "ok"
    gcp = _offers(engine, "gpuhunt:gcp")
    spot = gcp[("a2-highgpu-1g", "us-central1", "spot")]
    assert (spot["amount"], spot["price_floor"]) == (Decimal("0.9534"), True)
    assert gcp[("a2-highgpu-1g", "us-central1", "on_demand")]["price_floor"] is False
    assert gcp[("g2-standard-4", "europe-west4", "on_demand")]["gpu_name_raw"] == "L4 24GB"
    assert report.unmapped == {}  # the TPU slice "v5p-8" reads as TPU v5p
    _serve(server, "lambdalabs")  # v1 catalog: no flags, cpu_arch, provider_data columns
    assert _crawl(engine, settings, server, "gpuhunt:lambdalabs").counts["seen"] == 5
    lam = _offers(engine, "gpuhunt:lambdalabs")
    assert (
        lam[("gpu_8x_a100_80gb_sxm4", "us-east-1", "on_demand")]["gpu_name_raw"] == "A100 80GB SXM"
    )  # the SKU names the form factor


def test_saved_zip_or_csv_parse_offline(tmp_path: Path, settings: Settings) -> None:
    archive = tmp_path / "catalog.zip"
    archive.write_bytes(zipped({"runpod.csv": (HUNT / "runpod.csv").read_bytes()}))
    for path in (archive, HUNT / "runpod.csv", HUNT / "version"):
        report = crawl_source(None, settings, "gpuhunt:runpod", from_files=[path], dry_run=True)
        expected = ("failed", 0) if path.name == "version" else ("ok", 17)
        assert (report.status.value, report.counts["seen"]) == expected


# --------------------------------------------------------------------------- bad input


def test_bad_values_reject_their_row_only(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    body = _csv(
        "NVIDIA L40S,EU-RO-1,cheap,12,62,1,L40S,48.0,False,,nvidia,,x86,{}",
        "NVIDIA L4,EU-RO-1,0.43,12,62,1,L4,24.0,maybe,,nvidia,,x86,{}",
    )
    _serve(server, "runpod", body)
    report = _crawl(engine, settings, server, "gpuhunt:runpod")
    assert report.label == "ok"
    assert (report.counts["seen"], report.counts["rejected"]) == (2, 2)
    with engine.connect() as conn:
        reasons = sorted(conn.execute(select(REJECTED.c.reason)).scalars())
    assert reasons[0].startswith("amount:") and "cheap" in reasons[0]
    assert reasons[1].startswith("price_kind:")


BAD_PAYLOADS: list[tuple[str, dict[str, Reply], str]] = [
    ("version-404", {"version": Reply(b"missing", status=404)}, "failed: not found"),
    ("zip-404", {"catalog": Reply(b"missing", status=404)}, "failed: not found"),
    ("version-html", {"version": Reply(b"<html>Access Denied</html>")}, "failed: layout changed"),
    ("version-path", {"version": Reply(b"../../etc/passwd")}, "failed: layout changed"),
    ("no-member", {"catalog": Reply(zipped({"other.csv": _csv()}))}, "failed: layout changed"),
    (
        "zip-bomb",
        {"catalog": Reply(zipped({"runpod.csv": _csv() + b"\0" * 2_000_000}))},
        "failed: too large",
    ),
    (
        "many-members",
        {"catalog": Reply(zipped({f"{i}.csv": b"" for i in range(100)}))},
        "failed: too large",
    ),
]


def test_bad_payloads_fail_cleanly(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    for case, replies, label in BAD_PAYLOADS:
        _serve(server, "runpod", _csv(), **replies)
        server.hits.clear()
        report = _crawl(engine, settings, server, "gpuhunt:runpod")
        assert report.label.startswith(label), (case, report.label)
        assert _offers(engine, "gpuhunt:runpod") == {}, case


def test_zip_and_version_guards() -> None:
    assert parse_version(b"20251128-412\n") == "20251128-412"
    with pytest.raises(LayoutChanged):
        parse_version(b"2025/11/28")
    assert looks_like_version(b"20251128-412\n")
    assert not looks_like_version(_csv())
    bomb = zipped({"runpod.csv": b"0" * (MAX_COMPRESSION_RATIO * 5000)})
    with pytest.raises(SourceError, match="too large"):
        read_member(bomb, "runpod.csv")
    assert read_member(zipped({"runpod.csv": _csv()}), "runpod.csv") == _csv()
