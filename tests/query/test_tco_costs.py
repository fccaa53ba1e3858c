"""The arithmetic of hidden costs: tiers bill each GB at its own tier's price, a region's
rate wins over the provider's, and the break-even month counts the hidden costs."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from service.core.units import HOURS_PER_MONTH
from service.query.costs import CostBook, CostRate
from service.query.tco import (
    ALWAYS_ON_KINDS,
    HOURLY_KINDS,
    TERM_HOURS,
    Workload,
    break_even,
    term_cost,
)

D = Decimal


def rate(tiers: list[tuple[str, str]], region: str = "", kind: str = "internet_egress") -> CostRate:
    return CostRate(
        provider="aws",
        region=region,
        kind=kind,
        currency="USD",
        tiers=tuple((D(a), D(b)) for a, b in tiers),
        source_url="https://example.com/pricing",
        checked=date(2026, 12, 4),
        notes=None,
    )


AWS_EGRESS = rate(
    [("0", "0"), ("100", "0.09"), ("10240", "0.085"), ("51200", "0.07"), ("153600", "0.05")]
)


def test_tiers_by_hand() -> None:
    assert AWS_EGRESS.cost(D(0)) == 0
    assert AWS_EGRESS.cost(D(100)) == 0  # the free allowance
    assert AWS_EGRESS.cost(D(5120)) == D("451.80")  # 5 TB: (5120 - 100) x 0.09
    # 60 TB: 10,140 GB at 0.09, 40,960 at 0.085, 10,240 at 0.07
    assert AWS_EGRESS.cost(D(61440)) == D("912.60") + D("3481.60") + D("716.80")
    # 200 TB reaches the last tier: 46,400 GB at 0.05 beyond 150 TB
    assert AWS_EGRESS.cost(D(204800)) == (
        D("912.60") + D("3481.60") + D("102400") * D("0.07") + D("51200") * D("0.05")
    )
    assert AWS_EGRESS.cost(D("100.5")) == D("0.045")  # fractions of a GB are billed pro rata


tiers = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=10**6),
        st.decimals(min_value=0, max_value=5, places=4),
    ),
    min_size=0,
    max_size=6,
    unique_by=lambda t: t[0],
)


@given(
    first=st.decimals(min_value=0, max_value=5, places=4),
    rest=tiers,
    a=st.integers(min_value=0, max_value=2 * 10**6),
    b=st.integers(min_value=0, max_value=2 * 10**6),
)
def test_tiered_cost_is_the_sum_of_each_gb_at_its_tier(
    first: Decimal, rest: list[tuple[int, Decimal]], a: int, b: int
) -> None:
    steps = [(D(0), first), *sorted((D(g), p) for g, p in rest)]
    r = CostRate("x", "", "internet_egress", "USD", tuple(steps), "https://x", date.today(), None)
    quantity = D(a)
    expected = sum(
        (
            max(D(0), min(quantity, steps[i + 1][0] if i + 1 < len(steps) else quantity) - start)
            * price
            for i, (start, price) in enumerate(steps)
        ),
        D(0),
    )
    assert r.cost(quantity) == expected
    # more GB never cost less, and within the first tier the cost is linear
    low, high = sorted((D(a), D(b)))
    assert r.cost(low) <= r.cost(high)
    if high <= steps[1][0] if len(steps) > 1 else True:
        assert r.cost(high) == high * first


def test_a_regions_rate_wins_over_the_providers() -> None:
    sydney = rate([("0", "0"), ("100", "0.114")], region="ap-southeast-2")
    book = CostBook([AWS_EGRESS, sydney])
    assert book.rate("aws", "ap-southeast-2", "internet_egress") is sydney
    assert book.rate("aws", "us-east-1", "internet_egress") is AWS_EGRESS
    assert book.rate("aws", None, "internet_egress") is AWS_EGRESS
    assert book.rate("aws", "us-east-1", "block_storage") is None
    assert book.rate("gcp", "us-east-1", "internet_egress") is None


def test_break_even_counts_hidden_costs() -> None:
    work = Workload(gpu_count=D(1), hours_per_month=D(730), months=12)
    # on demand 730 a month against a 1-year term of 0.5 x 730 x 12 = 4,380 paid up front
    assert term_cost(D("0.5"), D(1), 12 * HOURS_PER_MONTH, 12) == D(4380)
    assert break_even(D(1), D("0.5"), work, 12 * HOURS_PER_MONTH) == 6
    # 100 a month more at the reserved option's region: 730 m >= 4,380 + 100 m from m = 7
    assert break_even(D(1), D("0.5"), work, 12 * HOURS_PER_MONTH, D(0), D(100)) == 7
    # and more at the on-demand's region brings it forward: 830 m >= 4,380 from m = 6
    assert break_even(D(1), D("0.5"), work, 12 * HOURS_PER_MONTH, D(100), D(0)) == 6
    assert break_even(D(1), D("0.5"), Workload(D(1), D(730), 5), 12 * HOURS_PER_MONTH) is None


def test_weekly_terms_and_always_on_serverless() -> None:
    # a weekly rental bills whole weeks: 3 months (2,190 hours) take 14 weeks (2,352 hours)
    assert term_cost(D(2), D(8), D(168), 3) == D(2) * 8 * 168 * 14
    # 28,000 a week for 8 GPUs is 20.833… per GPU-hour; 12 months take 53 weeks
    week = D(28000) / 8 / 168
    assert term_cost(week, D(8), D(168), 12) == week * 8 * 168 * 53
    # cheaper than on demand at 24 per GPU-hour from the first month
    work = Workload(gpu_count=D(8), hours_per_month=HOURS_PER_MONTH, months=12)
    assert break_even(D(24), week, work, D(168)) == 1
    assert "serverless" in HOURLY_KINDS and "serverless_active" in ALWAYS_ON_KINDS
    assert TERM_HOURS["weekly"] == 168 and TERM_HOURS["reserved_1y"] == 12 * HOURS_PER_MONTH
