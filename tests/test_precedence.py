"""Listings prefer a first-party offer over a peer's copy of the same offer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from schema.enums import PriceKind
from schema.records import OfferRecord
from service.precedence import identity, is_first_party, prefer_first_party


def offer(source: str, **overrides: Any) -> dict[str, Any]:
    base = {
        "source": source,
        "provider": "lambda",
        "sku": "gpu_8x_h100_sxm5",
        "region": "us-east-1",
        "price_kind": "on_demand",
        "unit": "hour",
        "amount": "23.92",
    }
    base.update(overrides)
    return base


def test_first_party_means_no_peer_prefix() -> None:
    assert is_first_party("lambda")
    assert is_first_party("azure")
    assert not is_first_party("skypilot:lambda")
    assert not is_first_party("gpuhunt:lambdalabs")


def test_peer_copy_of_a_first_party_offer_is_dropped() -> None:
    first = offer("lambda")
    sky = offer("skypilot:lambda", amount="24.00")
    hunt = offer("gpuhunt:lambdalabs")
    assert prefer_first_party([sky, first, hunt]) == [first]


def test_peers_fill_the_gaps() -> None:
    first = offer("lambda")
    other_region = offer("skypilot:lambda", region="europe-central-1")
    other_sku = offer("skypilot:lambda", sku="gpu_1x_a10")
    other_kind = offer("skypilot:lambda", price_kind="spot")
    other_provider = offer("skypilot:runpod", provider="runpod")
    kept = [first, other_region, other_sku, other_kind, other_provider]
    assert prefer_first_party(kept) == kept


def test_two_peers_without_a_first_party_are_both_kept_in_order() -> None:
    sky = offer("skypilot:lambda")
    hunt = offer("gpuhunt:lambdalabs", amount="23.90")
    assert prefer_first_party([hunt, sky]) == [hunt, sky]
    assert prefer_first_party([]) == []


def test_unit_and_amount_do_not_matter_first_party_offers_are_never_dropped() -> None:
    first = offer("lambda", unit="hour")
    first_monthly = offer("lambda", unit="month", amount="17000")
    peer = offer("skypilot:lambda", unit="month")
    assert prefer_first_party([first, first_monthly, peer]) == [first, first_monthly]


@dataclass
class Row:
    source: str
    provider: str
    sku: str
    region: str
    price_kind: PriceKind


def test_objects_records_and_enums_work_like_mappings() -> None:
    record = OfferRecord.model_validate(
        {**offer("skypilot:lambda"), "gpu_name_raw": "H100", "gpu_count": "8", "currency": "USD"}
    )
    first = Row("lambda", "lambda", "gpu_8x_h100_sxm5", "us-east-1", PriceKind.on_demand)
    assert identity(record) == identity(first) == identity(offer("lambda"))
    assert prefer_first_party([record, first]) == [first]
    spot = Row("lambda", "lambda", "gpu_8x_h100_sxm5", "us-east-1", PriceKind.spot)
    assert prefer_first_party([record, spot]) == [record, spot]


SOURCES = st.sampled_from(["lambda", "skypilot:lambda", "gpuhunt:lambdalabs", "azure"])
OFFERS = st.lists(
    st.builds(
        offer,
        SOURCES,
        sku=st.sampled_from(["a", "b"]),
        region=st.sampled_from(["r1", "r2"]),
        price_kind=st.sampled_from(["on_demand", "spot"]),
    ),
    max_size=12,
)


@given(OFFERS)
def test_rule_properties(offers: list[dict[str, Any]]) -> None:
    result = prefer_first_party(offers)
    firsts = [o for o in offers if is_first_party(o["source"])]
    covered = {identity(o) for o in firsts}
    assert [o for o in result if is_first_party(o["source"])] == firsts
    for o in offers:
        if not is_first_party(o["source"]):
            assert (o in result) == (identity(o) not in covered)
    assert [o for o in offers if o in result] == result  # order kept, nothing invented
    assert prefer_first_party(result) == result  # idempotent
