"""Network speeds as sources print them -> Gb/s per node (crawlers.normalize.network)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from crawlers.normalize.network import network_gbps


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        ("3200 Gigabit", Decimal(3200)),  # AWS networkPerformance
        ("Up to 25 Gigabit", Decimal(25)),  # the published burst ceiling
        ("4x 100 Gigabit", Decimal(400)),
        ("100 Gigabit", Decimal(100)),
        ("20 Gbps", Decimal(20)),  # a pricing page's column
        ("400 Gb/s", Decimal(400)),
        ("3.2 Tbit/s", Decimal(3200)),
        ("1,5 Gbps", Decimal("1.5")),
        ("10 GbE", Decimal(10)),
        ("High", None),
        ("Low to Moderate", None),
        ("Moderate", None),
        ("0 Gbps", None),
        ("", None),
        (None, None),
        (25, None),  # a bare number has no unit
        ("25 Mbps", None),  # not this unit: unknown rather than a wrong figure
        ("9" * 200 + " Gbps", None),
        ("25 Gigabit\u202e", None),
    ],
)
def test_network_gbps(text: object, gbps: Decimal | None) -> None:
    found = network_gbps(text)
    assert found == gbps
    if found is not None:
        assert "E" not in str(found)  # plain notation, as records carry decimals
