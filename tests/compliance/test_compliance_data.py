"""Compliance data on SQLite and PostgreSQL: loading, versioning, residency, certifications,
export-control answers for every GPU model, rule-set time travel, filters, load errors."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, func, select

from schema.catalog import Provider, Region
from schema.compliance import Certification, ExportRuleSet
from service.compliance import filters
from service.compliance.certifications import valid_certifications
from service.compliance.countries import country_lists
from service.compliance.export_control import NOT_3A090
from service.compliance.load import LoadError, load_compliance
from service.compliance.queries import (
    BadCountry,
    NoRuleSet,
    UnknownGpu,
    export_answers,
    export_control,
    rule_set_in_force,
)
from service.compliance.reference_load import load_reference
from service.compliance.residency import GDPR_ZONES, gdpr_zone
from service.core.config import REFERENCE_DIR
from service.core.reference_error import ReferenceError

TODAY = date(2026, 11, 29)
T1 = datetime(2026, 1, 10, 12, tzinfo=UTC)
T2 = datetime(2026, 6, 1, 9, tzinfo=UTC)
REQUIRED_PROVIDERS = ["aws", "azure", "gcp", "oracle", "lambda", "coreweave", "paperspace",
                      "ovhcloud", "gcore", "equinix", "scaleway", "nebius", "runpod", "vastai",
                      "hyperstack", "datacrunch", "alibaba", "tencent", "genesiscloud",
                      "tensordock"]  # fmt: skip
EU27 = {"AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU",
        "IE", "IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE"}  # fmt: skip

# Published classifications (research notes gpu_specs.csv "known_eccn", BIS rules) and the
# computed ones the notes derive; every GPU in gpus.yaml must get one of the allowed values.
EXPECTED_ECCN = {
    "nvidia-h100-sxm-80gb": "3A090.a",
    "nvidia-h100-pcie-80gb": "3A090.a",
    "nvidia-h100-nvl-94gb": "3A090.a",
    "nvidia-h200-sxm-141gb": "3A090.a",
    "nvidia-a100-sxm-40gb": "3A090.a",
    "nvidia-a100-pcie-40gb": "3A090.a",
    "nvidia-a100-sxm-80gb": "3A090.a",
    "nvidia-a100-pcie-80gb": "3A090.a",
    "amd-mi325x-256gb": "3A090.a",
    "nvidia-rtx-4090-24gb": "3A090.a",
    "nvidia-l40s-48gb": "3A090.a",
    "nvidia-l40-48gb": "3A090.b",
    "nvidia-t4-16gb": NOT_3A090,
    "nvidia-h20-96gb": NOT_3A090,
    "nvidia-a10-24gb": NOT_3A090,
    "nvidia-v100-sxm2-32gb": NOT_3A090,
}


def copy_reference(tmp_path: Path) -> Path:
    folder = tmp_path / "ref"
    shutil.copytree(REFERENCE_DIR, folder)
    return folder


def edit(folder: Path, file: str, change: Any) -> None:
    path = folder / file
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def load_at(engine: Engine, folder: Path, now: datetime) -> dict[str, int]:
    """Load providers, regions and GPUs, then the compliance files as if at ``now``."""
    base = folder.parent / "base"
    base.mkdir(exist_ok=True)
    for name in ("providers.yaml", "regions.yaml", "gpus.yaml"):
        shutil.copy(folder / name, base / name)
    load_reference(engine, base)
    with engine.begin() as conn:
        return load_compliance(conn, folder, now=now)


def test_load_counts_idempotence_and_coverage(engine: Engine) -> None:
    first = load_reference(engine, REFERENCE_DIR)
    assert first.changed["certifications"] >= 100
    assert first.changed["export_rules"] == 5
    second = load_reference(engine, REFERENCE_DIR)
    assert all(v == 0 for v in second.changed.values()), second.changed
    with engine.connect() as conn:
        certs = conn.execute(select(Certification.provider).distinct()).scalars().all()  # type: ignore[call-overload]
        assert set(REQUIRED_PROVIDERS) <= set(certs)
        rows = conn.execute(select(Certification)).all()  # type: ignore[call-overload]
        assert all(r.evidence_url.startswith("http") and r.checked for r in rows)
        assert {r.status for r in rows} <= {"certified", "reported", "not_certified", "unknown"}


def test_every_region_has_a_country_with_a_gdpr_zone(engine: Engine) -> None:
    load_reference(engine, REFERENCE_DIR)
    with engine.connect() as conn:
        lists = country_lists(conn, TODAY)
        regions = conn.execute(select(Region.provider, Region.code, Region.country)).all()  # type: ignore[call-overload]
        assert len(regions) > 100
        missing = [f"{p}/{c}" for p, c, country in regions if not country]
        assert not missing, f"regions without a country: {missing}"
        zones = {country: gdpr_zone(country, lists) for _, _, country in regions}
        assert set(zones.values()) <= set(GDPR_ZONES)
        # the EU/EEA and adequacy lists
        assert lists["eu"] == EU27
        assert lists["eea"] == {"IS", "LI", "NO"}
        assert {"CH", "JP", "KR", "IL", "CA", "NZ", "GB", "UY", "AR"} <= lists["eu_adequacy"]
        assert zones["FR"] == zones["DE"] == zones["NO"] == zones["IS"] == "eu_eea"
        assert zones["CH"] == zones["JP"] == zones["GB"] == zones["IL"] == "adequacy"
        assert zones["US"] == "adequacy_conditional"
        assert zones["SG"] == zones["IN"] == zones["CN"] == zones["AU"] == "none"
        # time travel on the residency axis: Brexit, UK adequacy, the DPF
        assert gdpr_zone("GB", country_lists(conn, date(2020, 12, 31))) == "eu_eea"
        assert gdpr_zone("GB", country_lists(conn, date(2021, 3, 1))) == "none"
        assert gdpr_zone("GB", country_lists(conn, date(2021, 6, 28))) == "adequacy"
        assert gdpr_zone("US", country_lists(conn, date(2023, 7, 9))) == "none"
        assert gdpr_zone("HR", country_lists(conn, date(2013, 6, 30))) == "none"


def test_classification_of_every_gpu_and_published_ones(engine: Engine) -> None:
    load_reference(engine, REFERENCE_DIR)
    with engine.connect() as conn:
        answers = export_answers(conn, "CN", TODAY)
    gpus = yaml.safe_load((REFERENCE_DIR / "gpus.yaml").read_text())["gpus"]
    assert set(answers) == {g["slug"] for g in gpus}
    for slug, answer in answers.items():
        assert answer.eccn in ("3A090.a", "3A090.b", NOT_3A090, "unknown"), slug
        assert answer.licence_required in (True, False, None)
        assert answer.rule_set.slug == "us-ac-2026-01"
        if answer.eccn == "unknown":
            assert answer.licence_required is None, slug
    for slug, eccn in EXPECTED_ECCN.items():
        assert answers[slug].eccn == eccn, slug
    assert answers["nvidia-h200-sxm-141gb"].basis == "official"
    assert answers["nvidia-h100-sxm-80gb"].basis == "computed"
    assert answers["nvidia-t4-16gb"].licence_required is False
    assert answers["nvidia-h20-96gb"].licence_required is True  # the is-informed letter
    assert answers["nvidia-rtx-4090-24gb"].licence_exception == "NAC"
    assert answers["nvidia-h200-sxm-141gb"].review_policy == "case_by_case"
    assert answers["amd-mi355x-288gb"].review_policy == "presumption_of_denial"  # TPP >= 21000


def test_rule_set_time_travel(engine: Engine) -> None:
    load_reference(engine, REFERENCE_DIR)
    with engine.connect() as conn:
        before = export_control(conn, "H20", "CN", date(2024, 6, 1))
        after = export_control(conn, "nvidia-h20-96gb", "CN", date(2025, 6, 1))
        assert (before.rule_set.slug, before.licence_required) == ("us-ac-2023-11", False)
        assert (after.rule_set.slug, after.licence_required) == ("us-ac-2025-05", True)
        h200_2025 = export_control(conn, "H200", "CN", date(2025, 6, 1))
        h200_2026 = export_control(conn, "H200", "CN", date(2026, 6, 1))
        assert h200_2025.review_policy == "presumption_of_denial" and h200_2025.basis == "computed"
        assert h200_2026.review_policy == "case_by_case" and h200_2026.basis == "official"
        tier2 = export_control(conn, "H100 SXM5 80GB", "PL", date(2025, 3, 1))
        assert tier2.ai_diffusion_tier == "tier2" and tier2.licence_required is False
        assert export_control(conn, "H100", "PL", date(2025, 6, 1)).ai_diffusion_tier is None
        with pytest.raises(NoRuleSet, match="2023-11-16"):
            export_control(conn, "H100", "CN", date(2023, 11, 16))
        with pytest.raises(UnknownGpu, match="'B9000'"):
            export_control(conn, "B9000", "CN", TODAY)
        for bad in ("XX", "CHN", "c1", ""):
            with pytest.raises(BadCountry):
                export_control(conn, "H100", bad, TODAY)


def test_certification_change_supersedes_and_as_of_keeps_the_past(
    engine: Engine, tmp_path: Path
) -> None:
    folder = copy_reference(tmp_path)
    load_at(engine, folder, T1)

    def change(data: dict[str, Any]) -> None:
        rows = data["certifications"]
        scw = next(r for r in rows if (r["provider"], r["scheme"]) == ("scaleway", "hds"))
        scw["status"] = "certified"
        scw["source"] = "https://www.scaleway.com/en/"
        rows[:] = [r for r in rows if (r["provider"], r["scheme"]) != ("gcore", "pci_dss")]

    edit(folder, "certifications.yaml", change)
    edit(folder, "export_rules.yaml", lambda d: d["rule_sets"][-1].update(name="Renamed"))
    assert load_at(engine, folder, T2) == {
        "country_lists": 0,
        "certifications": 2,
        "export_rules": 1,
        "gpu_classifications": 0,
    }
    early, late = date(2026, 3, 1), date(2026, 7, 1)
    with engine.connect() as conn:
        versions = conn.execute(
            select(Certification.status, Certification.superseded_at).where(  # type: ignore[call-overload]
                Certification.provider == "scaleway", Certification.scheme == "hds"
            )
        ).all()
        assert sorted(v.status for v in versions) == ["certified", "reported"]
        assert [v.superseded_at for v in versions if v.status == "reported"] == [T2]
        assert [
            c.scheme for c in valid_certifications(conn, "scaleway", early) if c.scheme == "hds"
        ] == []
        assert "hds" in {c.scheme for c in valid_certifications(conn, "scaleway", late)}
        widened = valid_certifications(conn, "scaleway", early, cert_status="reported")
        assert "hds" in {c.scheme for c in widened}
        assert "pci_dss" in {c.scheme for c in valid_certifications(conn, "gcore", early)}
        assert "pci_dss" not in {c.scheme for c in valid_certifications(conn, "gcore", late)}
        # before anything was recorded, the first recorded version stands in
        assert "pci_dss" in {
            c.scheme for c in valid_certifications(conn, "gcore", date(2025, 1, 1))
        }
        assert rule_set_in_force(conn, early).name != "Renamed"
        assert rule_set_in_force(conn, late).name == "Renamed"
        assert conn.execute(select(func.count()).select_from(ExportRuleSet)).scalar() == 6
        assert "scaleway" not in filters.providers_with_certs(conn, ["iso27001", "hds"], early)
        assert "scaleway" in filters.providers_with_certs(conn, ["iso27001", "hds"], late)


def test_filters(engine: Engine) -> None:
    load_reference(engine, REFERENCE_DIR)
    with engine.connect() as conn:
        iso_hds = filters.providers_with_certs(conn, ["iso27001", "hds"], TODAY)
        assert {"aws", "azure", "gcp", "ovhcloud"} <= iso_hds
        assert not iso_hds & {"scaleway", "lambda", "nebius"}
        widened = filters.providers_with_certs(
            conn, ["iso27001", "hds"], TODAY, cert_status="reported"
        )
        assert "scaleway" in widened
        assert "lambda" in filters.providers_with_certs(
            conn, ["soc2_type2"], TODAY, cert_status="reported"
        )
        assert "ovhcloud" not in filters.providers_with_certs(conn, ["hipaa"], TODAY)
        assert "ovhcloud" in filters.providers_with_certs(
            conn, ["hipaa"], TODAY, region="US-EAST-VA"
        )
        gdpr = filters.gdpr_countries(conn)
        assert {"FR", "DE", "NO", "CH", "JP", "GB"} <= gdpr and "US" not in gdpr
        assert filters.gdpr_countries(conn, TODAY, "eu_eea") == EU27 | {"IS", "LI", "NO"}
        assert "US" in filters.gdpr_countries(conn, TODAY, "any")
        cn = filters.gpus_needing_licence(conn, "cn", TODAY)
        assert {"nvidia-h100-sxm-80gb", "nvidia-h20-96gb", "nvidia-a100-sxm-80gb"} <= cn
        assert "nvidia-t4-16gb" not in cn
        assert "nvidia-gb300" in cn  # unknown counts unless include_unknown=False
        assert "nvidia-gb300" not in filters.gpus_needing_licence(
            conn, "CN", TODAY, include_unknown=False
        )
        assert filters.gpus_needing_licence(conn, "DE", TODAY) == set()
        assert filters.providers_hq_in(conn, ["cn"]) == {"alibaba", "huawei", "tencent"}
        assert filters.gpu_classifications(conn, TODAY)["nvidia-t4-16gb"] == (NOT_3A090, "computed")


CERT_ROWS = len(
    yaml.safe_load((REFERENCE_DIR / "certifications.yaml").read_text())["certifications"]
)
"""The reviewed file's rows (sources add providers and their certifications over time)."""


def _dup_cert(d: dict[str, Any]) -> None:
    d["certifications"].append(dict(d["certifications"][0]))


def _overlap_rules(d: dict[str, Any]) -> None:
    d["rule_sets"][1]["effective_from"] = date(2024, 1, 1)


def _bad_country(d: dict[str, Any]) -> None:
    d["lists"][0]["members"].append({"country": "XX"})


@pytest.mark.parametrize(
    ("file", "change", "message"),
    [
        ("certifications.yaml", _dup_cert, rf"certifications.yaml row {CERT_ROWS + 1} \(aws/iso27001\): conflicts with row 1"),
        ("certifications.yaml", lambda d: d["certifications"][2].update(provider="nocloud"), r"row 3 \(nocloud/iso27017\): unknown provider"),
        ("certifications.yaml", lambda d: d["certifications"][0].update(status="maybe"), r"row 1 \(aws/iso27001\).*status"),
        ("certifications.yaml", lambda d: d["certifications"][0].update(regions=["mars-1"]), r"unknown region"),
        ("certifications.yaml", lambda d: d["certifications"][0].pop("source"), r"row 1 \(aws/iso27001\).*source"),
        ("countries.yaml", _bad_country, r"countries.yaml row 1 \(eu\).*'XX'"),
        ("export_rules.yaml", _overlap_rules, r"export_rules.yaml row 2 \(us-aid-2025-01\): effective dates overlap"),
        ("gpu_classifications.yaml", lambda d: d["classifications"][0].update(gpu="nvidia-z9"), r"row 1 \(nvidia-z9\): unknown GPU"),
    ],
)  # fmt: skip
def test_bad_rows_stop_the_load_naming_the_row(
    sqlite_engine: Engine, tmp_path: Path, file: str, change: Any, message: str
) -> None:
    folder = copy_reference(tmp_path)
    edit(folder, file, change)
    with pytest.raises(LoadError, match=message) as caught:
        load_reference(sqlite_engine, folder)
    assert isinstance(caught.value, ReferenceError)
    with sqlite_engine.connect() as conn:  # the whole load rolled back
        assert conn.execute(select(func.count()).select_from(Provider)).scalar() == 0
        assert conn.execute(select(func.count()).select_from(Certification)).scalar() == 0


def test_a_bad_row_on_reload_leaves_the_loaded_data(engine: Engine, tmp_path: Path) -> None:
    folder = copy_reference(tmp_path)
    load_reference(engine, folder)
    edit(folder, "certifications.yaml", _dup_cert)
    with pytest.raises(LoadError, match="conflicts with row 1"):
        load_reference(engine, folder)
    with engine.connect() as conn:
        current = conn.execute(
            select(func.count())
            .select_from(Certification)
            .where(Certification.superseded_at.is_(None))  # type: ignore[union-attr]
        ).scalar()
        assert current == CERT_ROWS
