"""An offer's cluster facts as the API and the CLI show them (see service.catalog.cluster
for where they come from and docs/cluster-facts.md)."""

from __future__ import annotations

from typing import Any

_BASIS = {"s": "source", "r": "reference"}


def cluster_json(row: dict[str, Any]) -> dict[str, Any]:
    """An offer's ``interconnect`` and ``network`` objects (null when all is unknown), from
    its four cluster facts and ``cluster_basis`` (see service.catalog.cluster)."""
    basis = row.get("cluster_basis") or "----"
    return {
        "interconnect": _fact(row, basis[0:2], "interconnect", "gbps_per_gpu"),
        "network": _fact(row, basis[2:4], "network", "gbps_per_node"),
    }


def _fact(row: dict[str, Any], basis: str, name: str, speed: str) -> dict[str, Any] | None:
    """One fact (its kind and speed, each with its basis letter), None when both are
    unknown."""
    of_kind, of_speed = _BASIS.get(basis[0]), _BASIS.get(basis[1])
    if not (of_kind or of_speed):
        return None
    return {
        "kind": row.get(name),
        "kind_basis": of_kind,
        speed: row.get(f"{name}_gbps"),
        "gbps_basis": of_speed,
    }
