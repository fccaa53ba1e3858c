"""The offer's stored sort key that depends on reference data: USD per PFLOPS-hour.

``offer.pflop_hour_usd_e10`` (:func:`schema.prices.pflop_hour_key`) follows the offer's
price (``gpu_hour_usd_e10``, written by ingest) and its GPU model's BF16 TFLOPS (reference
data). Ingest writes it with each new or repriced offer (:mod:`service.catalog.writer`);
:func:`refresh_pflop_keys` recomputes it where a GPU model's TFLOPS figure or an offer's GPU
model changed without a new price (a reference load, re-resolution, an offer updated in
place).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from schema.catalog import GpuModel
from schema.prices import Offer, pflop_hour_key_sql

OFFER = Offer.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
CHUNK = 5000


def offer_pflop_key(dialect: str) -> Any:
    """The key of each offer row, from its stored price key and its GPU model (a scalar
    subquery: NULL without a model)."""
    key = pflop_hour_key_sql(OFFER.c.gpu_hour_usd_e10, GPU.c.tflops_bf16, dialect)
    return select(key).where(GPU.c.slug == OFFER.c.gpu_slug).scalar_subquery()


def refresh_pflop_keys(conn: Connection, ids: Sequence[int] | None = None) -> int:
    """Set ``pflop_hour_usd_e10`` from the offers' current price key and GPU model, for the
    offers ``ids`` (None: every offer), where it differs; returns the rows changed."""
    if ids is not None and not ids:  # the statement is not even built (once per batch)
        return 0
    key = offer_pflop_key(conn.dialect.name)
    stale = update(OFFER).values(pflop_hour_usd_e10=key)
    stale = stale.where(OFFER.c.pflop_hour_usd_e10.is_distinct_from(key))
    if ids is None:
        return conn.execute(stale).rowcount
    changed = 0
    for start in range(0, len(ids), CHUNK):
        part = ids[start : start + CHUNK]
        changed += conn.execute(stale.where(OFFER.c.id.in_(part))).rowcount
    return changed
