"""offer.pflop_hour_usd_e10: the sort key of USD per PFLOPS-hour, and its index

- ``offer.pflop_hour_usd_e10`` (BIGINT): USD per PFLOPS-hour (BF16) x 10^10, an exact
  integer: ``gpu_hour_usd_e10`` x 1000 / the GPU model's ``tflops_bf16`` (taken in whole
  10^-4 TFLOPS), rounded half to even, as the listing shows ``price_per_pflop_hour_usd``
  (``schema.prices.pflop_hour_key``). Written by ingest with each price and by reference
  loads when a TFLOPS figure or an offer's GPU model changes. A sort key only, never
  returned.
- ``ix_offer_status_pflop_hour`` (status, pflop_hour_usd_e10, id):
  ``sort=price_per_pflop_hour`` / ``-price_per_pflop_hour`` walk it as the price sorts walk
  theirs, instead of one walk per GPU model plus a sort of the filters' matches; and
  ``ix_offer_gpu_slug_status_pflop_hour`` (gpu_slug, status, pflop_hour_usd_e10, id) for a
  GPU filter, as ``ix_offer_gpu_slug_status_gpu_hour`` serves the default sort.

Existing rows are backfilled in integer arithmetic (the same on both databases, and the
same as ``schema.prices.pflop_hour_key_sql``). Plain ADD / DROP COLUMN on both databases
(see 0015).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# {e}: the price key (USD per GPU-hour x 10^10); {d}: the TFLOPS in whole 10^-4 TFLOPS, NULL
# if zero. Quotient x 10^7, the remainder's 10^7 digits, then banker's rounding: 64-bit
# integers throughout (exact while USD per GPU-hour / TFLOPS < 9.2 x 10^5).
KEY = (
    "({e} / {d}) * 10000000 + (({e} % {d}) * 10000000) / {d}"
    " + CASE WHEN 2 * ((({e} % {d}) * 10000000) % {d}) > {d}"
    " OR (2 * ((({e} % {d}) * 10000000) % {d}) = {d}"
    " AND ((({e} % {d}) * 10000000) / {d}) % 2 = 1) THEN 1 ELSE 0 END"
)
SQLITE_TFLOPS = "NULLIF(CAST(ROUND(CAST(g.tflops_bf16 AS REAL) * 10000) AS INTEGER), 0)"
POSTGRES_TFLOPS = "NULLIF(CAST(ROUND(g.tflops_bf16 * 10000) AS BIGINT), 0)"

SQLITE_BACKFILL = f"""
UPDATE offer SET pflop_hour_usd_e10 = (
    SELECT {KEY.format(e="offer.gpu_hour_usd_e10", d=SQLITE_TFLOPS)}
    FROM gpu_model g WHERE g.slug = offer.gpu_slug
)
WHERE gpu_hour_usd_e10 IS NOT NULL AND gpu_slug IS NOT NULL
"""
POSTGRES_BACKFILL = f"""
UPDATE offer SET pflop_hour_usd_e10 = {KEY.format(e="offer.gpu_hour_usd_e10", d=POSTGRES_TFLOPS)}
FROM gpu_model g
WHERE g.slug = offer.gpu_slug AND offer.gpu_hour_usd_e10 IS NOT NULL
"""


def upgrade() -> None:
    op.add_column("offer", sa.Column("pflop_hour_usd_e10", sa.BigInteger(), nullable=True))
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.execute(SQLITE_BACKFILL if sqlite else POSTGRES_BACKFILL)
    op.create_index(
        "ix_offer_status_pflop_hour",
        "offer",
        ["status", "pflop_hour_usd_e10", "id"],
        unique=False,
    )
    op.create_index(
        "ix_offer_gpu_slug_status_pflop_hour",
        "offer",
        ["gpu_slug", "status", "pflop_hour_usd_e10", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_offer_gpu_slug_status_pflop_hour", table_name="offer")
    op.drop_index("ix_offer_status_pflop_hour", table_name="offer")
    if op.get_bind().dialect.name == "sqlite":
        # a plain DROP COLUMN: batch mode would recreate offer, which observations reference
        op.execute("ALTER TABLE offer DROP COLUMN pflop_hour_usd_e10")
        return
    op.drop_column("offer", "pflop_hour_usd_e10")
