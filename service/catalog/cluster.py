"""Cluster facts of offers: what connects the GPUs inside a node and what connects nodes.

A price source that states them puts them on its records (``OfferRecord.interconnect``,
``interconnect_gbps``, ``network``, ``network_gbps``); reviewed reference data per
instance family (``fixtures/reference/interconnects.yaml``, in the ``cluster_reference``
table) gives the ones it does not. :func:`merge` decides each of the four values on its
own: the source's value when it states one, else the reference's, else unknown (null,
never guessed), and records where each came from in ``offer.cluster_basis``. A reference
speed is not used for a kind the source names differently (it belongs to another link).

The file is read and checked before anything is written (size cap, YAML safe loader,
every row validated, providers known, no SKU or prefix given twice); a bad file stops the
reference load with a :class:`ReferenceError` naming file, row and field. A missing file
means no reference facts (every fact a source does not state is then unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator, model_validator
from sqlalchemy import Connection, and_, select, update

from schema.cluster import ClusterReference
from schema.enums import Interconnect, Network
from schema.prices import Offer
from schema.text import CONTROL_CHARACTERS, plain_text
from service.catalog.reference import CheckedReference, Slug, _read_rows, _Row, replace_table
from service.core.reference_error import ReferenceError

CLUSTER = ClusterReference.__table__  # type: ignore[attr-defined]
OFFER = Offer.__table__  # type: ignore[attr-defined]
FILE = "interconnects.yaml"
MAX_BYTES = 1_000_000
"""A reviewed file of a few hundred families weighs tens of KB: anything bigger is a mistake."""
MAX_ROWS = 5_000
MAX_INTERCONNECT_GBPS = Decimal(100_000)
"""GB/s per GPU: NVLink 5 is 1,800; a hundred thousand is a typo."""
MAX_NETWORK_GBPS = Decimal(1_000_000)
"""Gb/s per node: eight 800G NICs are 6,400."""

SOURCE, REFERENCE, UNKNOWN = "s", "r", "-"
FACTS = ("interconnect", "interconnect_gbps", "network", "network_gbps")
"""The four facts, in ``cluster_basis`` order."""

Facts = tuple[str | None, Decimal | None, str | None, Decimal | None]
Merged = tuple[str | None, Decimal | None, str | None, Decimal | None, str | None]
"""The four facts and their basis (None when all four are unknown)."""
NO_FACTS: Facts = (None, None, None, None)


SkuName = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(plain_text)]


class ClusterRow(_Row):
    provider: Slug
    skus: list[SkuName] | None = Field(default=None, min_length=1, max_length=200)
    """These SKU names exactly."""
    sku_prefix: SkuName | None = None
    """Every SKU of the provider whose name starts so (a longer prefix wins; a name wins)."""
    interconnect: Interconnect | None = None
    interconnect_gbps: Decimal | None = Field(default=None, gt=0, le=MAX_INTERCONNECT_GBPS)
    network: Network | None = None
    network_gbps: Decimal | None = Field(default=None, gt=0, le=MAX_NETWORK_GBPS)

    @field_validator("interconnect_gbps", "network_gbps", mode="before")
    @classmethod
    def _exact(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError('write speeds as quoted text (e.g. "900") or integers, not floats')
        if isinstance(value, bool):
            raise ValueError("a boolean is not a speed")
        return value

    @field_validator("interconnect_gbps", "network_gbps")
    @classmethod
    def _finite(cls, value: Decimal | None) -> Decimal | None:
        if value is not None and not value.is_finite():
            raise ValueError("must be a finite number")
        return value

    @field_validator("source")
    @classmethod
    def _url(cls, value: str) -> str:
        unsafe = len(value) > 1000 or CONTROL_CHARACTERS.search(value)
        if not value.startswith("https://") or unsafe:
            raise ValueError("must be the https URL of the page that says so")
        return value

    @model_validator(mode="after")
    def _shape(self) -> ClusterRow:
        if (self.skus is None) == (self.sku_prefix is None):
            raise ValueError("give either skus (a list of names) or sku_prefix, not both")
        if self.interconnect is None and self.network is None:
            raise ValueError("give interconnect or network (a row without facts says nothing)")
        if self.interconnect_gbps is not None and self.interconnect is None:
            raise ValueError("interconnect_gbps needs the interconnect it measures")
        if self.network_gbps is not None and self.network is None:
            raise ValueError("network_gbps needs the network it measures")
        return self

    def facts(self) -> Facts:
        return (
            self.interconnect.value if self.interconnect else None,
            self.interconnect_gbps,
            self.network.value if self.network else None,
            self.network_gbps,
        )


def check_cluster(directory: Path, reference: CheckedReference) -> list[ClusterRow]:
    """Read and check ``interconnects.yaml`` against the checked reference; writes nothing."""
    path = directory / FILE
    if not path.exists():
        return []
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ReferenceError(f"{FILE}: {size:,} bytes, more than the {MAX_BYTES:,} allowed")
    rows: list[ClusterRow] = _read_rows(path, "families", ClusterRow)
    if len(rows) > MAX_ROWS:
        raise ReferenceError(f"{FILE}: {len(rows):,} rows, more than the {MAX_ROWS:,} allowed")
    providers = {p.slug for p in reference.providers}
    seen: dict[tuple[str, str, str], int] = {}
    for index, row in enumerate(rows, start=1):
        where = f"{FILE} row {index} ({row.provider})"
        if row.provider not in providers:
            raise ReferenceError(f"{where}: unknown provider {row.provider!r}")
        for key in _keys(row):
            if key in seen:
                what = f"sku {key[1]!r}" if key[1] else f"sku_prefix {key[2]!r}"
                raise ReferenceError(f"{where}: {what} is given twice (first at row {seen[key]})")
            seen[key] = index
    return rows


def _keys(row: ClusterRow) -> list[tuple[str, str, str]]:
    if row.skus is not None:
        return [(row.provider, sku, "") for sku in row.skus]
    return [(row.provider, "", row.sku_prefix or "")]


def cluster_rows(rows: Iterable[ClusterRow]) -> list[dict[str, Any]]:
    """One ``cluster_reference`` row per SKU name or prefix."""
    out = []
    for row in rows:
        interconnect, interconnect_gbps, network, network_gbps = row.facts()
        for provider, sku, prefix in _keys(row):
            out.append(
                {
                    "provider": provider,
                    "sku": sku,
                    "sku_prefix": prefix,
                    "interconnect": interconnect,
                    "interconnect_gbps": interconnect_gbps,
                    "network": network,
                    "network_gbps": network_gbps,
                    "source_url": row.source,
                    "checked": row.checked,
                    "notes": row.notes,
                }
            )
    return out


def write_cluster(conn: Connection, rows: list[ClusterRow]) -> int:
    """Make ``cluster_reference`` hold exactly these rows; returns how many rows were added,
    changed or removed (0 when the file did not change)."""
    return replace_table(
        conn,
        CLUSTER,
        cluster_rows(rows),
        lambda r: (r["provider"], r["sku"], r["sku_prefix"]),
        _comparable,
    )


def _comparable(row: Any) -> dict[str, Any]:
    return {
        k: (Decimal(v).normalize() if k.endswith("_gbps") and v is not None else v)
        for k, v in dict(row).items()
    }


@dataclass
class ClusterIndex:
    """The reference facts of SKUs: by exact name, else by the longest matching prefix."""

    exact: dict[tuple[str, str], Facts] = field(default_factory=dict)
    prefixes: dict[str, list[tuple[str, Facts]]] = field(default_factory=dict)
    """provider -> (prefix, facts), longest prefix first."""

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> ClusterIndex:
        """From (provider, sku, sku_prefix, interconnect, gbps, network, gbps) rows."""
        index = cls()
        for provider, sku, prefix, *facts in rows:
            value: Facts = (
                facts[0],
                _decimal(facts[1]),
                facts[2],
                _decimal(facts[3]),
            )
            if sku:
                index.exact[(provider, sku)] = value
            else:
                index.prefixes.setdefault(provider, []).append((prefix, value))
        for entries in index.prefixes.values():
            entries.sort(key=lambda entry: (-len(entry[0]), entry[0]))
        return index

    @classmethod
    def load(cls, conn: Connection) -> ClusterIndex:
        return cls.from_rows(conn.execute(select(*READ_COLUMNS)).all())

    def lookup(self, provider: str, sku: str) -> Facts | None:
        found = self.exact.get((provider, sku))
        if found is not None:
            return found
        for prefix, facts in self.prefixes.get(provider, ()):
            if sku.startswith(prefix):
                return facts
        return None


READ_COLUMNS = (
    CLUSTER.c.provider,
    CLUSTER.c.sku,
    CLUSTER.c.sku_prefix,
    CLUSTER.c.interconnect,
    CLUSTER.c.interconnect_gbps,
    CLUSTER.c.network,
    CLUSTER.c.network_gbps,
)


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def merge(stated: Facts, reference: Facts | None) -> Merged:
    """Each fact from the source when it states it, else from the reference, else unknown.

    A reference speed is dropped when the source names another kind than the reference's
    (the speed is that of the reference's link, not the source's)."""
    ref = reference or NO_FACTS
    out: list[Any] = []
    basis = []
    for position in range(4):
        own, theirs = stated[position], ref[position]
        if position in (1, 3) and own is None and theirs is not None:
            kind = stated[position - 1]
            if kind is not None and kind != ref[position - 1]:
                theirs = None
        if own is not None:
            out.append(own)
            basis.append(SOURCE)
        elif theirs is not None:
            out.append(theirs)
            basis.append(REFERENCE)
        else:
            out.append(None)
            basis.append(UNKNOWN)
    text = "".join(basis)
    return (out[0], out[1], out[2], out[3], None if text == UNKNOWN * 4 else text)


def stated_facts(values: Sequence[Any], basis: str | None) -> Facts:
    """The facts a stored offer's source stated (those whose basis is the source)."""
    if not basis:
        return NO_FACTS
    kept = [v if b == SOURCE else None for v, b in zip(values, basis, strict=False)]
    return (kept[0], _decimal(kept[1]), kept[2], _decimal(kept[3]))


def refresh_cluster_facts(conn: Connection) -> int:
    """Re-derive every stored offer's reference facts after a reference load, without a
    crawl; the facts its source stated stay. Returns how many offers changed."""
    index = ClusterIndex.load(conn)
    columns = [OFFER.c[name] for name in ("provider", "sku", *FACTS, "cluster_basis")]
    changed = 0
    for provider, sku, *values in conn.execute(select(*columns).distinct()).all():
        basis = values[4]
        stored = (values[0], _decimal(values[1]), values[2], _decimal(values[3]), basis)
        merged = merge(stated_facts(values[:4], basis), index.lookup(provider, sku))
        if merged == stored:
            continue
        same = [
            OFFER.c[name].is_(None) if value is None else OFFER.c[name] == value
            for name, value in zip((*FACTS, "cluster_basis"), values, strict=True)
        ]
        changed += conn.execute(
            update(OFFER)
            .where(OFFER.c.provider == provider, OFFER.c.sku == sku, and_(*same))
            .values(dict(zip((*FACTS, "cluster_basis"), merged, strict=True)))
        ).rowcount
    return changed
