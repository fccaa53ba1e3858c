"""Network speeds and kinds as sources print them -> record fields (crawlers.normalize.network)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from crawlers.normalize.network import network_fact, network_gbps
from service.core.config import Settings
from service.crawl.run import crawl_source
from tests.conftest import FIXTURES


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


@pytest.mark.parametrize(
    ("label", "fields"),
    [
        ("On-demand, 3200 Gbps Infiniband", {"network": "infiniband", "network_gbps": "3200"}),
        ("On-Demand, Ethernet", {"network": "ethernet"}),
        ("RoCE v2 cluster network, 400 Gb/s", {"network": "roce", "network_gbps": "400"}),
        ("RDMA over Converged Ethernet", {"network": "roce"}),  # not plain Ethernet
        ("3.2 Tbps InfiniBand", {"network": "infiniband", "network_gbps": "3200"}),
        ("Elastic Fabric Adapter", {"network": "efa"}),
        ("100 Gbps Ethernet, 25 Gbps internet", {"network": "ethernet"}),  # which figure?
        ("20 Gbps", {}),  # a speed without a kind could be any link
        ("Long-Term Reserve", {}),
        (None, {}),
        ("InfiniBand " * 100, {}),
    ],
)
def test_network_fact(label: object, fields: dict[str, str]) -> None:
    assert network_fact(label) == fields


def test_voltage_park_plans_state_their_network() -> None:
    """The pricing page's plan eyebrows ("On-demand, 3200 Gbps Infiniband", "On-Demand,
    Ethernet") become the offers' network facts."""
    settings = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    files = [FIXTURES / "voltagepark-web" / "pricing.html"]
    report = crawl_source(None, settings, "voltagepark-web", from_files=files, dry_run=True)
    assert report.label == "ok", report.label
    facts = {r.sku: (r.network, r.network_gbps, r.interconnect) for r in report.records}
    assert facts == {
        "hgx-h100-on-demand-3200-gbps-infiniband": ("infiniband", Decimal(3200), None),
        "hgx-h100-on-demand-ethernet": ("ethernet", None, None),
    }
