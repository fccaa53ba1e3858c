"""The GPU name parser (schema.gpu_names) against the real catalog (fixtures/reference).

Examples from real sources, bad input, and property tests: every catalog model resolves
from generated spellings of it, and no spelling of one model names another.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlers.normalize.gpu_form import with_sku_form_factor
from crawlers.normalize.reference import REFERENCE_DIR, ReferenceIndex, reference_index
from crawlers.pipeline import Pipeline, Rejected, SourceMeta
from schema.gpu_names import (
    MAX_NAME,
    GpuFacts,
    GpuNameIndex,
    NameProblem,
    ParsedName,
    parse_gpu_name,
)


@pytest.fixture(scope="module")
def ref() -> ReferenceIndex:
    return reference_index()


# raw name as a source spells it -> (slug, inferred by a family default)
EXAMPLES: dict[str, tuple[str, bool]] = {
    # names the catalog had models for, in spellings it did not know
    "B200 (180 GB SXM6)": ("nvidia-b200-sxm-180gb", False),
    "NVIDIA RTX A6000 48 GB": ("nvidia-rtx-a6000-48gb", False),
    "A6000 (48 GB)": ("nvidia-rtx-a6000-48gb", False),
    "RTX 6000Ada 48GB": ("nvidia-rtx-6000-ada-48gb", False),
    "RTX 6000 (24 GB)": ("nvidia-quadro-rtx-6000-24gb", False),
    "A100-80G-PCIe": ("nvidia-a100-pcie-80gb", False),
    "H100-80G-SXM5": ("nvidia-h100-sxm-80gb", False),
    "Tesla P100-PCIE-16GB": ("nvidia-p100-pcie-16gb", False),
    "nvidia-a100-sxm-80gb": ("nvidia-a100-sxm-80gb", False),
    "NVIDIA H100 PCIe": ("nvidia-h100-pcie-80gb", False),
    "8x H100 SXM5": ("nvidia-h100-sxm-80gb", False),
    "H100x8 SXM": ("nvidia-h100-sxm-80gb", False),
    "NVIDIA® Tesla® V100-SXM2-32GB": ("nvidia-v100-sxm2-32gb", False),
    "h100 sxm5 81920 MiB": ("nvidia-h100-sxm-80gb", False),
    "NVIDIA H100 SXM5 81559MiB": ("nvidia-h100-sxm-80gb", False),
    "A10G": ("nvidia-a10g-24gb", False),
    "L40S": ("nvidia-l40s-48gb", False),
    "Instinct MI300X": ("amd-mi300x-192gb", False),
    "v5p-8": ("google-tpu-v5p-95gb", False),
    "TPU v6e": ("google-tpu-v6e-32gb", False),
    # family defaults (documented in gpus.yaml): inferred
    "H100": ("nvidia-h100-sxm-80gb", True),
    "NVIDIA H100 80GB HBM3": ("nvidia-h100-sxm-80gb", True),
    "A100": ("nvidia-a100-sxm-40gb", True),
    "A100 80GB": ("nvidia-a100-sxm-80gb", True),
    "H200": ("nvidia-h200-sxm-141gb", True),
}

# common cloud GPUs the catalog lacked (issue 19)
NEW_PARTS: dict[str, str] = {
    "RTX 3060 12GB": "nvidia-rtx-3060-12gb",
    "RTX 5090 32GB": "nvidia-rtx-5090-32gb",
    "NVIDIA GeForce RTX 5090": "nvidia-rtx-5090-32gb",
    "NVIDIA GeForce RTX 4080 SUPER": "nvidia-rtx-4080-super-16gb",
    "RTX 4080S 16GB": "nvidia-rtx-4080-super-16gb",
    "NVIDIA GeForce RTX 4080": "nvidia-rtx-4080-16gb",
    "RTX 4070S Ti 16GB": "nvidia-rtx-4070-ti-super-16gb",
    "NVIDIA GeForce RTX 4070 Ti": "nvidia-rtx-4070-ti-12gb",
    "NVIDIA GeForce RTX 3080 Ti": "nvidia-rtx-3080-ti-12gb",
    "NVIDIA GeForce RTX 3090 Ti": "nvidia-rtx-3090-ti-24gb",
    "Quadro-RTX5000 16GB": "nvidia-quadro-rtx-5000-16gb",
    "NVIDIA Quadro RTX 5000": "nvidia-quadro-rtx-5000-16gb",
    "Q RTX 8000 48GB": "nvidia-quadro-rtx-8000-48gb",
    "NVIDIA RTX 2000 Ada Generation": "nvidia-rtx-2000-ada-16gb",
    "AMD Radeon Instinct MI25": "amd-mi25-16gb",
    "AMD Radeon PRO V620": "amd-radeon-pro-v620-32gb",
    "RTXPRO6000": "nvidia-rtx-pro-6000-96gb",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "nvidia-rtx-pro-6000-96gb",
    "P6000": "nvidia-quadro-p6000-24gb",
}


@pytest.mark.parametrize(("raw", "expected"), EXAMPLES.items())
def test_examples(ref: ReferenceIndex, raw: str, expected: tuple[str, bool]) -> None:
    found = ref.resolve_gpu(raw)
    assert (found.slug, found.inferred) == expected, found.reason


@pytest.mark.parametrize(("raw", "slug"), NEW_PARTS.items())
def test_common_cloud_gpus_resolve(ref: ReferenceIndex, raw: str, slug: str) -> None:
    found = ref.resolve_gpu(raw)
    assert found.slug == slug, found.reason


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty name"),
        ("   ", "empty name"),
        ("H100 " * 41, f"longer than {MAX_NAME}"),
        ("Н100 SXM", "outside printable ASCII"),  # a Cyrillic En, not an H
        ("H100 显卡", "outside printable ASCII"),
        ("8x", "no model designation"),
        ("8 x ", "no model designation"),
        ("Contact sales", "no catalog model"),
        ("GPU", "no model designation"),
        ("RTX 9999", "no catalog model"),
        ("H100 NVLink", "ambiguous"),  # SXM or NVL: never a guess between two parts
        ("A100 PCIe", "ambiguous"),  # 40 or 80 GB
        ("RTX 6000", "ambiguous"),  # Quadro RTX 6000, RTX 6000 Ada or RTX PRO 6000
        ("H100 PCIe 40GB", "no catalog model with that memory"),
    ],
)
def test_bad_names_are_unmapped_with_a_reason(ref: ReferenceIndex, raw: str, reason: str) -> None:
    found = ref.resolve_gpu(raw)
    assert found.slug is None
    assert found.reason is not None and reason in found.reason


def test_none_and_hostile_input_never_raise(ref: ReferenceIndex) -> None:
    assert ref.resolve_gpu(None).slug is None
    for raw in ["\x00H100", "H100\nSXM", "%s%n{}", "'; DROP TABLE offer;--", "9" * 500, "x" * 199]:
        ref.resolve_gpu(raw)  # an answer, never an exception


def test_memory_hint_decides_only_where_the_name_is_silent(ref: ReferenceIndex) -> None:
    # "RTX 6000" is three parts; the source's 24 GB says which
    assert ref.resolve_gpu("RTX 6000", Decimal(24)).slug == "nvidia-quadro-rtx-6000-24gb"
    assert ref.resolve_gpu("RTX 6000", Decimal(48)).slug == "nvidia-rtx-6000-ada-48gb"
    # a hint that fits no candidate is ignored, not an error
    assert ref.resolve_gpu("L40S", Decimal(7)).slug == "nvidia-l40s-48gb"
    # a stated memory wins over the hint
    assert ref.resolve_gpu("A100 80GB PCIe", Decimal(40)).slug == "nvidia-a100-pcie-80gb"


def test_parse_reads_the_parts() -> None:
    assert parse_gpu_name("NVIDIA GeForce RTX 4070 Ti SUPER 16 GB") == ParsedName(
        "4070", frozenset({"ti", "super"}), frozenset(), Decimal(16), frozenset()
    )
    parsed = parse_gpu_name("Quadro-RTX5000")
    assert (parsed.designation, parsed.qualifiers) == ("5000", frozenset({"quadro"}))
    assert parse_gpu_name("H100 80GB PCIe NVLink").form_factors == frozenset({"pcie"})
    assert parse_gpu_name("tpu-v5p-8").designation == "v5p"  # a slice of 8 chips
    assert parse_gpu_name("A100 MIG 1g.5gb").memory_gb is None  # a MIG profile, not memory
    with pytest.raises(NameProblem):
        parse_gpu_name("  ")


def test_no_default_across_designations() -> None:
    # two parts of one designation without a default stay unmapped
    index = GpuNameIndex.build(
        [
            GpuFacts("x-a1-10gb", "A1 10GB", Decimal(10)),
            GpuFacts("x-a1-20gb", "A1 20GB", Decimal(20)),
            GpuFacts("x-b1-10gb", "B1 10GB", Decimal(10), default=1),
        ]
    )
    assert index.resolve("A1").reason == "ambiguous: x-a1-10gb or x-a1-20gb"
    assert index.resolve("B1").slug == "x-b1-10gb"
    assert not index.resolve("B1").inferred  # the only B1: nothing was inferred


def test_every_model_name_reads_as_itself(ref: ReferenceIndex) -> None:
    wrong = {
        g.slug: ref.names.by_parser(g.name)
        for g in ref.gpus
        if ref.names.by_parser(g.name).slug != g.slug or ref.names.by_parser(g.name).inferred
    }
    assert not wrong


def test_explicit_aliases_agree_with_the_parser(ref: ReferenceIndex) -> None:
    """An alias is for what the parser cannot read; one it reads as another model is a
    collision."""
    disagree = {}
    for key, slug in ref.aliases.items():
        parsed = ref.names.by_parser(key)
        if parsed.slug is not None and parsed.slug != slug:
            disagree[key] = (slug, parsed.slug)
    assert not disagree


# --------------------------------------------------------------------------- properties

VENDOR_WORDS = {
    "nvidia": ["", "NVIDIA ", "nvidia-", "Nvidia "],
    "amd": ["", "AMD ", "amd_"],
    "intel": ["", "Intel ", "Habana "],
    "aws": ["", "AWS "],
    "google": ["", "Google ", "TPU "],
}
FORM_WORDS = {
    "sxm": ["SXM", "sxm", "SXM5", "HGX"],
    "pcie": ["PCIe", "PCIE", "pcie", "PCI-E"],
    "nvl": ["NVL", "nvl"],
    "oam": ["OAM"],
    "superchip": ["Superchip", ""],
}
SEPARATORS = [" ", "-", "_", "  "]


def _memory_words(memory: Decimal) -> list[str]:
    whole = format(memory.normalize(), "f")
    return [
        f"{whole}GB",
        f"{whole} GB",
        f"{whole}G",
        f"{whole}gb",
        f"({whole} GB)",
        f"{int(memory * 1024)} MiB",
        f"{int(memory * 1024)}MiB",
    ]


def _case(word: str, how: int) -> str:
    return [word, word.lower(), word.upper(), word.title()][how]


@st.composite
def spelling(draw: st.DrawFn, ref: ReferenceIndex) -> tuple[GpuFacts, str]:
    """A spelling of one catalog model that states everything telling it apart."""
    gpu = draw(st.sampled_from(sorted(ref.gpus, key=lambda g: g.slug)))
    parsed = ref.names.by_parser(gpu.name)
    assert parsed.slug == gpu.slug
    name = parse_gpu_name(gpu.name)
    head = name.designation.upper() if draw(st.booleans()) else name.designation
    if name.designation.isdigit():
        head = draw(st.sampled_from(["RTX ", "RTX", "GeForce RTX ", ""])) + head
    parts = [head + "".join(f" {s.upper()}" for s in sorted(name.suffixes, reverse=True))]
    extras = [q.title() for q in sorted(name.qualifiers)]
    if gpu.memory_gb is not None:
        extras.append(draw(st.sampled_from(_memory_words(gpu.memory_gb))))
    if gpu.form_factor in FORM_WORDS:
        extras.append(draw(st.sampled_from(FORM_WORDS[gpu.form_factor])))
    extras = draw(st.permutations(extras))
    at = draw(st.integers(0, len(extras)))
    words = [w for w in [*extras[:at], *parts, *extras[at:]] if w]
    separator = draw(st.sampled_from(SEPARATORS))
    vendor = draw(st.sampled_from(VENDOR_WORDS.get(gpu.slug.split("-")[0], [""])))
    how = draw(st.integers(0, 3))
    return gpu, _case(vendor + separator.join(words), how)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_spellings_resolve_to_their_model(data: st.DataObject) -> None:
    ref = reference_index()
    gpu, raw = data.draw(spelling(ref))
    found = ref.names.by_parser(raw)
    assert found.slug == gpu.slug, (raw, found.reason)
    assert not found.inferred, raw


def test_resolution_is_cached_and_stable(ref: ReferenceIndex) -> None:
    first = ref.resolve_gpu("NVIDIA GeForce RTX 4090")
    assert ref.resolve_gpu("NVIDIA GeForce RTX 4090") is first
    assert first.slug == "nvidia-rtx-4090-24gb"


def test_aliases_are_only_for_what_the_parser_cannot_read() -> None:
    """gpus.yaml's alias lists hold irregular spellings only (codenames, marketing names):
    an alias the parser reads by itself, or reads as ambiguous, is dead weight or a guess."""
    rows = yaml.safe_load((REFERENCE_DIR / "gpus.yaml").read_text())["gpus"]
    ref = reference_index()
    readable = {
        (row["slug"], alias): ref.names.by_parser(alias).slug or ref.names.by_parser(alias).reason
        for row in rows
        for alias in row.get("aliases") or []
        if ref.names.by_parser(alias).slug or ref.names.by_parser(alias).candidates
    }
    assert not readable


@pytest.mark.parametrize(
    ("name", "sku", "expected"),
    [
        ("H100", "gpu_1x_h100_pcie", "H100 PCIe"),
        ("A100 80GB", "gpu_8x_a100_80gb_sxm4", "A100 80GB SXM"),
        ("NVIDIA H100 PCIe", "gpu_1x_h100_pcie", "NVIDIA H100 PCIe"),  # stated already
        ("H100", "p5.48xlarge", "H100"),  # the SKU says nothing
        ("H100", "h100-sxm-or-pcie", "H100"),  # says two things: nothing
        ("", "gpu_1x_h100_pcie", ""),
    ],
)
def test_form_factor_from_the_instance_type(name: str, sku: str, expected: str) -> None:
    assert with_sku_form_factor(name, sku) == expected


def test_lambda_h100_pcie_through_a_peer_is_the_pcie_part(ref: ReferenceIndex) -> None:
    name = with_sku_form_factor("H100", "gpu_1x_h100_pcie")
    assert ref.resolve_gpu(name, Decimal(80)).slug == "nvidia-h100-pcie-80gb"


@pytest.mark.parametrize("memory", ["NaN", "sNaN", "Infinity", "-inf", "lots"])
def test_a_hostile_memory_figure_is_rejected_by_validation_not_an_exception(memory: str) -> None:
    pipeline = Pipeline(SourceMeta("acme", "acme"))
    result = pipeline.process(
        {
            "sku": "x",
            "gpu_name_raw": "A100",
            "gpu_memory_gb": memory,
            "gpu_count": "1",
            "region": "r",
            "price_kind": "on_demand",
            "unit": "hour",
            "amount": "1",
            "currency": "USD",
        }
    )
    assert isinstance(result, Rejected) and "gpu_memory_gb" in result.reason
    assert ref_index_never_raises(Decimal(memory) if memory != "lots" else None)


def ref_index_never_raises(hint: Decimal | None) -> bool:
    return reference_index().resolve_gpu("RTX 6000", hint).slug is None
