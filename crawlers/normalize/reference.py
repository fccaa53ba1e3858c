"""Reference lookups for crawl-time normalization, read from ``fixtures/reference``.

The same files are loaded into the database by ``gpuatlas reference load``; ingest
resolves again against the database, so an alias added later also fixes old records.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from schema.names import gpu_alias_key

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "reference"


@dataclass(frozen=True)
class ReferenceIndex:
    aliases: dict[str, str]
    gpu_slugs: frozenset[str]
    regions: dict[tuple[str, str], str]

    def gpu(self, name: str | None) -> str | None:
        if not name:
            return None
        return self.aliases.get(gpu_alias_key(name))

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
    slugs: set[str] = set()
    for gpu in _read(directory / "gpus.yaml", "gpus"):
        slug = gpu["slug"]
        slugs.add(slug)
        for spelling in [slug, gpu.get("name", ""), *(gpu.get("aliases") or [])]:
            if spelling:
                aliases.setdefault(gpu_alias_key(str(spelling)), slug)
    regions = {
        (r["provider"], str(r["code"])): r["country"]
        for r in _read(directory / "regions.yaml", "regions")
    }
    return ReferenceIndex(aliases, frozenset(slugs), regions)
