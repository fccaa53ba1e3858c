"""Hidden costs as reference data: costs.yaml is read, checked and loaded with the rest,
idempotently; a bad row names its file, row and field and writes nothing."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, select

from schema.costs import ProviderCost
from service.catalog.costs import check_costs
from service.catalog.reference import CheckedReference, check_reference
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR
from service.core.reference_error import ReferenceError

COST = ProviderCost.__table__  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def reference() -> CheckedReference:
    return check_reference(REFERENCE_DIR)


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                select(
                    COST.c.provider, COST.c.region, COST.c.kind, COST.c.from_gb, COST.c.price
                ).order_by(COST.c.provider, COST.c.region, COST.c.kind, COST.c.from_gb)
            )
        ]


def _reference_with(tmp_path: Path, costs: list[dict[str, object]] | None) -> Path:
    directory = tmp_path / "reference"
    shutil.copytree(REFERENCE_DIR, directory)
    if costs is None:
        (directory / "costs.yaml").unlink()
    else:
        (directory / "costs.yaml").write_text(yaml.safe_dump({"costs": costs}), encoding="utf-8")
    return directory


def _row(**overrides: object) -> dict[str, object]:
    row: dict[str, object] = {
        "provider": "aws",
        "kind": "internet_egress",
        "currency": "USD",
        "tiers": [{"from_gb": 0, "price": "0"}, {"from_gb": 100, "price": "0.09"}],
        "source": "https://aws.amazon.com/ec2/pricing/on-demand/",
        "checked": "2026-12-04",
    }
    row.update(overrides)
    return row


def test_the_shipped_file_loads_once(engine: Engine) -> None:
    first = load_reference(engine, REFERENCE_DIR)
    rows = _rows(engine)
    assert first.changed["costs"] == len(rows) > 0
    # a region's own rate is stored beside the provider-wide one
    assert ("aws", "ap-southeast-2", "internet_egress", Decimal(100), Decimal("0.114")) in rows
    assert ("aws", "", "internet_egress", Decimal(100), Decimal("0.09")) in rows
    again = load_reference(engine, REFERENCE_DIR)
    assert again.changed["costs"] == 0 and _rows(engine) == rows


def test_a_changed_price_and_a_removed_row_are_written(engine: Engine, tmp_path: Path) -> None:
    load_reference(engine, _reference_with(tmp_path / "a", [_row(), _row(kind="inter_region")]))
    assert len(_rows(engine)) == 4
    changed = _row(tiers=[{"from_gb": 0, "price": "0"}, {"from_gb": 100, "price": "0.08"}])
    report = load_reference(engine, _reference_with(tmp_path / "b", [changed]))
    # one tier changed, the two inter_region tiers removed
    assert report.changed["costs"] == 3
    assert _rows(engine) == [
        ("aws", "", "internet_egress", Decimal(0), Decimal(0)),
        ("aws", "", "internet_egress", Decimal(100), Decimal("0.08")),
    ]


def test_no_file_means_no_costs_known(engine: Engine, tmp_path: Path) -> None:
    load_reference(engine, REFERENCE_DIR)
    report = load_reference(engine, _reference_with(tmp_path, None))
    assert report.changed["costs"] > 0 and _rows(engine) == []


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(tiers=[{"from_gb": 0, "price": 0.09}]), "not floats"),
        (_row(tiers=[{"from_gb": 10, "price": "0.09"}]), "starts at from_gb 0"),
        (
            _row(tiers=[{"from_gb": 0, "price": "1"}, {"from_gb": 0, "price": "2"}]),
            "must rise",
        ),
        (_row(tiers=[{"from_gb": 0, "price": "-0.01"}]), "greater than or equal to 0"),
        (_row(tiers=[{"from_gb": 0, "price": "NaN"}]), "tiers"),
        (_row(tiers=[{"from_gb": 0, "price": "Infinity"}]), "tiers"),
        (_row(tiers=[]), "tiers"),
        (_row(tiers=[{"from_gb": i, "price": "1"} for i in range(21)]), "tiers"),
        (_row(tiers=[{"from_gb": 0, "price": "1", "per": "month"}]), "per"),
        (_row(currency="usd"), "currency"),
        (_row(kind="cooling"), "kind"),
        (_row(provider="Not A Slug"), "provider"),
        (_row(provider="nosuchcloud"), "unknown provider 'nosuchcloud'"),
        (_row(regions=["mars-1"]), "'mars-1' is not a region of aws"),
        (_row(regions=[]), "regions"),
        (_row(source=""), "source"),
        (_row(checked="yesterday"), "checked"),
        (_row(colour="red"), "colour"),
    ],
)
def test_a_bad_row_is_named(
    reference: CheckedReference, tmp_path: Path, row: dict[str, object], message: str
) -> None:
    (tmp_path / "costs.yaml").write_text(
        yaml.safe_dump({"costs": [_row(kind="inter_region"), row]}), encoding="utf-8"
    )
    with pytest.raises(ReferenceError) as caught:
        check_costs(tmp_path, reference)
    assert "costs.yaml row 2" in str(caught.value) and message in str(caught.value)


def test_a_bad_row_writes_nothing(engine: Engine, tmp_path: Path) -> None:
    load_reference(engine, REFERENCE_DIR)
    before = _rows(engine)
    bad = [_row(provider="aws"), _row(provider="nosuchcloud")]
    with pytest.raises(ReferenceError, match=r"row 2 .*unknown provider"):
        load_reference(engine, _reference_with(tmp_path, bad))
    assert _rows(engine) == before


def test_a_cost_given_twice_for_one_place_is_refused(
    reference: CheckedReference, tmp_path: Path
) -> None:
    twice = [_row(), _row(regions=["us-east-1"]), _row(regions=["eu-west-1", "us-east-1"])]
    (tmp_path / "costs.yaml").write_text(yaml.safe_dump({"costs": twice}), encoding="utf-8")
    with pytest.raises(ReferenceError, match=r"row 3 .*given twice .*first at row 2"):
        check_costs(tmp_path, reference)


@pytest.mark.parametrize(
    "text",
    ["costs: {}", "- a list", "costs:\n  - 1\n", "costs: [", "\x00\x01"],
)
def test_a_malformed_file_is_refused(
    reference: CheckedReference, tmp_path: Path, text: str
) -> None:
    (tmp_path / "costs.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ReferenceError, match=r"costs\.yaml"):
        check_costs(tmp_path, reference)


def test_an_oversized_file_is_refused(reference: CheckedReference, tmp_path: Path) -> None:
    text = yaml.safe_dump({"costs": [_row()]}) + "#" * 1_000_000 + "\n"
    (tmp_path / "costs.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ReferenceError, match=r"costs\.yaml: 1,000,.* bytes, more than"):
        check_costs(tmp_path, reference)
