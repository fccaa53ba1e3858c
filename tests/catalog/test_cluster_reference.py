"""Cluster facts as reference data: interconnects.yaml is read, checked and loaded with the
rest, idempotently; a bad, oversized or hostile file names its file, row and field and
writes nothing; stored offers take a changed reference at once, keeping what their
source stated; each fact is merged on its own and unknown stays null."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, select

from schema.cluster import ClusterReference
from schema.prices import Offer
from service.catalog import cluster
from service.catalog.cluster import ClusterIndex, check_cluster, merge, stated_facts
from service.catalog.ingest import ingest
from service.catalog.reference import CheckedReference, check_reference
from service.catalog.resolver import fingerprint
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.reference_error import ReferenceError
from tests.support.factories import record

CLUSTER = ClusterReference.__table__  # type: ignore[attr-defined]
OFFER = Offer.__table__  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def reference() -> CheckedReference:
    return check_reference(REFERENCE_DIR)


def _row(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "provider": "aws",
        "skus": ["p5.48xlarge"],
        "interconnect": "nvswitch",
        "interconnect_gbps": 900,
        "network": "efa",
        "network_gbps": "3200",
        "source": "https://aws.amazon.com/ec2/instance-types/p5/",
        "checked": "2026-12-04",
    }
    row.update(overrides)
    return {k: v for k, v in row.items() if v is not None}


def _directory(
    tmp_path: Path, rows: list[dict[str, Any]] | None = None, text: str | None = None
) -> Path:
    directory = tmp_path / "reference"
    shutil.copytree(REFERENCE_DIR, directory)
    if text is None:
        text = yaml.safe_dump({"families": rows or []})
    (directory / "interconnects.yaml").write_text(text, encoding="utf-8")
    return directory


def test_the_shipped_file_is_valid(reference: CheckedReference) -> None:
    rows = check_cluster(REFERENCE_DIR, reference)
    assert len(rows) > 20
    assert all(r.source.startswith("https://") and r.checked for r in rows)
    index = ClusterIndex.from_rows(
        (r["provider"], r["sku"], r["sku_prefix"], *(r[f] for f in cluster.FACTS))
        for r in cluster.cluster_rows(rows)
    )
    assert index.lookup("aws", "p5.48xlarge") == ("nvswitch", Decimal(900), "efa", Decimal(3200))
    assert index.lookup("aws", "g6e.xlarge") == ("pcie", None, None, None)  # by prefix
    assert index.lookup("azure", "Standard_NC80adis_H100_v5")[0] == "nvlink"  # name over prefix
    assert index.lookup("azure", "Standard_NC24ads_A100_v4")[0] == "pcie"
    assert index.lookup("aws", "m5.large") is None


def test_loads_once_and_refreshes_stored_offers(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    first = load_reference(engine, REFERENCE_DIR)
    assert first.changed["cluster_reference"] > 20
    assert load_reference(engine, REFERENCE_DIR).changed["cluster_reference"] == 0
    records = [
        record(0, provider="aws", source="aws", sku="p5.48xlarge", region="us-east-1"),
        # the source states the speed: it wins, the kind comes from the reference
        record(
            1,
            provider="aws",
            source="aws",
            sku="p5.48xlarge",
            region="eu-central-1",
            network_gbps="3000",
        ),
        record(2, provider="aws", source="aws", sku="x9.large", region="us-east-1"),
    ]
    ingest(engine, settings, _crawl(records))
    assert _facts(engine) == {
        ("p5.48xlarge", "us-east-1"): ("nvswitch", Decimal(900), "efa", Decimal(3200), "rrrr"),
        ("p5.48xlarge", "eu-central-1"): ("nvswitch", Decimal(900), "efa", Decimal(3000), "rrrs"),
        ("x9.large", "us-east-1"): (None, None, None, None, None),
    }
    changed = _directory(
        tmp_path,
        [
            _row(network="infiniband", network_gbps="1600"),
            _row(
                skus=None,
                sku_prefix="x9.",
                interconnect="pcie",
                interconnect_gbps=None,
                network=None,
                network_gbps=None,
            ),
        ],
    )
    report = load_reference(engine, changed)
    assert report.changed["offer_cluster_facts"] == 3
    assert _facts(engine) == {
        ("p5.48xlarge", "us-east-1"): (
            "nvswitch",
            Decimal(900),
            "infiniband",
            Decimal(1600),
            "rrrr",
        ),
        # the reference speed is for infiniband, the source's 3000 stays
        ("p5.48xlarge", "eu-central-1"): (
            "nvswitch",
            Decimal(900),
            "infiniband",
            Decimal(3000),
            "rrrs",
        ),
        ("x9.large", "us-east-1"): ("pcie", None, None, None, "r---"),
    }
    # an unchanged re-crawl finds nothing to change: stored facts are what ingest derives
    result = ingest(engine, settings, _crawl(records))
    assert (result.added, result.changed) == (0, 0)
    assert _facts(engine)[("x9.large", "us-east-1")][0] == "pcie"


def _crawl(records: list[dict[str, Any]]) -> Any:
    from service.catalog.results import CrawlResult

    return CrawlResult(source="aws", records=records)


def _facts(engine: Engine) -> dict[tuple[str, str], tuple[Any, ...]]:
    columns = [OFFER.c[name] for name in (*cluster.FACTS, "cluster_basis")]
    with engine.connect() as conn:
        rows = conn.execute(select(OFFER.c.sku, OFFER.c.region, *columns)).all()
    return {(sku, region): tuple(rest) for sku, region, *rest in rows}


def test_merge_decides_each_fact_on_its_own() -> None:
    ref = ("nvswitch", Decimal(900), "infiniband", Decimal(3200))
    assert merge((None, None, None, None), None) == (None, None, None, None, None)
    assert merge((None, None, None, None), ref) == (*ref, "rrrr")
    assert merge(("pcie", None, None, Decimal(25)), ref) == (
        "pcie",
        None,  # the reference's 900 GB/s is NVSwitch's, not PCIe's
        "infiniband",
        Decimal(25),
        "s-rs",
    )
    assert merge((None, None, "infiniband", None), ref)[3] == Decimal(3200)  # same kind
    assert merge((None, None, "ethernet", None), ref)[2:] == ("ethernet", None, "rrs-")
    assert stated_facts(("pcie", "900", "efa", "25"), "srsr") == ("pcie", None, "efa", None)
    assert stated_facts(("pcie", None, None, None), None) == (None, None, None, None)


def test_unknown_facts_keep_old_fingerprints() -> None:
    """Offers without cluster facts keep the digest they had before the columns existed."""
    before = (
        "instance",
        "nvidia-h100-sxm-80gb",
        False,
        "H100",
        Decimal(8),
        None,
        None,
        None,
        "DE",
        None,
        False,
        None,
    )
    assert fingerprint((*before, None, None, None, None, None, None)) == fingerprint(before)
    assert fingerprint((*before, True, None, None, None, None, None)) == fingerprint(
        (*before, True)
    )
    assert fingerprint((*before, None, "pcie", None, None, None, "r---")) != fingerprint(before)


BAD_ROWS = [
    (_row(network_gbps=3200.5), "network_gbps: write speeds as quoted text"),
    (_row(interconnect="nvlink5"), "interconnect: Input should be"),
    (_row(network="token-ring"), "network: Input should be"),
    (_row(interconnect=None, interconnect_gbps=900), "interconnect_gbps needs the interconnect"),
    (_row(network=None), "network_gbps needs the network"),
    (
        _row(interconnect=None, interconnect_gbps=None, network=None, network_gbps=None),
        "give interconnect or network",
    ),
    (_row(sku_prefix="p5."), "either skus"),
    (_row(skus=None), "either skus"),
    (_row(skus=[]), "skus: List should have at least 1 item"),
    (_row(skus=["p5\u202e.48xlarge"]), "control or bidirectional"),
    (_row(network_gbps="-5"), "network_gbps: Input should be greater than 0"),
    (_row(network_gbps="1e9"), "network_gbps: Input should be less than or equal to"),
    (_row(interconnect_gbps="Infinity"), "interconnect_gbps"),
    (_row(interconnect_gbps=True), "a boolean is not a speed"),
    (_row(source="http://aws.amazon.com/p5"), "source: must be the https URL"),
    (_row(source="javascript:alert(1)"), "must be the https URL"),
    (_row(checked="yesterday"), "checked:"),
    (_row(color="blue"), "color: Extra inputs are not permitted"),
    (_row(provider="Not A Slug"), "provider:"),
    (_row(provider="nobody"), "unknown provider 'nobody'"),
]


@pytest.mark.parametrize(("row", "message"), BAD_ROWS)
def test_a_bad_row_names_file_row_and_field(
    reference: CheckedReference, tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    directory = _directory(tmp_path, [_row(skus=["p4d.24xlarge"]), row])
    with pytest.raises(ReferenceError) as caught:
        check_cluster(directory, reference)
    assert str(caught.value).startswith("interconnects.yaml")
    assert "row 2" in str(caught.value)
    assert message in str(caught.value)


def test_a_sku_given_twice_is_refused(reference: CheckedReference, tmp_path: Path) -> None:
    directory = _directory(tmp_path, [_row(), _row(skus=["p4d.24xlarge", "p5.48xlarge"])])
    with pytest.raises(
        ReferenceError, match=r"row 2 .*'p5.48xlarge' is given twice \(first at row 1\)"
    ):
        check_cluster(directory, reference)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("families: [", "not valid YAML"),
        ("!!python/object/apply:os.system ['echo pwned']", "not valid YAML"),
        ("families: !!python/name:os.system", "not valid YAML"),
        ("- just\n- a list\n", "expected a top-level 'families:' list"),
        ("families: {aws: p5}", "expected a top-level 'families:' list"),
        ("families:\n  - 42\n", "row 1"),
        ("\xff\xfe not utf-8", "interconnects.yaml"),
    ],
)
def test_hostile_or_malformed_files_are_refused(
    reference: CheckedReference, tmp_path: Path, text: str, message: str
) -> None:
    directory = _directory(tmp_path, text="")
    (directory / "interconnects.yaml").write_bytes(
        text.encode("latin-1") if text.startswith("\xff") else text.encode()
    )
    with pytest.raises(ReferenceError, match=message):
        check_cluster(directory, reference)


def test_an_oversized_file_is_refused_before_it_is_read(
    reference: CheckedReference, tmp_path: Path
) -> None:
    directory = _directory(tmp_path, text="")
    with (directory / "interconnects.yaml").open("wb") as handle:
        handle.write(b"# padding\n" * (cluster.MAX_BYTES // 10 + 1))
    with pytest.raises(ReferenceError, match="bytes, more than the 1,000,000 allowed"):
        check_cluster(directory, reference)


def test_too_many_rows_are_refused(
    reference: CheckedReference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "MAX_ROWS", 2)
    rows = [_row(skus=[f"p5.{i}xlarge"]) for i in range(3)]
    with pytest.raises(ReferenceError, match="3 rows, more than the 2 allowed"):
        check_cluster(_directory(tmp_path, rows), reference)


def test_a_missing_file_means_no_reference_facts(
    reference: CheckedReference, tmp_path: Path
) -> None:
    directory = _directory(tmp_path)
    (directory / "interconnects.yaml").unlink()
    assert check_cluster(directory, reference) == []


def test_a_bad_file_writes_nothing(engine: Engine, tmp_path: Path) -> None:
    load_reference(engine, REFERENCE_DIR)
    with engine.connect() as conn:
        before = conn.execute(select(CLUSTER.c.provider, CLUSTER.c.sku, CLUSTER.c.sku_prefix)).all()
    with pytest.raises(ReferenceError):
        load_reference(engine, _directory(tmp_path, [_row(), _row(network="carrier-pigeon")]))
    with engine.connect() as conn:
        after = conn.execute(select(CLUSTER.c.provider, CLUSTER.c.sku, CLUSTER.c.sku_prefix)).all()
    assert sorted(after) == sorted(before) and before
