"""offer.hourly_usd_e10: the sort key of USD per instance-hour, and its index

- ``offer.hourly_usd_e10`` (BIGINT): the current observation's ``hourly_usd`` x 10^10, an
  exact integer (stored decimals keep 10 places), written by ingest with each price as
  ``gpu_hour_usd_e10`` is (migration 0004). A sort key only, never returned.
- ``ix_offer_status_hourly`` (status, hourly_usd_e10, id): ``sort=price`` / ``-price`` walk
  it instead of sorting every match (``service.query.offers.list_offers``).

Existing rows are backfilled from their current (or last) observation. Plain ADD / DROP
COLUMN on both databases: a batch rebuild of ``offer`` on SQLite fails once observations
reference it (see 0010, 0013). Follows 0018, main's head when this branch was rebased
(0014 was in flight elsewhere: the merger rechains).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Decimals are canonical text on SQLite; through a double the key is exact below 10^5 USD
# (as 0004's backfill of gpu_hour_usd_e10).
SQLITE_BACKFILL = """
UPDATE offer SET hourly_usd_e10 = (
    SELECT CAST(ROUND(CAST(o.hourly_usd AS REAL) * 10000000000) AS INTEGER)
    FROM price_observation o WHERE o.id = offer.observation_id AND o.hourly_usd IS NOT NULL
)
"""
POSTGRES_BACKFILL = """
UPDATE offer SET hourly_usd_e10 = CAST(o.hourly_usd * 10000000000 AS BIGINT)
FROM price_observation o
WHERE o.id = offer.observation_id AND o.hourly_usd IS NOT NULL
"""


def upgrade() -> None:
    op.add_column("offer", sa.Column("hourly_usd_e10", sa.BigInteger(), nullable=True))
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.execute(SQLITE_BACKFILL if sqlite else POSTGRES_BACKFILL)
    op.create_index(
        "ix_offer_status_hourly", "offer", ["status", "hourly_usd_e10", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_offer_status_hourly", table_name="offer")
    if op.get_bind().dialect.name == "sqlite":
        # a plain DROP COLUMN: batch mode would recreate offer, which observations reference
        op.execute("ALTER TABLE offer DROP COLUMN hourly_usd_e10")
        return
    op.drop_column("offer", "hourly_usd_e10")
