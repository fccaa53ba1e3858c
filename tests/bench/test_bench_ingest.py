"""`make bench`'s ingest benchmark runs and reports every step of every round.

Nothing about time is asserted (benchmarks measure; the suite checks that they still
run): a small source, two rounds, SQLite and, when configured, PostgreSQL."""

from __future__ import annotations

import re

import pytest

import tests.bench.ingest as bench
from tests.conftest import PG_URL

STEPS = (
    "first ingest",
    "unchanged re-ingest",
    "5 %-changed re-ingest",
    "floor: raw executemany",
    "first ingest, 1 offer per SKU",
)


@pytest.mark.slow
def test_the_ingest_benchmark_reports_every_step_in_rounds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "N", 400)
    monkeypatch.setattr(bench, "ROUNDS", 2)
    if not PG_URL:
        monkeypatch.delenv("GPUATLAS_TEST_POSTGRES_URL", raising=False)
    bench.main()
    out = capsys.readouterr().out
    backends = ["SQLite", "PostgreSQL"] if PG_URL else ["SQLite"]
    assert re.search(
        r"^machine: reference loop [\d.]+ s, median of the rounds \[[\d.]+–[\d.]+ s\]", out, re.M
    )
    sections = re.split(r"^(SQLite|PostgreSQL)$", out, flags=re.M)
    assert list(sections[1::2]) == backends
    for body in sections[2::2]:
        for step in STEPS:
            match = re.search(
                rf"^  {re.escape(step)} +[\d.]+ s +[\d,]+ offers/s +-?[\d,.]+ KiB added +"
                r"\(client CPU [\d.]+ s\)  \[[\d.]+–[\d.]+ s\]$",
                body,
                flags=re.M,
            )
            assert match, (step, body)
        ratio = re.search(r"within each round: median [\d.]+x \(([\d.]+x, [\d.]+x)\)$", body, re.M)
        assert ratio, body
    if PG_URL:  # and how the role's large loads check foreign keys, which moves the figures
        checks = r"^  \(large loads' foreign keys checked (once per load|row by row): .+\)$"
        assert re.search(checks, sections[4], re.M), sections[4]


def test_the_catalog_shape_offers_each_sku_in_every_region_and_price_kind() -> None:
    records = bench.synthetic(6000)
    keys = {(r.provider, r.sku, r.region, r.price_kind) for r in records}
    assert len(keys) == len(records)  # every offer distinct
    skus: dict[tuple[str, str], list[bench.OfferRecord]] = {}
    for r in records:
        skus.setdefault((r.provider, r.sku), []).append(r)
    assert len(skus) == 80  # 40 providers x 2 SKUs
    for offers in skus.values():
        assert len(offers) == bench.REGIONS * len(bench.KINDS)
        assert len({(o.gpu_name_raw, o.gpu_count, o.vcpus, o.memory_gb) for o in offers}) == 1
    wide = bench.synthetic(6000, sku_per_offer=True)
    assert len({(r.provider, r.sku) for r in wide}) == len(wide)
