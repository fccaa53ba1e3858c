"""Reference lookups for crawl-time normalization, read from ``fixtures/reference``.

The same files are loaded into the database by ``gpuatlas reference load``; ingest
resolves again against the database, so an alias added later also fixes old records.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import yaml

from schema.gpu_names import GpuFacts, GpuNameIndex, Resolution
from schema.names import gpu_alias_key

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "reference"


@dataclass(frozen=True)
class ReferenceIndex:
    aliases: dict[str, str]
    """Normalized spelling (:func:`gpu_alias_key`) -> slug, for irregular names."""
    gpus: tuple[GpuFacts, ...]
    regions: dict[tuple[str, str], str]

    @cached_property
    def names(self) -> GpuNameIndex:
        """The GPU name parser's index over these models (see :mod:`schema.gpu_names`)."""
        return GpuNameIndex.build(self.gpus, self.aliases)

    @property
    def gpu_slugs(self) -> frozenset[str]:
        return self.names.slugs

    def resolve_gpu(self, name: str | None, memory_gb: Decimal | None = None) -> Resolution:
        return self.names.resolve(name, memory_gb)

    def gpu(self, name: str | None, memory_gb: Decimal | None = None) -> str | None:
        """The model ``name`` means (stated or by a family default), or None."""
        return self.names.resolve(name, memory_gb).slug if name else None

    def country(self, provider: str, region: str) -> str | None:
        return self.regions.get((provider, region))


def _read(path: Path, key: str) -> list[dict]:
    if not path.exists():
        return []
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)  # noqa: S506 (a safe loader) or {}
    return list(data.get(key) or [])


@cache
def reference_index(directory: Path = REFERENCE_DIR) -> ReferenceIndex:
    aliases: dict[str, str] = {}
    gpus: list[GpuFacts] = []
    for gpu in _read(directory / "gpus.yaml", "gpus"):
        slug = gpu["slug"]
        gpus.append(gpu_facts(gpu))
        for spelling in [slug, gpu.get("name", ""), *(gpu.get("aliases") or [])]:
            if spelling:
                aliases.setdefault(gpu_alias_key(str(spelling)), slug)
    regions = {
        (r["provider"], str(r["code"])): r["country"]
        for r in _read(directory / "regions.yaml", "regions")
    }
    return ReferenceIndex(aliases, tuple(gpus), regions)


def gpu_facts(row: dict[str, Any]) -> GpuFacts:
    """What the parser needs of one gpus.yaml row (or its plain-data copy)."""
    memory = row.get("memory_gb")
    return GpuFacts(
        slug=str(row["slug"]),
        name=str(row.get("name") or row["slug"]),
        memory_gb=None if memory is None else Decimal(str(memory)),
        form_factor=row.get("form_factor"),
        default=row.get("default"),
    )
