"""Reference data: the shipped files are valid and complete; loading is idempotent;
a bad row stops the load with an error naming the file, row and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, func, select

from schema.catalog import GpuAlias, GpuModel, Provider, Region
from service.catalog.reference import build_aliases, name_index, read_reference
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR
from service.core.reference_error import ReferenceError

REQUIRED_GPUS = [
    "T4",
    "A10",
    "A10G",
    "L4",
    "L40S",
    "V100",
    "A100 40GB",
    "A100 80GB",
    "H100 PCIe",
    "H100 SXM",
    "H100 NVL",
    "H200",
    "H20",
    "GH200",
    "B200",
    "MI300X",
    "MI325X",
    "Gaudi 3",
]
REQUIRED_PROVIDERS = [
    "aws",
    "azure",
    "gcp",
    "oracle",
    "lambda",
    "coreweave",
    "paperspace",
    "ovhcloud",
    "gcore",
    "equinix",
    "scaleway",
    "nebius",
    "runpod",
    "vastai",
    "hyperstack",
    "datacrunch",
    "alibaba",
    "tencent",
    "genesiscloud",
    "tensordock",
]


def test_shipped_reference_is_valid_and_covers_what_users_ask_for() -> None:
    providers, regions, gpus = read_reference(REFERENCE_DIR)
    slugs = {p.slug for p in providers}
    assert set(REQUIRED_PROVIDERS) <= slugs
    assert next(p for p in providers if p.slug == "equinix").status == "retired"
    index = name_index(gpus, build_aliases(gpus))
    for name in REQUIRED_GPUS:
        assert index.resolve(name).slug, f"{name} names no model: {index.resolve(name).reason}"
    assert all(r.country for r in regions), "every region has a country"
    assert all(row.source.startswith("http") for row in [*providers, *regions, *gpus])


def test_load_is_idempotent(engine: Engine) -> None:
    first = load_reference(engine, REFERENCE_DIR)
    assert first.changed["providers"] == first.providers > 20
    second = load_reference(engine, REFERENCE_DIR)
    assert all(value == 0 for value in second.changed.values())
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Provider)).scalar() == first.providers
        assert conn.execute(select(func.count()).select_from(Region)).scalar() == first.regions
        assert conn.execute(select(func.count()).select_from(GpuModel)).scalar() == first.gpus
        assert conn.execute(select(func.count()).select_from(GpuAlias)).scalar() == first.aliases


def test_an_edited_row_is_updated_in_place(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "ref"
    shutil.copytree(REFERENCE_DIR, folder)
    load_reference(engine, folder)
    data = yaml.safe_load((folder / "providers.yaml").read_text())
    data["providers"][0]["name"] = "Renamed Cloud"
    (folder / "providers.yaml").write_text(yaml.safe_dump(data))
    report = load_reference(engine, folder)
    assert report.changed["providers"] == 1
    with engine.connect() as conn:
        names = set(conn.execute(select(Provider.name)).scalars())  # type: ignore[call-overload]
    assert "Renamed Cloud" in names


def _broken(tmp_path: Path, file: str, mutate) -> Path:  # type: ignore[no-untyped-def]
    folder = tmp_path / "ref"
    shutil.copytree(REFERENCE_DIR, folder)
    key = file.removesuffix(".yaml")
    data = yaml.safe_load((folder / file).read_text())
    mutate(data[key])
    (folder / file).write_text(yaml.safe_dump(data, allow_unicode=True))
    return folder


@pytest.mark.parametrize(
    ("file", "mutate", "message"),
    [
        ("regions.yaml", lambda rows: rows[2].update(country="XX"), "regions.yaml row 3"),
        ("regions.yaml", lambda rows: rows[0].pop("country"), "country: Field required"),
        ("regions.yaml", lambda rows: rows[0].update(provider="nobody"), "unknown provider"),
        ("providers.yaml", lambda rows: rows.append(dict(rows[0])), "duplicate slug"),
        ("providers.yaml", lambda rows: rows[1].update(slug="Not A Slug"), "not a lowercase slug"),
        ("providers.yaml", lambda rows: rows[0].pop("source"), "source: Field required"),
        ("gpus.yaml", lambda rows: rows[0].update(memory_gb="lots"), "memory_gb"),
        ("gpus.yaml", lambda rows: rows[1]["aliases"].append(rows[0]["name"]), "collides with"),
        ("gpus.yaml", lambda rows: rows[0].update(unexpected=1), "Extra inputs"),
        # an H100 PCIe row named like the SXM part: its name reads as the other model
        ("gpus.yaml", lambda rows: rows[1].update(name="NVIDIA H100-SXM5-80G"), "reads as"),
        ("gpus.yaml", lambda rows: rows[1].update(default=0), "default"),
        (
            "gpus.yaml",
            lambda rows: [r.update(default=7) for r in rows if r["family"] == "a100"],
            "one family default picks one model",
        ),
    ],
)
def test_bad_rows_are_named_and_nothing_is_written(
    engine: Engine,
    tmp_path: Path,
    file: str,
    mutate,
    message: str,  # type: ignore[no-untyped-def]
) -> None:
    folder = _broken(tmp_path, file, mutate)
    with pytest.raises(ReferenceError, match=message):
        load_reference(engine, folder)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Provider)).scalar() == 0


def test_unreadable_yaml_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "ref"
    shutil.copytree(REFERENCE_DIR, folder)
    (folder / "gpus.yaml").write_text("gpus: [unclosed")
    with pytest.raises(ReferenceError, match=r"gpus\.yaml: not valid YAML"):
        read_reference(folder)
    (folder / "gpus.yaml").write_text("- just a list\n")
    with pytest.raises(ReferenceError, match="expected a top-level 'gpus:' list"):
        read_reference(folder)
