"""Reference lookups of ingest: each record's GPU slug and country, the unmapped names,
and the fingerprint of an offer's SKU attributes.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select

from schema.catalog import Provider, Region
from schema.enums import UnmappedKind
from schema.gpu_names import GpuNameIndex
from schema.types import decimal_to_text
from service.catalog.cluster import ClusterIndex, Merged, merge
from service.catalog.columns import ATTRIBUTES_BEFORE_CLUSTER
from service.catalog.gpu_catalog import gpu_name_index

PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]


@dataclass
class Reference:
    gpus: GpuNameIndex
    providers: set[str]
    regions: dict[tuple[str, str], str]
    cluster: ClusterIndex = field(default_factory=ClusterIndex)

    @classmethod
    def load(cls, conn: Connection) -> Reference:
        region_rows = conn.execute(select(REGION.c.provider, REGION.c.code, REGION.c.country))
        return cls(
            gpus=gpu_name_index(conn),
            providers=set(conn.execute(select(PROVIDER.c.slug)).scalars()),
            regions={(provider, code): country for provider, code, country in region_rows},
            cluster=ClusterIndex.load(conn),
        )


ATTRIBUTE_SEP = "\x1f"
ORIGINAL_ATTRIBUTES = ATTRIBUTES_BEFORE_CLUSTER - 1
"""The attributes offers had first; the later ones (tax_included, the cluster facts) leave
the digest as it was while unknown."""


GPU_NAME, REGION_NAME = UnmappedKind.gpu.value, UnmappedKind.region.value
GLOBAL_REGIONS = frozenset({"global"})
"""Region code of a price that is the same everywhere the provider operates."""


MEMO_ENTRIES = 20_000
"""Entries a per-ingest memo keeps across batches (see :func:`trim_memos`)."""


def trim_memos(*memos: dict[Any, Any]) -> None:
    """Empty each memo that has grown past :data:`MEMO_ENTRIES`. The memos of an ingest
    (fingerprints, cluster facts, derived prices, bound attributes) hold pure results:
    emptied, they are computed again; kept whole, a crawl of a million distinct SKUs would
    hold a million entries of each."""
    for memo in memos:
        if len(memo) > MEMO_ENTRIES:
            memo.clear()


class Resolver:
    """GPU slug and country of each record from reference data, with per-name caches;
    counts every unmapped name (invariant 6: unknown is recorded, never dropped)."""

    def __init__(self, reference: Reference) -> None:
        self.reference = reference
        self.unmapped: Counter[tuple[str, str]] = Counter()
        """(kind, name) -> how many records named it (see :meth:`tally_unmapped`)."""
        self.records_unmapped = 0
        self.missed = 0
        """Records with an unmapped name resolved so far (whether one record had any)."""
        self._misses: dict[tuple[tuple[str | None, str | None] | None, Any], int] = {}
        """(unmapped GPU names, unmapped provider/region) -> records: one dict increment
        per unmapped record, expanded into :attr:`unmapped` once, at the end."""
        self._gpu: dict[tuple[str | None, str | None, Decimal | None], tuple[str | None, bool]] = {}
        self._cluster: dict[tuple[Any, ...], Merged] = {}
        """(provider, sku, stated facts) -> the offer's cluster facts and their basis."""
        self.digests: dict[tuple[Any, ...], str] = {}
        """Fingerprint memo: attributes -> their digest. Exact: equal attributes have the
        same text (decimals are hashed in canonical form), and offers of one SKU share
        them, so a crawl hashes each SKU once."""

    def trim(self) -> None:
        """Between batches: bound the memos (the unmapped tallies are kept)."""
        trim_memos(self._gpu, self._cluster, self.digests)

    def attributes(self, fields: Mapping[str, Any]) -> tuple[Any, ...]:
        """A record's SKU attributes (``fields`` is its ``__dict__``), in ATTRIBUTES order,
        resolved."""
        gpu_key = (fields["gpu_model"], fields["gpu_name_raw"], fields["gpu_memory_gb"])
        gpu = self._gpu.get(gpu_key)
        if gpu is None:
            gpu = self._gpu[gpu_key] = self._resolve_gpu(*gpu_key)
        gpu_slug, gpu_inferred = gpu
        country = fields["country"]
        region_country = self.reference.regions.get((fields["provider"], fields["region"]))
        if region_country is None and (country or fields["region"] in GLOBAL_REGIONS):
            region_country = ""  # known: the record says where, or the price is global
        if gpu_slug is None or region_country is None:
            self._count_unmapped(fields, gpu_slug, region_country)
        return (
            fields["price_per"],
            gpu_slug,
            gpu_inferred,
            fields["gpu_name_raw"],
            fields["gpu_count"],
            fields["gpu_memory_gb"],
            fields["vcpus"],
            fields["memory_gb"],
            country or region_country or None,
            fields["bare_metal"],
            fields["price_floor"],
            fields["source_url"],
            fields["tax_included"],
            *self._cluster_facts(fields),
        )

    def _cluster_facts(self, fields: Mapping[str, Any]) -> Merged:
        stated = (
            fields["interconnect"],
            fields["interconnect_gbps"],
            fields["network"],
            fields["network_gbps"],
        )
        key = (fields["provider"], fields["sku"], *stated)
        found = self._cluster.get(key)
        if found is None:
            reference = self.reference.cluster.lookup(fields["provider"], fields["sku"])
            # enum members -> their values: stored and hashed as plain text
            plain = tuple(getattr(v, "value", v) for v in stated)
            found = self._cluster[key] = merge(plain, reference)  # type: ignore[arg-type]
        return found

    def digest(self, attributes: tuple[Any, ...]) -> str:
        """:func:`fingerprint` of attributes not hashed yet, kept in :attr:`digests`."""
        digest = self.digests[attributes] = fingerprint(attributes)
        return digest

    def _count_unmapped(
        self, fields: Mapping[str, Any], gpu_slug: Any, region_country: str | None
    ) -> None:
        miss = (
            (fields["gpu_model"], fields["gpu_name_raw"]) if gpu_slug is None else None,
            (fields["provider"], fields["region"]) if region_country is None else None,
        )
        self._misses[miss] = self._misses.get(miss, 0) + 1
        self.missed += 1

    def tally_unmapped(self) -> None:
        """Add the unmapped names counted so far to :attr:`unmapped` and
        :attr:`records_unmapped`."""
        for (gpu, region), records in self._misses.items():
            self.records_unmapped += records
            if gpu is not None:
                self.unmapped[(GPU_NAME, gpu[0] or gpu[1] or "")] += records
            if region is not None:
                self.unmapped[(REGION_NAME, "/".join(region))] += records
        self._misses.clear()

    def _resolve_gpu(
        self, gpu_model: str | None, gpu_name_raw: str | None, memory_gb: Decimal | None
    ) -> tuple[str | None, bool]:
        """(slug, inferred): a source's own slug if the catalog has it, else the raw name
        read by the parser (see schema.gpu_names)."""
        gpus = self.reference.gpus
        if gpu_model is not None:
            return (gpu_model, False) if gpu_model in gpus.slugs else (None, False)
        found = gpus.resolve(gpu_name_raw, memory_gb) if gpu_name_raw else None
        return (found.slug, found.inferred) if found is not None else (None, False)


def fingerprint(attributes: tuple[Any, ...]) -> str:
    """A short digest of an offer's SKU attributes, compared instead of 11 columns.

    It is computed from records only (never from stored values), from a text form that
    is the same for equal values: decimals in canonical form (``8.0`` and ``8`` are one
    value and are stored alike), ``str`` of None, bools and strings."""
    # tax_included and the cluster facts came later: trailing unknowns keep the digest
    # offers had before they existed, so the columns' arrival changes no stored offer
    end = len(attributes)
    while end > ORIGINAL_ATTRIBUTES and attributes[end - 1] is None:
        end -= 1
    attributes = attributes[:end]
    return _digest(ATTRIBUTE_SEP.join(map(_attribute_text, attributes)))


def _attribute_text(value: Any) -> str:
    return decimal_to_text(value) if isinstance(value, Decimal) else str(value)


def _digest(joined: str) -> str:
    return hashlib.blake2b(joined.encode(), digest_size=8).hexdigest()
