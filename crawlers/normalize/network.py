"""Network and interconnect speeds as sources print them -> a decimal per second.

Pure functions, no I/O. ``network_gbps`` reads a per-node network figure in gigabits per
second: AWS's ``networkPerformance`` ("3200 Gigabit", "Up to 25 Gigabit", "4x 100
Gigabit"), a page's "20 Gbps", "3.2 Tbit/s", "400 Gb/s". Words without a figure ("High",
"Low to Moderate") and anything unreadable are ``None``: unknown, never guessed.

"Up to N" is read as N: it is the figure the source publishes for the size (a burst
ceiling; docs/cluster-facts.md says so).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SPEED = re.compile(
    r"^\s*(?:up\s+to\s+)?(?:(?P<links>\d{1,3})\s*[x×]\s*)?(?P<value>\d{1,7}(?:[.,]\d{1,3})?)\s*"
    r"(?P<unit>gigabits?|gbit(?:/s)?|gbps|gb/s|gbe|g|terabits?|tbit(?:/s)?|tbps|tb/s|t)"
    r"(?:\s+(?:ethernet|network|per\s+(?:node|instance|host|server)))?\s*$",
    re.IGNORECASE,
)
_MAX_GBPS = Decimal(1_000_000)


def network_gbps(text: object) -> Decimal | None:
    """Gb/s per node from a printed figure, or None when the text gives no figure."""
    if not isinstance(text, str) or len(text) > 60:
        return None
    match = _SPEED.match(text)
    if match is None:
        return None
    try:
        value = Decimal(match["value"].replace(",", "."))
    except InvalidOperation:  # pragma: no cover (the pattern admits digits only)
        return None
    if match["links"]:
        value *= int(match["links"])
    if match["unit"].lower().startswith("t"):
        value *= 1000
    if not 0 < value <= _MAX_GBPS:
        return None
    # plain notation: 3200, not 3.2E+3
    return value.quantize(Decimal(1)) if value == value.to_integral_value() else value.normalize()


_KINDS = (  # first match wins: RoCE names Ethernet too
    ("roce", re.compile(r"\bRoCE\b|RDMA over Converged Ethernet", re.I)),
    ("infiniband", re.compile(r"\binfini\s*band\b", re.I)),
    ("efa", re.compile(r"\bEFA\b|Elastic Fabric Adapter", re.I)),
    ("ethernet", re.compile(r"\bethernet\b", re.I)),
)
_SPEED_IN_TEXT = re.compile(
    r"(?<![\w.,])(\d{1,7}(?:[.,]\d{1,3})?)\s*(gbps|gb/s|gbit/s|gigabit|tbps|tb/s|tbit/s)(?!\w)",
    re.I,
)


def network_fact(label: object) -> dict[str, str]:
    """The node network a plan's label states (``"On-demand, 3200 Gbps Infiniband"``,
    ``"On-Demand, Ethernet"``) as record fields: ``network`` when it names a kind, and
    ``network_gbps`` when it also gives a speed; {} when it names no kind (a speed alone
    could be any link: internet bandwidth, storage)."""
    if not isinstance(label, str) or len(label) > 300:
        return {}
    kind = next((name for name, pattern in _KINDS if pattern.search(label)), None)
    if kind is None:
        return {}
    fields = {"network": kind}
    speeds = _SPEED_IN_TEXT.findall(label)
    if len(speeds) == 1:  # two figures: which is the node's is not said
        value, unit = speeds[0]
        gbps = network_gbps(f"{value} {unit}")
        if gbps is not None:
            fields["network_gbps"] = str(gbps)
    return fields
