"""Load the hidden costs (``fixtures/reference/costs.yaml``): transfer and storage prices
per provider, and per region where they differ, in tiers (see :mod:`schema.costs`).

Read and checked before anything is written: every provider and region must be known to
the catalog's reference files, tiers start at 0 GB and rise, prices are exact decimals.
Written inside the reference load's transaction; a second load of the same file changes
nothing. A missing file means no cost is known (the TCO then says so), not that costs
are zero.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import Connection

from schema.costs import ALL_REGIONS, CostKind, ProviderCost
from service.catalog.reference import CheckedReference, Slug, _read_rows, _Row, replace_table
from service.core.reference_error import ReferenceError

COST = ProviderCost.__table__  # type: ignore[attr-defined]
FILE = "costs.yaml"
MAX_BYTES = 1_000_000
"""A reviewed file of a few hundred rows weighs tens of KB: anything this big is a mistake."""
KEY = ("provider", "region", "kind", "from_gb")


class Tier(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_gb: Decimal = Field(ge=0, max_digits=18)
    price: Decimal = Field(ge=0, max_digits=18)

    @field_validator("from_gb", "price", mode="before")
    @classmethod
    def _exact(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError('write decimals as quoted text (e.g. "0.085"), not floats')
        return value

    @field_validator("from_gb", "price")
    @classmethod
    def _finite(cls, value: Decimal) -> Decimal:
        if not value.is_finite():
            raise ValueError("must be a finite number")
        return value


class CostRow(_Row):
    provider: Slug
    kind: CostKind
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    regions: list[str] | None = Field(default=None, min_length=1)
    """None: every region of the provider."""
    tiers: list[Tier] = Field(min_length=1, max_length=20)

    @model_validator(mode="after")
    def _tiers_rise(self) -> CostRow:
        if self.tiers[0].from_gb != 0:
            raise ValueError("tiers: the first tier starts at from_gb 0")
        for lower, upper in zip(self.tiers, self.tiers[1:], strict=False):
            if upper.from_gb <= lower.from_gb:
                raise ValueError("tiers: from_gb must rise from one tier to the next")
        return self


def check_costs(directory: Path, reference: CheckedReference) -> list[CostRow]:
    """Read and check ``costs.yaml`` against the checked reference; writes nothing."""
    path = directory / FILE
    if not path.exists():
        return []
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ReferenceError(f"{FILE}: {size:,} bytes, more than the {MAX_BYTES:,} allowed")
    rows: list[CostRow] = _read_rows(path, "costs", CostRow)
    providers = {p.slug for p in reference.providers}
    regions = {(r.provider, r.code) for r in reference.regions}
    seen: dict[tuple[str, str, str], int] = {}
    for index, row in enumerate(rows, start=1):
        where = f"{FILE} row {index} ({row.provider} {row.kind.value})"
        if row.provider not in providers:
            raise ReferenceError(f"{where}: unknown provider {row.provider!r}")
        for code in row.regions or [ALL_REGIONS]:
            if code != ALL_REGIONS and (row.provider, code) not in regions:
                raise ReferenceError(f"{where}: {code!r} is not a region of {row.provider}")
            key = (row.provider, code, row.kind.value)
            if key in seen:
                place = code or "every region"
                raise ReferenceError(
                    f"{where}: {row.kind.value} for {place} is given twice "
                    f"(first at row {seen[key]})"
                )
            seen[key] = index
    return rows


def cost_rows(rows: list[CostRow]) -> list[dict[str, Any]]:
    """One ``provider_cost`` row per tier and region."""
    out = []
    for row in rows:
        for code in row.regions or [ALL_REGIONS]:
            for tier in row.tiers:
                out.append(
                    {
                        "provider": row.provider,
                        "region": code,
                        "kind": row.kind.value,
                        "from_gb": tier.from_gb,
                        "price": tier.price,
                        "currency": row.currency,
                        "source_url": row.source,
                        "checked": row.checked,
                        "notes": row.notes,
                    }
                )
    return out


def write_costs(conn: Connection, rows: list[CostRow]) -> int:
    """Make ``provider_cost`` hold exactly these rows; returns how many rows were added,
    changed or removed (0 when the file did not change)."""
    return replace_table(conn, COST, cost_rows(rows), _key)


def _key(row: Any) -> tuple[Any, ...]:
    return tuple(Decimal(row[name]).normalize() if name == "from_gb" else row[name] for name in KEY)
