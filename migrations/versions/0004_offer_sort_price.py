"""Offer sort price: the current USD per GPU-hour on ``offer``, and indexes for listings.

- ``offer.gpu_hour_usd`` (exact decimal): the current observation's USD per GPU-hour,
  written by ingest in the same transaction as the observation.
- ``offer.gpu_hour_usd_e10`` (BIGINT): the same amount x 10^10, an exact integer (stored
  decimals keep 10 places). A sort key only (decimals are text on SQLite): listings order,
  page and filter on it; the decimal is what the API returns.
- ``ix_offer_status_gpu_hour`` (status, gpu_hour_usd_e10, id) and
  ``ix_offer_gpu_slug_status_gpu_hour`` (gpu_slug, status, gpu_hour_usd_e10, id): the
  default listing (cheapest per GPU-hour first) walks an index instead of sorting every
  match. The second replaces ``ix_offer_gpu_slug_status``, its prefix.

Existing rows are backfilled from their current observation.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import schema.types

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_BACKFILL = """
UPDATE offer SET gpu_hour_usd = (
    SELECT o.gpu_hour_usd FROM price_observation o WHERE o.id = offer.observation_id
)
"""
# Decimals are canonical text on SQLite; through a double the key is exact below 10^5 USD.
SQLITE_KEY = """
UPDATE offer SET gpu_hour_usd_e10 = CAST(ROUND(CAST(gpu_hour_usd AS REAL) * 10000000000) AS INTEGER)
WHERE gpu_hour_usd IS NOT NULL
"""
POSTGRES_BACKFILL = """
UPDATE offer SET gpu_hour_usd = o.gpu_hour_usd,
    gpu_hour_usd_e10 = CAST(o.gpu_hour_usd * 10000000000 AS BIGINT)
FROM price_observation o
WHERE o.id = offer.observation_id AND o.gpu_hour_usd IS NOT NULL
"""


def upgrade() -> None:
    with op.batch_alter_table("offer", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gpu_hour_usd", schema.types.DecimalType(), nullable=True))
        batch_op.add_column(sa.Column("gpu_hour_usd_e10", sa.BigInteger(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_BACKFILL)
    else:
        op.execute(SQLITE_BACKFILL)
        op.execute(SQLITE_KEY)
    with op.batch_alter_table("offer", schema=None) as batch_op:
        batch_op.drop_index("ix_offer_gpu_slug_status")
        batch_op.create_index(
            "ix_offer_status_gpu_hour", ["status", "gpu_hour_usd_e10", "id"], unique=False
        )
        batch_op.create_index(
            "ix_offer_gpu_slug_status_gpu_hour",
            ["gpu_slug", "status", "gpu_hour_usd_e10", "id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("offer", schema=None) as batch_op:
        batch_op.drop_index("ix_offer_gpu_slug_status_gpu_hour")
        batch_op.drop_index("ix_offer_status_gpu_hour")
        batch_op.create_index("ix_offer_gpu_slug_status", ["gpu_slug", "status"], unique=False)
    if op.get_bind().dialect.name == "sqlite":
        # a native DROP COLUMN (SQLite >= 3.35): batch mode would copy and drop ``offer``,
        # which foreign keys from price_observation refuse once the catalog has rows
        op.execute("ALTER TABLE offer DROP COLUMN gpu_hour_usd_e10")
        op.execute("ALTER TABLE offer DROP COLUMN gpu_hour_usd")
        return
    with op.batch_alter_table("offer", schema=None) as batch_op:
        batch_op.drop_column("gpu_hour_usd_e10")
        batch_op.drop_column("gpu_hour_usd")
