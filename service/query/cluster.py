"""An offer's cluster facts as the API and the CLI show them (see service.catalog.cluster
for where they come from and docs/cluster-facts.md)."""

from __future__ import annotations

from typing import Any

_BASIS = {"s": "source", "r": "reference"}


def cluster_json(row: dict[str, Any]) -> dict[str, Any]:
    """An offer's ``interconnect`` and ``network`` objects (null when all is unknown), from
    its four cluster facts and ``cluster_basis`` (see service.catalog.cluster)."""
    basis = row.get("cluster_basis") or "----"
    of_kind, of_speed = _BASIS.get(basis[0]), _BASIS.get(basis[1])
    interconnect = None
    if of_kind or of_speed:
        interconnect = {
            "kind": row.get("interconnect"),
            "kind_basis": of_kind,
            "gbps_per_gpu": row.get("interconnect_gbps"),
            "gbps_basis": of_speed,
        }
    of_kind, of_speed = _BASIS.get(basis[2]), _BASIS.get(basis[3])
    network = None
    if of_kind or of_speed:
        network = {
            "kind": row.get("network"),
            "kind_basis": of_kind,
            "gbps_per_node": row.get("network_gbps"),
            "gbps_basis": of_speed,
        }
    return {"interconnect": interconnect, "network": network}
