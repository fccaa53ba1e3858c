"""The GPU name parser's index, read from the catalog's gpu_model and gpu_alias tables.

Ingest, ``gpuatlas reference load`` (re-resolving stored offers) and the compliance
answers read raw GPU names with the same index (see :mod:`schema.gpu_names`).
"""

from __future__ import annotations

from sqlalchemy import Connection, select

from schema.catalog import GpuAlias, GpuModel
from schema.gpu_names import GpuFacts, GpuNameIndex

GPU = GpuModel.__table__  # type: ignore[attr-defined]
ALIAS = GpuAlias.__table__  # type: ignore[attr-defined]


def gpu_name_index(conn: Connection) -> GpuNameIndex:
    """Every catalog model and explicit alias, as the parser's index (one read each)."""
    models = conn.execute(
        select(GPU.c.slug, GPU.c.name, GPU.c.memory_gb, GPU.c.form_factor, GPU.c.default_rank)
    )
    aliases = conn.execute(select(ALIAS.c.alias, ALIAS.c.gpu_slug))
    return GpuNameIndex.build(
        (GpuFacts(slug, name, memory, form, rank) for slug, name, memory, form, rank in models),
        {alias: slug for alias, slug in aliases},  # noqa: C416 (Row)
    )
