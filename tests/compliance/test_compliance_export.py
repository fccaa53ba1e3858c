"""Export-control arithmetic and classification: TPP, performance density, 3A090 bands,
precedence of published classifications, rule-set selection (pure, no database)."""

from __future__ import annotations

import csv
import itertools
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from service.compliance.export_control import (
    BIT_LENGTHS,
    NOT_3A090,
    UNKNOWN,
    GpuSpecs,
    Published,
    Rules,
    RuleSet,
    Thresholds,
    classify,
    evaluate,
    performance_density,
    published_on,
    rule_set_on,
    tpp,
)
from service.core.config import REFERENCE_DIR

RULES = yaml.safe_load((REFERENCE_DIR / "export_rules.yaml").read_text())["rule_sets"]
T: Thresholds = Rules.model_validate(RULES[0]["rules"]).thresholds
SPECS_CSV = Path(__file__).resolve().parents[3] / "shared" / "reference" / "gpu_specs.csv"

rates = st.decimals(min_value=0, max_value=100_000, places=2, allow_nan=False)
dense_maps = st.dictionaries(st.sampled_from(sorted(BIT_LENGTHS)), rates, min_size=1)


def D(text: str) -> Decimal:
    return Decimal(text)


def test_tpp_is_dense_rate_times_bit_length_maximised() -> None:
    h100 = {"bf16": D("989.5"), "fp16": D("989.5"), "fp8": D("1979"), "int8": D("1979")}
    assert tpp(h100) == (D("15832"), "bf16")  # the CSET worked example
    assert tpp({"fp16": D("312"), "int8": D("624"), "tf32": D("156")})[0] == D("4992")  # A100
    assert tpp({"fp16": D("65"), "int8": D("130")}) == (D("1040"), "fp16")  # T4
    assert tpp({"fp4": None, "fp8": None}) is None
    assert tpp({}) is None
    with pytest.raises(ValueError, match="negative"):
        tpp({"fp16": D("-1")})


def test_performance_density() -> None:
    assert performance_density(D("15832"), D("814")).quantize(D("0.01")) == D("19.45")
    assert performance_density(D("1040"), D("545")).quantize(D("0.01")) == D("1.91")
    assert performance_density(D("1040"), None) is None
    assert performance_density(None, D("545")) is None
    assert performance_density(D("1040"), D("0")) is None


@given(dense_maps)
def test_tpp_property_max_over_precisions(dense: dict[str, Decimal]) -> None:
    value, precision = tpp(dense)  # type: ignore[misc]
    assert value == max(rate * BIT_LENGTHS[p] for p, rate in dense.items())
    assert value == dense[precision] * BIT_LENGTHS[precision]
    assert isinstance(value, Decimal)


@given(dense_maps, st.sampled_from(sorted(BIT_LENGTHS)), rates)
def test_tpp_property_monotone(dense: dict[str, Decimal], precision: str, extra: Decimal) -> None:
    before = tpp(dense)[0]  # type: ignore[index]
    raised = dict(dense)
    raised[precision] = (raised.get(precision) or D(0)) + extra
    assert tpp(raised)[0] >= before  # type: ignore[index]


@given(dense_maps, st.integers(min_value=1, max_value=1000))
def test_tpp_and_pd_scale_linearly(dense: dict[str, Decimal], factor: int) -> None:
    scaled = {p: r * factor for p, r in dense.items()}
    assert tpp(scaled)[0] == tpp(dense)[0] * factor  # type: ignore[index]
    area = D("500")
    assert performance_density(tpp(scaled)[0], area) == performance_density(  # type: ignore[index]
        tpp(dense)[0] * factor,  # type: ignore[index]
        area,
    )


@given(
    st.decimals(min_value=0, max_value=100_000, places=1),
    st.one_of(st.none(), st.decimals(min_value=0, max_value=100, places=2)),
    st.booleans(),
)
def test_classification_invariants(tpp_value: Decimal, pd: Decimal | None, dc: bool) -> None:
    result = classify(tpp_value, pd, dc, T)
    if tpp_value >= T.a1_tpp:
        assert result.eccn == "3A090.a" and result.paragraph == "3A090.a.1"
        assert result.nac_eligible is (not dc)
    elif tpp_value < D("1600") or not dc:
        assert result.eccn == NOT_3A090
    elif pd is None:
        assert result.eccn == UNKNOWN
    else:
        assert result.eccn in ("3A090.a", "3A090.b", NOT_3A090)
        if pd >= T.a2_pd:
            assert result.paragraph == "3A090.a.2"
        if pd < D("1.6"):
            assert result.eccn == NOT_3A090


@pytest.mark.parametrize(
    ("tpp_value", "pd", "dc", "expected"),
    [
        ("4800", None, True, "3A090.a.1"),
        ("4799.9", "5.92", True, "3A090.a.2"),
        ("4799.9", "5.91", True, "3A090.b.1"),
        ("2400", "1.6", True, "3A090.b.1"),
        ("2399.9", "1.6", True, None),
        ("1600", "3.2", True, "3A090.b.2"),
        ("1600", "3.19", True, None),
        ("1599.9", "20", True, None),
        ("5285", "8.69", False, "3A090.a.1"),  # RTX 4090: NAC-eligible
        ("4799", "8", False, None),
        ("2000", "3.18", True, None),  # A10: just under the .b.2 density edge
    ],
)
def test_band_edges(tpp_value: str, pd: str | None, dc: bool, expected: str | None) -> None:
    result = classify(D(tpp_value), D(pd) if pd else None, dc, T)
    assert result.paragraph == expected
    if expected is None:
        assert result.eccn == NOT_3A090


def test_published_classification_precedence() -> None:
    vendor = Published("3A090.b", "vendor", date(2024, 1, 1), "https://vendor.example")
    official = Published("3A090.a", "official", date(2025, 1, 1), "https://bis.example")
    later = Published("3A991", "official", date(2026, 1, 1), "https://bis.example/2")
    assert published_on([vendor, official], date(2024, 6, 1)) == vendor
    assert published_on([vendor, official], date(2025, 6, 1)) == official
    assert published_on([vendor, official, later], date(2026, 6, 1)) == later
    assert published_on([official], date(2024, 6, 1)) is None


def _rule_sets() -> list[RuleSet]:
    return [
        RuleSet(
            r["slug"],
            r["name"],
            r["effective_from"],
            r["effective_to"],
            Rules.model_validate(r["rules"]),
            tuple(r["source"].split(" ; ")),
            r["checked"],
        )
        for r in RULES
    ]


def test_rule_sets_are_contiguous_and_selected_by_date() -> None:
    sets = sorted(_rule_sets(), key=lambda r: r.effective_from)
    for before, after in itertools.pairwise(sets):
        assert before.effective_to is not None
        assert (after.effective_from - before.effective_to).days == 1, after.slug
    assert sets[-1].effective_to is None
    assert rule_set_on(sets, date(2023, 11, 16)) is None
    assert rule_set_on(sets, date(2023, 11, 17)).slug == "us-ac-2023-11"  # type: ignore[union-attr]
    assert rule_set_on(sets, date(2025, 5, 12)).slug == "us-aid-2025-04"  # type: ignore[union-attr]
    assert rule_set_on(sets, date(2025, 5, 13)).slug == "us-ac-2025-05"  # type: ignore[union-attr]
    assert rule_set_on(sets, date(2030, 1, 1)).slug == "us-ac-2026-01"  # type: ignore[union-attr]


def test_evaluate_scope_exclusions_and_tiers() -> None:
    sets = {r.slug: r for r in _rule_sets()}
    lists = {
        "us_d1": frozenset({"CN", "MO", "KH"}),
        "us_d4": frozenset({"CN", "IL", "AE", "MO"}),
        "us_d5": frozenset({"CN"}),
        "us_a6": frozenset({"IL"}),
        "us_treated_as_cn": frozenset({"HK"}),
    }
    h100 = GpuSpecs("nvidia-h100-sxm-80gb", "H100", True, {"fp16": D("989.5")}, D("814"), D("3.35"))
    on = date(2024, 6, 1)
    rules = sets["us-ac-2023-11"]
    assert evaluate(h100, "AE", on, rules, lists).licence_required is True
    assert evaluate(h100, "IL", on, rules, lists).licence_required is False  # A:6 excluded
    assert evaluate(h100, "DE", on, rules, lists).licence_required is False
    hk = evaluate(h100, "HK", on, rules, lists)
    assert hk.licence_required is True and any("treated as China" in r for r in hk.reasons)
    tier = evaluate(h100, "PL", date(2025, 3, 1), sets["us-aid-2025-01"], lists)
    assert tier.ai_diffusion_tier == "tier2" and tier.licence_required is False
    assert evaluate(
        h100, "FR", date(2025, 3, 1), sets["us-aid-2025-01"], lists
    ).ai_diffusion_tier == ("tier1")
    unknown = GpuSpecs("x", "X", True, {"fp16": D("150")}, None)  # TPP 2400, no die area
    answer = evaluate(unknown, "CN", on, rules, lists)
    assert answer.eccn == UNKNOWN and answer.licence_required is None
    assert evaluate(unknown, "DE", on, rules, lists).licence_required is False
    body = answer.to_dict()
    assert body["notice"].startswith("Informational, not legal advice")
    assert body["tpp"] == "2400" and body["licence"] == "unknown"


def test_research_table_agrees_with_computed_metrics() -> None:
    """gpu_specs.csv's computed TPP and PD (where given) match our arithmetic."""
    if not SPECS_CSV.exists():
        pytest.skip("shared/reference/gpu_specs.csv is not present")
    checked = 0
    rows = list(csv.DictReader(SPECS_CSV.read_text(encoding="utf-8").splitlines()))
    for row in rows:
        if not row["computed_tpp"]:
            continue
        dense = {
            "fp16": D(row["dense_fp16_tflops"]) if row["dense_fp16_tflops"] else None,
            "fp8": D(row["dense_fp8_tflops"]) if row["dense_fp8_tflops"] else None,
            "int8": D(row["dense_int8_tops"]) if row["dense_int8_tops"] else None,
        }
        value = tpp(dense)
        assert value is not None, row["model"]
        assert abs(value[0] - D(row["computed_tpp"])) <= 1, row["model"]
        if row["performance_density"] and row["die_area_mm2"]:
            pd = performance_density(value[0], D(row["die_area_mm2"]))
            assert abs(pd - D(row["performance_density"])) <= D("0.01"), row["model"]  # type: ignore[operator]
        checked += 1
    assert checked >= 15
