"""The observations by price per GPU-hour: a pinned listing's default order walks them

A listing ``as_of`` a catalog version, in its default order (USD per GPU-hour), had to find
every matching offer's price at that version and sort them all: one probe of
``ix_price_observation_offer_version`` per match (200,000 probes unfiltered, 0.25 s on
SQLite and 1.5 s on PostgreSQL at 5 million observations). With this index it walks the
observations in price order, skipping those not in force at the version, and stops at the
page (``service.query.offers``, ``_pinned_walk``).

SQLite: an index on the exact integer key (the stored decimal is text, whose order is not
the numeric order), written as the listing writes it. PostgreSQL: the NUMERIC column,
whose order is the key's. Both then hold the offer and the versions, so whether a row was in
force at the version is read from the index alone: only those rows reach the offer.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

IN_FORCE = ("offer_id", "version_from", "version_to")
SQLITE_KEY = "CAST(round(CAST(gpu_hour_usd AS FLOAT) * 10000000000) AS INTEGER)"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index(
            "ix_price_observation_gpu_hour_key",
            "price_observation",
            [sa.text(SQLITE_KEY), *IN_FORCE],
            unique=False,
        )
    else:
        op.create_index(
            "ix_price_observation_gpu_hour",
            "price_observation",
            ["gpu_hour_usd", *IN_FORCE],
            unique=False,
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_price_observation_gpu_hour_key", table_name="price_observation")
    else:
        op.drop_index("ix_price_observation_gpu_hour", table_name="price_observation")
