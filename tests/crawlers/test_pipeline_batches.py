"""The pipeline validates a crawl's records in batches: the same records, rejections,
counts and payload links as validating them one by one (what a spider's items get)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crawlers.pipeline as pipeline_module
from crawlers.pipeline import Pipeline, Rejected, SourceMeta

META = SourceMeta(name="acme", provider="acme", currency="USD")

BREAKS: dict[str, dict[str, Any]] = {
    "negative amount": {"amount": "-1"},
    "unparseable amount": {"amount": "lots"},
    "no GPU": {"gpu_name_raw": None},
    "unknown kind": {"price_kind": "forever"},
    "unknown currency": {"currency": "XYZ"},
    "bad country": {"country": "Narnia"},
    "zero GPUs": {"gpu_count": "0"},
    "extra field": {"colour": "blue"},
    "control character": {"sku": "gpu\x07"},
}


def raw(i: int, **changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "sku": f"gpu-{i}",
        "gpu_name_raw": ["H100 SXM", "A100 80GB", "Mystery 9000", "L40S"][i % 4],
        "gpu_count": str(1 + i % 8),
        "region": ["us-east-1", "eu-west-1", "nowhere-9"][i % 3],
        "price_kind": "on_demand" if i % 2 else "spot",
        "unit": "hour",
        "amount": f"{1 + i % 13}.{i % 100:02d}",
        "_payload": i % 3 if i % 5 else None,
    }
    item.update(changes)
    return item


def one_by_one(raws: list[dict[str, Any]]) -> tuple[Pipeline, list[Any], list[Rejected]]:
    pipeline = Pipeline(META)
    records, rejected = [], []
    for item in raws:
        result = pipeline.process(item)
        (rejected if isinstance(result, Rejected) else records).append(result)
    return pipeline, records, rejected


def outcome(pipeline: Pipeline, records: list[Any], rejected: list[Rejected]) -> Any:
    payloads = [pipeline.payload_of.get(id(record)) for record in records]
    return (
        [record.model_dump() for record in records],
        payloads,
        [(r.position, r.reason, r.record) for r in rejected],
        (pipeline.stats.seen, pipeline.stats.valid, pipeline.stats.rejected),
        dict(pipeline.stats.unmapped),
        dict(pipeline.stats.reasons),
    )


def check(raws: list[dict[str, Any]]) -> None:
    batched = Pipeline(META)
    records, rejected = batched.run([dict(item) for item in raws])
    assert outcome(batched, records, rejected) == outcome(*one_by_one(raws))


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_module, "VALIDATION_BATCH", 4)


def test_a_crawl_with_invalid_records_across_batches() -> None:
    raws = [raw(i) for i in range(23)]
    for position, reason in zip((0, 3, 4, 9, 13, 14, 15, 22), BREAKS, strict=False):
        raws[position] = raw(position, **BREAKS[reason])
    check(raws)


def test_a_valid_crawl_keeps_its_order_and_payloads() -> None:
    raws = [raw(i) for i in range(17)]
    batched = Pipeline(META)
    records, rejected = batched.run(raws)
    assert not rejected and [r.sku for r in records] == [f"gpu-{i}" for i in range(17)]
    check(raws)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 200), st.sampled_from([None, *BREAKS])), min_size=0, max_size=30
    )
)
def test_any_mix_of_valid_and_invalid_records(plan: list[tuple[int, str | None]]) -> None:
    check([raw(i, **(BREAKS[b] if b else {})) for i, b in plan])
